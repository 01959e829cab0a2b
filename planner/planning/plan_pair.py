"""A plan's two files belong together: the CSV and the assumptions JSON beside it, from one `plan` run.

`plan` writes the JSON first, then the CSV (each atomically); a kill between the two leaves new assumptions
beside an old CSV.  The JSON records the SHA-256 of the CSV it was written with (`plan_csv_sha256`), so a
reader (simulate, deploy, --baseline) refuses a CSV that is not that one: from another run, edited, or cut
short.  A CSV with no JSON beside it (downloaded from the app, or older) is checked for a row cut mid-way.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path

from fleetfacts.errors import InputError

# The assumptions JSON's key holding the SHA-256 (hex) of the plan CSV's bytes written with it.
DIGEST_KEY = "plan_csv_sha256"


def csv_digest(data: bytes) -> str:
    """SHA-256 (hex) of a plan CSV's bytes."""
    return hashlib.sha256(data).hexdigest()


def check_plan_pair(path: Path, side: Path) -> None:
    """InputError when the plan CSV at `path` is not the one the assumptions JSON `side` was written with,
    or (with no digest to compare) when its last row is cut short."""
    data = _read_bytes(path)
    recorded = _recorded_digest(side)
    if recorded is not None and recorded != csv_digest(data):
        raise InputError(f"{path}: not the plan {side.name} beside it was written with (a plan run stopped "
                         f"between its two writes, or the CSV was edited or cut short since); re-run `python -m "
                         f"planner plan`, or remove {side.name} to use this CSV without its assumptions")
    if recorded is None:
        _check_last_row(path, data)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as err:
        raise InputError(f"{path}: not a readable plan file ({err.strerror})") from None


def _recorded_digest(side: Path) -> str | None:
    """The digest the assumptions JSON records; None when there is no JSON or it records none (older plans)."""
    try:
        doc = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None  # missing or unreadable: reading the assumptions themselves reports that
    value = doc.get(DIGEST_KEY) if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def _check_last_row(path: Path, data: bytes) -> None:
    """A file that does not end with a line end and whose last row has fewer cells than the header was cut
    mid-row (a copy or download stopped part-way)."""
    if not data or data.endswith((b"\n", b"\r")):
        return
    try:
        rows = [row for row in csv.reader(io.StringIO(data.decode("utf-8"), newline="")) if row]
    except (UnicodeDecodeError, csv.Error):
        return  # not a CSV at all: the table reader names the problem
    header = next((row for row in rows if not row[0].startswith("#")), None)
    if header is not None and len(rows[-1]) < len(header):
        line = data.count(b"\n") + 1
        raise InputError(f"{path}: the last row (line {line}) is cut short ({len(rows[-1])} of "
                         f"{len(header)} columns, no line end); copy the whole file again or re-run `python -m "
                         "planner plan`")
