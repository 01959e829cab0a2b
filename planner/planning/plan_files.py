"""Plan files: write_plan writes the plan CSV and its assumptions JSON beside it (together, the CSV's digest
recorded); read_plan and read_assumptions read them back, older formats included (a legacy first line, renamed
columns)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from fleetfacts.errors import InputError
from fleetfacts.schema import (
    PLAN,
    atomic_write_all,
    csv_cell,
    read_csv_text,
    unescape_formula,
    validate_frame,
)
from planner.planning.plan import PlanResult, plan_coverage
from planner.planning.plan_pair import DIGEST_KEY, check_plan_pair, csv_digest
from planner.sizing.assumptions import Assumptions
from planner.sizing.plan_row import plan_frame

ASSUMPTIONS_PREFIX = "fleetplan-assumptions:"


ASSUMPTIONS_SUFFIX = ".assumptions.json"


ASSUMPTIONS_FORMAT = "fleetplan-plan-assumptions"


def assumptions_path(plan_path: str | Path) -> Path:
    """plan.csv -> plan.assumptions.json (beside it)."""
    path = Path(plan_path)
    return path.with_name(path.stem + ASSUMPTIONS_SUFFIX)


def plan_csv_text(result: PlanResult) -> str:
    """The plan as a plain CSV: header on line 1, no comments, rounded, formula-safe."""
    safe = plan_frame(result.rows, rounded=True).astype(object).map(csv_cell)
    return safe.to_csv(index=False, lineterminator="\n")


def assumptions_document(result: PlanResult) -> dict[str, Any]:
    """What goes beside a plan: its assumptions, price sources and profile sources."""
    sources = result.sources.astype(object).where(result.sources.notna(), None)
    return {"format": ASSUMPTIONS_FORMAT, "assumptions": result.assumptions.to_dict(),
            "assumption_notes": {name: what for name, _, what in result.assumptions.describe()},
            "coverage": plan_coverage(result.rows),
            "price_sources": [r for r in sources.to_dict("records") if r["kind"] == "price"],
            "profile_sources": [r for r in sources.to_dict("records") if r["kind"] == "profile"]}


def write_plan(result: PlanResult, path: str | Path) -> Path:
    """Write the plan CSV and its assumptions JSON beside it (together: fleetfacts.schema.atomic_write_all);
    returns the JSON's path."""
    files = plan_file_bytes(result, path)
    atomic_write_all(files)
    return files[0][0]


def plan_file_bytes(result: PlanResult, path: str | Path) -> list[tuple[Path, bytes]]:
    """[(assumptions JSON path, its bytes), (plan CSV path, its bytes)], in the order they are renamed into place.
    The JSON records the CSV's SHA-256, so readers refuse a CSV from another run (planner.planning.plan_pair)."""
    data = plan_csv_text(result).encode("utf-8")
    document = {**assumptions_document(result), DIGEST_KEY: csv_digest(data)}
    return [(assumptions_path(path), json.dumps(document, indent=1, sort_keys=True).encode("utf-8")),
            (Path(path), data)]


def read_plan(path: str | Path) -> tuple[pd.DataFrame, Assumptions | None]:
    """Read a plan written by write_plan: (plan frame, assumptions from the JSON beside it, or None when
    there is none, e.g. a plan downloaded from the app).  A legacy plan with its assumptions on a
    '# fleetplan-assumptions:' first line is read too.  Raises InputError."""
    path = Path(path)
    legacy = _legacy_assumptions(path)
    check_plan_pair(path, assumptions_path(path))
    frame = validate_frame(read_csv_text(path), PLAN, str(path))
    for column in PLAN.columns:
        if column.kind == "str":
            frame[column.name] = frame[column.name].map(unescape_formula)
    if legacy is not None:
        return frame, legacy
    side = assumptions_path(path)
    return frame, _read_assumptions_json(side) if side.exists() else None


def check_plan_file(path: str | Path) -> None:
    """InputError when a plan CSV is cut short or is not the one its assumptions JSON was written with."""
    check_plan_pair(Path(path), assumptions_path(path))


def read_assumptions(path: str | Path) -> Assumptions:
    """Only the assumptions of a saved plan (to re-run it): its .assumptions.json, a legacy first line,
    or the JSON file itself.  Raises InputError when there are none."""
    path = Path(path)
    if path.name.endswith(ASSUMPTIONS_SUFFIX):
        return _read_assumptions_json(path)
    legacy = _legacy_assumptions(path)
    if legacy is not None:
        return legacy
    side = assumptions_path(path)
    if not side.exists():
        raise InputError(f"{path}: no assumptions beside this plan (expected {side.name})")
    return _read_assumptions_json(side)


def _read_assumptions_json(path: Path) -> Assumptions:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (IsADirectoryError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: not a plan assumptions file ({type(err).__name__})") from None
    if not isinstance(doc, dict) or doc.get("format") != ASSUMPTIONS_FORMAT or not isinstance(doc.get("assumptions"), dict):
        raise InputError(f"{path}: not a plan assumptions file (expected \"format\": \"{ASSUMPTIONS_FORMAT}\")")
    return Assumptions.from_dict(doc["assumptions"])


def _legacy_assumptions(path: Path) -> Assumptions | None:
    """The assumptions of a plan in the old format ('# fleetplan-assumptions: {...}' on line 1), else None."""
    try:
        with open(path, encoding="utf-8") as handle:
            first = handle.readline().rstrip("\r\n")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (IsADirectoryError, UnicodeDecodeError):
        raise InputError(f"{path}: not a readable plan file") from None
    marker = f"# {ASSUMPTIONS_PREFIX}"
    if not first.startswith(marker):
        return None
    try:
        data = json.loads(first[len(marker):])
    except json.JSONDecodeError as err:
        raise InputError(f"{path}, line 1: assumptions are not valid JSON ({err.msg})") from None
    except RecursionError:
        raise InputError(f"{path}, line 1: assumptions are nested too deeply to be a plan's") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}, line 1: assumptions must be a JSON object")
    try:
        return Assumptions.from_dict(data)
    except InputError as err:
        raise InputError(f"{path}, line 1: {err}") from None
