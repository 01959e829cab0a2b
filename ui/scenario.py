"""What-if scenarios: the app's knobs, scenario files, URL query strings, table checks.

A `Scenario` is everything the app needs to re-plan: the routes table, the
price and engine-operations tables (None = the bundled ones) and the
`Settings` outside the tables (provider, pricing type, engineer rate,
allow-lists, traffic growth, GPU price factor).  It round-trips through a
JSON scenario file (`scenario_to_json` / `scenario_from_json`), and the key
settings round-trip through a URL query string (`settings_to_query` /
`settings_from_query`).  Everything here is pure: bytes and strings in,
frames and dataclasses out; mistakes raise `InputError` naming the row.
"""

from __future__ import annotations

import io
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

# The bundled examples: the only folder whose request logs a routes table in the app may name (relative to it).
from fleetfacts.bundle import EXAMPLES_DIR
from fleetfacts.errors import InputError
from fleetfacts.schema import (
    ENGINE_OPS,
    PLAN,
    PRICES,
    ROUTES,
    Schema,
    slug,
    split_list,
    text_record_lines,
    unescape_formula,
    validate_frame,
)
from planner.engine.curves import engine_label
from planner.planning.catalog import Catalog
from planner.planning.exports import printable
from planner.planning.fleet import FleetResult, waterfall_fleets, waterfall_table
from planner.planning.fleet_units import Levers
from planner.planning.plan import PlanResult, make_plan, plan_coverage
from planner.planning.plan_files import plan_csv_text
from planner.planning.route_table import validate_routes
from planner.sizing.assumptions import Assumptions
from planner.sizing.plan_row import plan_rows
from planner.traffic.logs import DEFAULT_BLOCK_SIZE, log_to_routes
from ui.uploads import SessionLogs, readable_log

SCENARIO_FORMAT = "fleetplan-scenario"
SCENARIO_VERSION = 1
# Query-string keys of the key settings (short, so a shared link stays readable).
QUERY_KEYS = {
    "provider": "provider",
    "pricing_type": "pricing",
    "engineer_usd_per_hour": "eng_rate",
    "engines": "engines",
    "gpus": "gpus",
    "precisions": "precisions",
    "configs": "configs",
    "traffic_growth": "growth",
    "gpu_price_factor": "gpu_price_x",
    "allow_prerelease": "prerelease",
    "allow_unverified_latency": "unverified",
}
PRICING_TYPES = PRICES.column("pricing_type").choices
# Settings that are on/off switches (the planner's assumptions of the same name).
BOOL_SETTINGS = ("allow_prerelease", "allow_unverified_latency")
# Settings that narrow every route's allow-list column of the same name.
ALLOW_SETTINGS = ("engines", "gpus", "precisions", "configs")
# Growth and price factors outside this range are typos, not what-ifs.
FACTOR_RANGE = (0.01, 100.0)
# An uploaded file larger than this is not a routes/prices table nor a scenario (protects the app's memory).
MAX_UPLOAD_BYTES = 20 * 2**20


@dataclass(frozen=True)
class Settings:
    """The what-if knobs that are not tables.

    provider: "" = the cheapest provider per GPU; pricing_type: on-demand /
    reserved / spot; engineer_usd_per_hour: None = the planner's labelled
    default; engines/gpus/precisions/configs: allow-lists applied to every route
    (() = no restriction); traffic_growth multiplies every route's load;
    gpu_price_factor multiplies every GPU price; allow_prerelease lets pre-release and
    development engine builds be recommended; allow_unverified_latency ranks online options with no
    latency measurement behind them by cost alone (both the planner's assumptions of those names).
    """

    provider: str = ""
    pricing_type: str = "on-demand"
    engineer_usd_per_hour: float | None = None
    engines: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()
    configs: tuple[str, ...] = ()
    traffic_growth: float = 1.0
    gpu_price_factor: float = 1.0
    allow_prerelease: bool = False
    allow_unverified_latency: bool = False

    def __post_init__(self) -> None:
        if self.pricing_type not in PRICING_TYPES:
            raise InputError(f"pricing type: expected one of {', '.join(PRICING_TYPES)}, got {self.pricing_type!r}")
        for name in ("traffic_growth", "gpu_price_factor"):
            value = getattr(self, name)
            if not (FACTOR_RANGE[0] <= value <= FACTOR_RANGE[1]):
                raise InputError(f"{name}: expected a factor between {FACTOR_RANGE[0]:g} and "
                                 f"{FACTOR_RANGE[1]:g}, got {value!r}")
        if self.engineer_usd_per_hour is not None and not self.engineer_usd_per_hour >= 0:
            raise InputError(f"engineer_usd_per_hour: expected a rate >= 0, got {self.engineer_usd_per_hour!r}")


@dataclass(frozen=True, eq=False)
class Scenario:
    """A named what-if: routes, optional price/ops overrides (None = bundled), settings."""

    name: str
    routes: pd.DataFrame
    settings: Settings = field(default_factory=Settings)
    prices: pd.DataFrame | None = None
    ops: pd.DataFrame | None = None


# ---------------------------------------------------------------- tables

_LINE_RE = re.compile(r", line (\d+), ")


def validate_table(frame: pd.DataFrame, schema: Schema, where: str) -> pd.DataFrame:
    """Validate an in-app (edited) table; errors name the 1-based row and, for routes, its name.

    Rows that are entirely empty (a new row the user has not filled) are dropped.
    Raises InputError.
    """
    raw = _as_cells(frame)
    filled = [not all(_blank(v) for v in row) for row in raw.itertuples(index=False)]
    raw = raw.loc[filled].reset_index(drop=True) if len(raw) else raw
    try:
        return validate_frame(raw, schema, where)
    except InputError as err:
        raise InputError(_line_to_row(str(err), raw)) from None


def check_routes(frame: pd.DataFrame, where: str = "routes table", logs: SessionLogs | None = None) -> pd.DataFrame:
    """A routes table edited in the app: schema plus per-traffic rules (planner.planning.route_table.validate_routes),
    errors naming the row and the route, and logs the app may read (resolve_logs; `logs`: this session's
    uploads).  Raises InputError."""
    typed = validate_table(frame, ROUTES, where)
    try:
        typed = validate_routes(typed, where)
    except InputError as err:
        raise InputError(_line_to_row(str(err), _as_cells(typed))) from None
    return resolve_logs(typed, EXAMPLES_DIR, where, logs)


EDITED_NOTE = "edited in the app ({changes}); the rest of this note describes the row before: "


def edits_by_route(base: pd.DataFrame, edited: pd.DataFrame) -> dict[str, str]:
    """Per route (by name) present in both tables whose cells other than `notes` changed: 'rate_rps 5 → 8, ...'."""
    before = {str(r.get("name")): r for r in _as_cells(base).to_dict("records")}
    out = {}
    for row in _as_cells(edited).to_dict("records"):
        old = before.get(str(row.get("name")))
        if old is None:
            continue
        changes = [f"{column} {_cell(old.get(column))} → {_cell(value)}" for column, value in row.items()
                   if column != "notes" and column in old and _cell(old.get(column)) != _cell(value)]
        if changes:
            out[str(row["name"])] = ", ".join(changes)
    return out


def with_stale_notes_marked(base: pd.DataFrame, edited: pd.DataFrame,
                            changes: dict[str, str] | None = None) -> pd.DataFrame:
    """The edited routes table with each edited route's unchanged, non-empty notes prefixed by what was edited, so
    a note written for the row before ("rate 5 req/s") is not read as describing the row now.  changes:
    edits_by_route(base, edited), when the caller has it."""
    changes = edits_by_route(base, edited) if changes is None else changes
    if not changes or "notes" not in edited.columns:
        return edited
    old_notes = {str(r.get("name")): r.get("notes") for r in _as_cells(base).to_dict("records")}
    out = edited.copy()
    for i, row in enumerate(_as_cells(edited).to_dict("records")):
        name, notes = str(row.get("name")), row.get("notes")
        if name in changes and not _blank(notes) and notes == old_notes.get(name):
            out.iloc[i, out.columns.get_loc("notes")] = EDITED_NOTE.format(changes=changes[name]) + str(notes)
    return out


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _as_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """Object cells with None for every kind of missing value (NaN, pd.NA, NaT)."""
    cells = frame.astype(object)
    return cells.where(frame.notna(), None)


def _blank(value: object) -> bool:
    return value is None or str(value).strip() == ""


def _line_to_row(message: str, raw: pd.DataFrame) -> str:
    match = _LINE_RE.search(message)
    if not match:
        return message
    row = int(match.group(1)) - 1  # the file line counts the header
    label = f", row {row}"
    if "name" in raw.columns and 0 < row <= len(raw) and not _blank(raw["name"].iloc[row - 1]):
        label += f" (route {raw['name'].iloc[row - 1]!r})"
    return message[: match.start()] + label + ", " + message[match.end():]


def check_upload_size(data: str | bytes, where: str, what: str) -> None:
    """InputError when an uploaded table or scenario is over MAX_UPLOAD_BYTES (checked before it is parsed)."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise InputError(f"{where}: file is {len(data) / 2**20:.1f} MiB; {what} is expected to be under "
                         f"{MAX_UPLOAD_BYTES / 2**20:.0f} MiB")


def read_csv_upload(data: bytes, schema: Schema, where: str) -> pd.DataFrame:
    """Parse and validate an uploaded CSV (bytes); leading '#' lines are skipped.

    Raises InputError naming `where` (the file name), the line and the column.
    """
    check_upload_size(data, where, f"a {schema.name} table")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{where}: not a UTF-8 text file (expected a {schema.name} CSV)") from None
    lines = text.splitlines()
    comments = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    if not "".join(lines[comments:]).strip():
        raise InputError(f"{where}: the file is empty (expected a {schema.name} CSV with a header row: "
                         f"{', '.join(c.name for c in schema.columns if c.required)}, ...)")
    try:
        raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skiprows=comments)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"{where}: not a readable CSV file ({first})") from None
    line_numbers = text_record_lines(text, comments)
    if len(line_numbers) == len(raw):
        raw.index = pd.Index(line_numbers, name="line")
    return validate_frame(raw, schema, where)


# The app re-plans every route on every edit: past this many the page stops being interactive (a
# 20,000-route file took ~20 s and 2 GB per rerun).  Larger route sets: `python -m planner plan`.
MAX_APP_ROUTES = 500


def check_routes_count(routes: pd.DataFrame, where: str) -> pd.DataFrame:
    """`routes` when it has 1..MAX_APP_ROUTES rows; else InputError saying what to do."""
    if routes.empty:
        raise InputError(f"{where}: no routes (the table has a header but no rows)")
    if len(routes) > MAX_APP_ROUTES:
        raise InputError(f"{where}: {len(routes):,} routes; the app plans up to {MAX_APP_ROUTES} interactively "
                         f"(plan larger files with `python -m planner plan --routes FILE`)")
    return routes


def routes_from_log_upload(path: Path, model: str | None = None,
                           **slos: float | None) -> tuple[pd.DataFrame, list[str]]:
    """A saved request log (`save_uploaded_log`) -> (ROUTES table whose routes replay it, summary lines), via
    planner.traffic.logs.log_to_routes; errors and lines name the file, not the session folder."""
    try:
        # fmt, route, strict, block_size and cache_tokens named (their defaults) so that mypy sees **slos fills none
        # of them.
        routes, lines = log_to_routes(path, fmt=None, route=None, strict=False, model=model,
                                      block_size=DEFAULT_BLOCK_SIZE, cache_tokens=None, **slos)
    except InputError as err:
        raise InputError(str(err).replace(str(path), path.name)) from None
    return routes.assign(log=str(path)), [line.replace(str(path), path.name) for line in lines]


def ignored_fields(routes: pd.DataFrame, where: str = "routes table") -> list[str]:
    """One warning per route that sets a field its traffic kind ignores (ROUTES documents a column as
    `online: ...` or `batch: ...`): e.g. `rate_rps` on a batch route, `deadline_hours` on an online one.
    A value equal to the column's default is not counted (validation fills it in)."""
    warnings = []
    for row in routes.to_dict("records"):
        other = "batch" if row.get("traffic") == "online" else "online"
        ignored = [c.name for c in ROUTES.columns if c.doc.startswith(f"{other}:") and c.name in row
                   and not _unset(row[c.name], c.default)]
        if ignored:
            warnings.append(f"{where}: route '{printable(str(row.get('name')))}' is {row.get('traffic')}: "
                            f"{', '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} for {other} routes "
                            f"and ignored in its plan (clear {'it' if len(ignored) == 1 else 'them'}, or make "
                            f"the route {other})")
    return warnings


def _unset(value: object, default: object) -> bool:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return True
    return (isinstance(value, str) and not value.strip()) or (default is not None and value == default)


# An infeasible route's SLO metric as the planner's notes name it -> its plan column stem and routes column.
_SLO_METRICS = {"TPOT": ("tpot", "tpot_slo_ms"), "TTFT": ("ttft", "ttft_slo_ms"),
                "end-to-end": ("e2e", "e2e_slo_ms")}
_GENERIC_FIX = "relax its SLOs, lower its rate, or allow more engines, GPUs, precisions or engine settings."


def infeasible_hint(notes: str, options: pd.DataFrame) -> str:
    """What to change for an infeasible route, by the binding cause its plan notes and `options` (the route's
    evaluated options, planner OPTION rows) show: a missing price, no profile, the context window, an SLO no
    option reaches even with one request in flight (more GPUs will not help), or its load."""
    if notes.startswith("missing price"):
        return "add a price for these GPUs (Prices and engine update costs), or choose another provider or pricing type."
    if notes.startswith("no profile"):
        return "allow more engines, GPUs, precisions or engine settings, or profile the model."
    if "context window" in notes:
        return ("its requests (prompt + output at its SLO percentile) are longer than the model's context window: "
                "shorten them (the input/output length columns) or serve a model with a longer context; relaxing "
                "SLOs or adding GPUs will not help.")
    metric = next((m for m in _SLO_METRICS if notes.startswith("no option meets the SLOs") and m in notes), None)
    if metric is None:
        return _GENERIC_FIX
    return _slo_hint(metric, "at concurrency 1" in notes, options) + _unpriced_hint(options)


def _slo_hint(metric: str, alone: bool, options: pd.DataFrame) -> str:
    stem, column = _SLO_METRICS[metric]
    predicted = pd.to_numeric(options.get(f"{stem}_pred_ms", pd.Series(dtype=float)), errors="coerce")
    best = float(predicted[np.isfinite(predicted)].min()) if np.isfinite(predicted).any() else math.nan
    bound = f" (the best any allowed option predicts is {best:,.1f} ms)" if math.isfinite(best) else ""
    if alone:
        return (f"the {metric} SLO is tighter than any allowed option reaches with a single request in flight"
                f"{bound}: more GPUs or a lower rate will not help. Raise {column}"
                + (f" to at least {best:,.1f} ms" if math.isfinite(best) else "")
                + ", or allow faster engines, GPUs or precisions.")
    return (f"its load is the binding cause: no allowed option holds the {metric} SLO at its rate even on the most "
            f"replicas tried{bound}. Lower rate_rps or peak_to_mean, relax {column}, or allow more engines, GPUs, "
            "precisions or engine settings.")


def _unpriced_hint(options: pd.DataFrame) -> str:
    reasons = options.get("reason", pd.Series(dtype=str)).astype(str)
    gpus = sorted(set(options.loc[reasons.str.startswith("no price"), "gpu"].astype(str)))
    return (f" Options on {', '.join(gpus)} have no price at this provider and pricing type: a price for them may "
            "help." if gpus else "")


def resolve_logs(routes: pd.DataFrame, folder: Path, where: str, logs: SessionLogs | None = None) -> pd.DataFrame:
    """A routes table as the app keeps it, each `log` as ui.uploads.readable_log gives it: relative to `folder`
    (the bundled examples folder, where `examples/routes.csv` names its logs: `traces/...`), never this machine's
    absolute path to it, or the path of this session's upload (`logs`) it names.

    Any other log raises InputError naming each such route (an absolute path elsewhere, `..`, another session's
    upload, a file neither bundled nor uploaded): the app reads nothing else, and never sizes a route on
    arrivals made up from the log's statistics."""
    shown, refused = [], []
    for name, given in zip(routes["name"], routes["log"], strict=True):
        try:
            shown.append(readable_log(given if isinstance(given, str) else "", logs, folder))
        except InputError as why:
            refused.append(f"route '{printable(str(name))}' replays request log {printable(str(given))!r}, which "
                           f"the app cannot read ({why})")
    if refused:
        raise InputError(f"{where}: {'; '.join(refused)}: upload the log under 'From a request log' first (a "
                         f"routes file then finds it by file name), or clear the route's `log` to size it on its "
                         f"rate and arrival CV")
    return routes.assign(log=shown)


def planning_logs(routes: pd.DataFrame, folder: Path = EXAMPLES_DIR) -> pd.DataFrame:
    """`routes` with each log that lies in `folder` (as `resolve_logs` shows it) as the absolute path the
    planner reads; others unchanged."""
    base = folder.resolve()
    return routes.assign(log=[str(found) if (found := _inside(given, base)) else given for given in routes["log"]])


def _inside(given: object, base: Path) -> Path | None:
    """The file `given` (relative to `base`, or absolute) names inside `base`, or None."""
    if not isinstance(given, str) or not given:
        return None
    candidate = (base / given).resolve()
    return candidate if candidate.is_relative_to(base) and candidate.is_file() else None


def unchecked_plan(result: PlanResult, reason: str) -> PlanResult:
    """`result` with every route's notes led by 'NOT CHECKED BY SIMULATION (reason)': how a plan the
    simulation check did not confirm travels in a download (CSV and workbook)."""
    lead = f"NOT CHECKED BY SIMULATION ({reason})"
    return replace(result, rows=tuple(replace(r, notes=f"{lead}; {r.notes}" if r.notes.strip() else lead)
                                      for r in result.rows))


def merge_routes(base: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """`base` with `new` appended; a new route whose name is taken gets '-2', '-3', ... appended."""
    taken = set(base["name"])
    names = []
    for name in new["name"]:
        candidate, n = name, 2
        while candidate in taken:
            candidate, n = f"{name}-{n}", n + 1
        taken.add(candidate)
        names.append(candidate)
    return pd.concat([base, new.assign(name=names)], ignore_index=True)


# ---------------------------------------------------------------- settings applied to tables

def apply_settings(routes: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """Routes as the planner should see them: load scaled by growth, allow-lists narrowed.

    A route whose own allow-list and the global one have nothing in common
    raises InputError (an empty list would otherwise mean "everything").
    """
    out = routes.copy()
    growth = settings.traffic_growth
    out["rate_rps"] = out["rate_rps"] * growth
    batch = out["num_requests"].notna()
    out.loc[batch, "num_requests"] = [max(1, math.ceil(n * growth)) for n in out.loc[batch, "num_requests"]]
    for column in ALLOW_SETTINGS:
        allowed = getattr(settings, column)
        if allowed:
            out[column] = [_narrow(cell, allowed, column, name) for cell, name in zip(out[column], out["name"], strict=True)]
    return out


def _narrow(cell: object, allowed: tuple[str, ...], column: str, route: str) -> str:
    own = split_list(cell)
    kept = [a for a in allowed if not own or a in own]
    if not kept:
        raise InputError(f"route {route!r}: its {column} ({'; '.join(own)}) and the {column} allowed in the "
                         f"sidebar ({', '.join(allowed)}) have nothing in common; widen one of them")
    return ";".join(kept)


def scale_prices(prices: pd.DataFrame, factor: float) -> pd.DataFrame:
    """Every GPU price multiplied by `factor` (a what-if; the notes say so)."""
    if factor == 1.0:
        return prices
    out = prices.copy()
    out["usd_per_gpu_hour"] = out["usd_per_gpu_hour"] * factor
    out["notes"] = [f"{n}; what-if: x{factor:g}".lstrip("; ") for n in out["notes"].fillna("")]
    return out


# ---------------------------------------------------------------- planning a scenario

# Sensitivity grid: traffic multipliers and GPU-price multipliers around today's setting.
SENSITIVITY_GROWTH = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
SENSITIVITY_PRICE = (0.75, 1.0, 1.25)


def scenario_assumptions(settings: Settings, base: Assumptions | None = None) -> Assumptions:
    """The planner's Assumptions with the scenario's provider, pricing type, engineer rate and policy switches."""
    base = base or Assumptions()
    rate = base.engineer_usd_per_hour if settings.engineer_usd_per_hour is None else settings.engineer_usd_per_hour
    return replace(base, provider=settings.provider or None, pricing_type=settings.pricing_type,
                   engineer_usd_per_hour=rate, allow_prerelease=settings.allow_prerelease,
                   allow_unverified_latency=settings.allow_unverified_latency)


def plan_scenario(routes: pd.DataFrame, inputs: Catalog, settings: Settings, assumptions: Assumptions | None = None,
                  prices: pd.DataFrame | None = None, ops: pd.DataFrame | None = None,
                  checked: bool = False) -> PlanResult:
    """Plan the routes under the scenario (growth, allow-lists, price factor, tables); raises InputError.

    checked: run the planner's simulation check, as `python -m planner plan` does (seconds); False
    keeps the one-replica screen's sizing (milliseconds: the sensitivity grid, the first paint).
    """
    planned, tables, a = scenario_inputs(routes, inputs, settings, assumptions, prices, ops)
    return make_plan(planned, tables, a, check_by_simulation=checked)


def scenario_inputs(routes: pd.DataFrame, inputs: Catalog, settings: Settings, assumptions: Assumptions | None = None,
                    prices: pd.DataFrame | None = None, ops: pd.DataFrame | None = None
                    ) -> tuple[pd.DataFrame, Catalog, Assumptions]:
    """The routes, catalog and assumptions the planner sees under the scenario (growth, allow-lists, price
    factor, tables); raises InputError."""
    tables = replace(inputs, prices_df=scale_prices(inputs.prices_df if prices is None else prices,
                                                    settings.gpu_price_factor),
                     ops_df=inputs.ops_df if ops is None else ops)
    typed = planning_logs(validate_routes(routes, "routes table"))
    return apply_settings(typed, settings), tables, scenario_assumptions(settings, assumptions)


def fleet_scenario(routes: pd.DataFrame, inputs: Catalog, settings: Settings, levers: Levers, baseline: PlanResult,
                   assumptions: Assumptions | None = None, prices: pd.DataFrame | None = None,
                   ops: pd.DataFrame | None = None, check: bool = True) -> tuple[FleetResult, pd.DataFrame]:
    """The scenario's fleet with `levers` (as `python -m planner fleet` makes it) and its $ by lever
    (planner.planning.fleet.waterfall_table: route by route, engineering once, each enabled lever added).

    baseline: the scenario's route-by-route plan with its simulation check (plan_scenario(..., checked=True)),
    so it is made once.  Raises InputError, or FleetInfeasibleError when no fleet serves every route.
    """
    planned, tables, a = scenario_inputs(routes, inputs, settings, assumptions, prices, ops)
    fleets = waterfall_fleets(planned, tables, a, levers, baseline, check=check)
    return fleets[-1][1], waterfall_table(fleets)


def sensitivity_table(routes: pd.DataFrame, inputs: Catalog, settings: Settings,
                      assumptions: Assumptions | None = None, prices: pd.DataFrame | None = None,
                      ops: pd.DataFrame | None = None, growths: Sequence[float] = SENSITIVITY_GROWTH,
                      price_factors: Sequence[float] = SENSITIVITY_PRICE) -> pd.DataFrame:
    """Fleet totals re-planned over a grid of traffic growth x GPU-price factor (relative to today's)."""
    rows = []
    for growth in growths:
        for factor in price_factors:
            what_if = replace(settings, traffic_growth=settings.traffic_growth * growth,
                              gpu_price_factor=settings.gpu_price_factor * factor)
            totals = plan_totals(plan_scenario(routes, inputs, what_if, assumptions, prices, ops).plan)
            rows.append({"traffic_growth": growth, "gpu_price_factor": factor, **totals})
    return pd.DataFrame(rows)


def timed_plan(routes: pd.DataFrame, inputs: Catalog, settings: Settings, assumptions: Assumptions | None = None,
               prices: pd.DataFrame | None = None, ops: pd.DataFrame | None = None,
               checked: bool = False) -> tuple[PlanResult, float]:
    """plan_scenario and the seconds it took."""
    start = time.perf_counter()
    result = plan_scenario(routes, inputs, settings, assumptions, prices, ops, checked)
    return result, time.perf_counter() - start


def plan_csv_bytes(result: PlanResult) -> bytes:
    """The plan file exactly as `python -m planner plan --out` writes it: a plain CSV (header on line
    1, rounded, formula-safe) that `pd.read_csv` and `planner.planning.plan_files.read_plan` read as is.  Its
    assumptions and sources travel in the workbook (`planner.planning.exports.workbook_bytes`)."""
    return plan_csv_text(result).encode("utf-8")


def read_plan_upload(data: bytes, where: str) -> pd.DataFrame:
    """A saved plan CSV (this format, or the legacy one with '#' lines first) as a PLAN frame; raises InputError."""
    frame = read_csv_upload(data, PLAN, where)
    for column in PLAN.columns:
        if column.kind == "str":
            frame[column.name] = frame[column.name].map(unescape_formula)
    return frame


def _settings_dict(settings: Settings) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(settings).items()}


# ---------------------------------------------------------------- query string

def settings_to_query(settings: Settings) -> dict[str, str]:
    """The settings that differ from the defaults, as query-string parameters."""
    default = Settings()
    query = {}
    for name, key in QUERY_KEYS.items():
        value = getattr(settings, name)
        if value == getattr(default, name):
            continue
        query[key] = ",".join(value) if isinstance(value, tuple) else ("1" if value else "0") \
            if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)
    return query


def settings_from_query(params: Mapping[str, object], base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Settings from query-string parameters; bad values are skipped with a warning each."""
    settings = base or Settings()
    warnings = []
    for name, key in QUERY_KEYS.items():
        if key not in params:
            continue
        raw = params[key]
        raw = raw[-1] if isinstance(raw, (list, tuple)) else raw
        try:
            settings = with_setting(settings, name, _parse_setting(name, str(raw)))
        except (InputError, ValueError) as err:
            warnings.append(f"link parameter {key}={raw!r} ignored: {err}")
    return settings, warnings


def drop_unknown(settings: Settings, known: Mapping[str, Sequence[str]],
                 where: str = "link") -> tuple[Settings, list[str]]:
    """Settings without the allow-list values that are not in `known` (say gpus=h999), and one
    warning per allow-list that lost any, naming what was dropped and what is known.

    `where` is "link" (the warning names the query-string key) or a file name.
    """
    warnings = []
    for name in ALLOW_SETTINGS:
        values = getattr(settings, name)
        unknown = [v for v in values if v not in known.get(name, ())]
        if not unknown:
            continue
        kept = tuple(v for v in values if v not in unknown)
        settings = with_setting(settings, name, kept)
        source = f"link parameter {QUERY_KEYS[name]}" if where == "link" else f"{where}: setting {name}"
        effect = f"allowed: {', '.join(kept)}" if kept else f"no {name} restriction applied"
        warnings.append(f"{source}: unknown {', '.join(unknown)} ignored ({effect}; known: "
                        f"{', '.join(known.get(name, ())) or 'none'})")
    return settings, warnings


def with_setting(settings: Settings, name: str, value: object) -> Settings:
    """`settings` with its field `name` set to `value` (of that field's type)."""
    # The field is named at run time, so mypy cannot match the value to the field's type.
    change: dict[str, Any] = {name: value}
    return replace(settings, **change)


def _parse_setting(name: str, raw: str) -> object:
    if name in BOOL_SETTINGS:
        if raw.strip().lower() not in ("0", "1", "true", "false"):
            raise ValueError("expected 1 or 0")
        return raw.strip().lower() in ("1", "true")
    if name in ALLOW_SETTINGS:
        return tuple(dict.fromkeys(slug(v) for v in raw.split(",") if v.strip()))
    if name in ("traffic_growth", "gpu_price_factor", "engineer_usd_per_hour"):
        try:
            value = float(raw)
        except ValueError:
            raise ValueError("expected a number") from None
        if not math.isfinite(value):
            raise ValueError("expected a finite number")
        return value
    return slug(raw)


# ---------------------------------------------------------------- scenario files

def scenario_to_json(scenario: Scenario) -> str:
    """The scenario as a JSON document (routes and overridden tables as records)."""
    doc = {
        "format": SCENARIO_FORMAT,
        "version": SCENARIO_VERSION,
        "name": scenario.name,
        "settings": _settings_dict(scenario.settings),
        "routes": _records(scenario.routes, ROUTES),
        "prices": None if scenario.prices is None else _records(scenario.prices, PRICES),
        "engine_ops": None if scenario.ops is None else _records(scenario.ops, ENGINE_OPS),
    }
    return json.dumps(doc, indent=1, default=_json_scalar)


def _records(frame: pd.DataFrame, schema: Schema) -> list[dict]:
    cells = _as_cells(frame.reindex(columns=schema.names))
    return [{k: v for k, v in row.items() if not _blank(v)} for row in cells.to_dict("records")]


def _json_scalar(value: object) -> object:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def scenario_from_json(text: str | bytes, where: str = "scenario file") -> Scenario:
    """Load a scenario file; raises InputError saying what is wrong with it."""
    check_upload_size(text, where, "a scenario file")
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{where}: not a scenario file (invalid JSON: {err})") from None
    except RecursionError:
        raise InputError(f"{where}: not a scenario file (JSON nested deeper than Python can parse)") from None
    if not isinstance(doc, dict) or doc.get("format") != SCENARIO_FORMAT:
        raise InputError(f"{where}: not a Fleetplan scenario file (expected \"format\": \"{SCENARIO_FORMAT}\")")
    if doc.get("version") != SCENARIO_VERSION:
        raise InputError(f"{where}: scenario version {doc.get('version')!r} is not supported "
                         f"(this Fleetplan reads version {SCENARIO_VERSION})")
    loaded = Scenario(
        name=str(doc.get("name") or "scenario"),
        routes=_table(doc.get("routes"), ROUTES, f"{where}, routes"),
        settings=_settings(doc.get("settings") or {}, where),
        prices=None if doc.get("prices") is None else _table(doc["prices"], PRICES, f"{where}, prices"),
        ops=None if doc.get("engine_ops") is None else _table(doc["engine_ops"], ENGINE_OPS, f"{where}, engine_ops"),
    )
    check_routes_count(loaded.routes, where)
    return loaded


def _table(records: object, schema: Schema, where: str) -> pd.DataFrame:
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise InputError(f"{where}: expected a list of rows (objects)")
    frame = pd.DataFrame(records) if records else pd.DataFrame(columns=schema.names)
    return validate_table(frame, schema, where)


def _settings(raw: object, where: str) -> Settings:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: \"settings\" must be an object")
    known = {f.name for f in fields(Settings)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise InputError(f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    # Values from a JSON document: Settings (its __post_init__, or TypeError below) checks them.
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
    try:
        return Settings(**values)
    except TypeError as err:
        raise InputError(f"{where}: bad settings ({err})") from None


# ---------------------------------------------------------------- comparing plans

def plan_totals(plan: pd.DataFrame) -> dict[str, float]:
    """Fleet totals of a plan (ok routes only): GPUs, $/month, and how many routes are infeasible."""
    ok = plan[plan["status"] == "ok"]
    return {
        "routes": float(len(plan)),
        "infeasible": float((plan["status"] != "ok").sum()),
        "gpus": float(pd.to_numeric(ok["gpus"], errors="coerce").sum()),
        "gpu_usd_per_month": float(pd.to_numeric(ok["gpu_usd_per_month"], errors="coerce").sum()),
        "eng_usd_per_month": float(pd.to_numeric(ok["eng_usd_per_month"], errors="coerce").sum()),
        "total_usd_per_month": float(pd.to_numeric(ok["total_usd_per_month"], errors="coerce").sum()),
    }


# Per scenario, the comparison's columns: "<scenario>: <header>".
COMPARE_HEADERS = {"choice": "engine / GPU", "gpus": "GPUs", "usd_per_month": "$/month"}


def compare_plans(plans: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Side-by-side table: one row per route (plus a fleet total), per scenario its choice, GPUs and
    $/month under human headers ("today: $/month"); the fleet total's choice cell says what its sums
    cover ("3 of 4 routes; chat infeasible") and, when the scenarios planned different routes, that
    their totals are not like for like."""
    planned = {name: frozenset(plan.loc[plan["status"] == "ok", "route"]) for name, plan in plans.items()}
    same_routes = len(set(planned.values())) <= 1
    columns: dict[tuple[str, str], Sequence[object]] = {}
    for name, plan in plans.items():
        indexed = plan.set_index("route")
        totals = plan_totals(plan)
        columns[(name, "choice")] = [_choice(r) for _, r in indexed.iterrows()] + [_covered(plan, same_routes)]
        columns[(name, "gpus")] = [*pd.to_numeric(indexed["gpus"], errors="coerce"), totals["gpus"]]
        columns[(name, "usd_per_month")] = [*pd.to_numeric(indexed["total_usd_per_month"], errors="coerce"),
                                            totals["total_usd_per_month"]]
        columns[(name, "index")] = [*indexed.index, "fleet total"]
    routes = list(dict.fromkeys(r for (_, kind), v in columns.items() if kind == "index" for r in v))
    out = pd.DataFrame(index=routes)
    for (name, kind), values in columns.items():
        if kind != "index":
            out[f"{name}: {COMPARE_HEADERS[kind]}"] = pd.Series(values, index=columns[(name, "index")])
    out.index.name = "route"
    return out.reset_index()


NOT_LIKE_FOR_LIKE = "different routes planned than the other scenarios: totals not like for like"


def _covered(plan: pd.DataFrame, same_routes: bool = True) -> str:
    text = plan_coverage(plan_rows(plan))
    return text if same_routes else f"{text}; {NOT_LIKE_FOR_LIKE}"


def _choice(row: pd.Series) -> str:
    if row.get("status") != "ok":
        return "infeasible"
    engine = engine_label(row["engine"], row["engine_version"], row.get("engine_config"))
    return f"{engine} / {row['gpu']} {row['precision']} tp{row['tp']}"
