"""One profile folder: profile.csv (PROFILE rows, appended one at a time) and env.json.

Each row is validated against fleetfacts.schema.PROFILE before it is written,
then flushed and fsync'ed, so a killed run loses no completed point and never
leaves a row the planner cannot read.  env.json keeps one record per run
(invocation) of the sweep into this folder.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from fleetfacts.errors import InputError
from fleetfacts.schema import MEASURED_STATUSES, PROFILE, escape_formula, validate_frame
from measure.points import Point, point_from_mapping
from measure.redact import redact_json, redact_text

log = logging.getLogger(__name__)

PROFILE_FILE = "profile.csv"
# Where a torn last row (a kill or a full disk during a write) is set aside, beside profile.csv.
TORN_SUFFIX = ".torn"
ENV_FILE = "env.json"
# Held (fcntl.flock) by the run writing a folder, so a second run on it fails at once instead of measuring
# and writing the same points twice.  The file stays; the lock goes with the process (a kill frees it).
LOCK_FILE = ".measure.lock"
# Significant digits kept for floats in profile.csv: far finer than run-to-run noise.
FLOAT_DIGITS = 7


def default_out_dir(gpu: str, engine: str, model: str, precision: str, tp: int, tag: str = "") -> Path:
    """profiles/measured/<gpu>/<engine>-<model>-<precision>-tp<N>[-<tag>]/"""
    name = f"{engine}-{model}-{precision}-tp{tp}" + (f"-{tag}" if tag else "")
    return Path("profiles") / "measured" / gpu / name


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if not math.isfinite(value) else format(value, f".{FLOAT_DIGITS}g")
    return str(escape_formula(redact_text(value)) if isinstance(value, str) else value)


def _raw_or_cell(value: object) -> str:
    return value if isinstance(value, str) else _cell(value)


class ProfileDir:
    """Reads and appends one profile folder."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.csv_path = self.path / PROFILE_FILE
        self.env_path = self.path / ENV_FILE

    def exists(self) -> bool:
        return self.csv_path.is_file()

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder's lock for a run; InputError at once when another run holds it."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / LOCK_FILE, "a+b") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise InputError(f"{self.path}: another `measure profile` run is writing this folder "
                                 "now; wait for it to end (then --resume), or pass another --out") from None
            yield

    def rows(self) -> list[dict]:
        """Rows already written (raw strings); a torn last line (no line end: a kill or a full disk) is ignored.
        InputError when profile.csv is not a UTF-8 CSV file."""
        if not self.csv_path.is_file():
            return []
        try:
            text = self.csv_path.read_bytes().decode("utf-8")
            rows = list(csv.DictReader(io.StringIO(text[:text.rfind("\n") + 1], newline="")))
        except (UnicodeDecodeError, csv.Error) as err:
            raise InputError(f"{self.csv_path}: not a profile CSV file ({type(err).__name__}: {err}); "
                             "move it away or pass another --out") from None
        return [r for r in rows if None not in r and r.get("date")]

    def repair_tail(self) -> Path | None:
        """Set aside a torn last row: the bytes after the last line end (a write cut by a kill or a full
        disk) go to profile.csv.torn, and profile.csv is cut back to its last whole row (atomically).
        Returns the file the torn bytes went to, or None when the file ends cleanly."""
        if not self.csv_path.is_file():
            return None
        data = self.csv_path.read_bytes()
        if not data or data.endswith(b"\n"):
            return None
        keep = data[:data.rfind(b"\n") + 1]
        torn = self.csv_path.with_name(PROFILE_FILE + TORN_SUFFIX)
        with open(torn, "ab") as aside:
            aside.write(data[len(keep):] + b"\n")
            aside.flush()
            os.fsync(aside.fileno())
        self._replace_bytes(keep)
        log.warning("%s: its last row was torn (cut during a write); set aside in %s", self.csv_path, torn)
        return torn

    def _replace_bytes(self, data: bytes) -> None:
        tmp = self.csv_path.with_suffix(".csv.tmp")
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.csv_path)

    def point_status(self) -> dict[tuple, str]:
        """Point key -> 'ok' if any ok row exists for it, else 'failed'."""
        status: dict[tuple, str] = {}
        for i, row in enumerate(self.rows()):
            try:
                key = point_from_mapping(row, f"{self.csv_path}, line {i + 2}").key()
            except InputError as err:
                log.warning("ignoring unreadable row: %s", err)
                continue
            if row.get("status", "") in MEASURED_STATUSES:
                status[key] = "ok"
            else:
                status.setdefault(key, "failed")
        return status

    def append(self, row: dict) -> None:
        """Validate one PROFILE row and append it durably (header written on first use)."""
        text = {name: _cell(row.get(name)) for name in PROFILE.names}
        validate_frame(pd.DataFrame([text]), PROFILE, f"{self.csv_path} (row being written)")
        self.path.mkdir(parents=True, exist_ok=True)
        self.repair_tail()
        self.upgrade_header()
        new = not self.csv_path.is_file() or self.csv_path.stat().st_size == 0
        with open(self.csv_path, "a", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=PROFILE.names)
            if new:
                writer.writeheader()
            writer.writerow(text)
            handle.flush()
            os.fsync(handle.fileno())

    def upgrade_header(self) -> None:
        """Rewrite a profile.csv written with an older column set in today's PROFILE columns (atomically).

        A column added since is filled with its schema default, so `--resume` never appends rows whose
        cells do not line up with the file's header.
        """
        if not self.csv_path.is_file() or self.csv_path.stat().st_size == 0:
            return
        with open(self.csv_path, newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle), [])
        if header == list(PROFILE.names):
            return
        unknown = [name for name in header if name not in PROFILE.names]
        if unknown:
            raise InputError(f"{self.csv_path}: unknown column(s) {', '.join(unknown)}; not appending to it")
        self.rewrite(self.rows())

    def rewrite(self, rows: list[dict]) -> None:
        """Replace profile.csv with `rows` in today's PROFILE columns (missing cells: the schema default),
        atomically: written to a temporary file, fsync'ed, then renamed over the old one.  Text cells are
        written as read (already formula-escaped); other values are formatted as `append` formats them."""
        defaults = {c.name: "" if c.default is None else _cell(c.default) for c in PROFILE.columns}
        tmp = self.csv_path.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as out:
            writer = csv.DictWriter(out, fieldnames=PROFILE.names)
            writer.writeheader()
            for row in rows:
                writer.writerow({name: _raw_or_cell(row[name]) if name in row else defaults[name]
                                 for name in PROFILE.names})
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.csv_path)

    def _env(self) -> dict:
        """env.json as a dict ({} when absent); InputError when it is not the JSON object measure writes."""
        if not self.env_path.is_file():
            return {}
        try:
            data = json.loads(self.env_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise InputError(f"{self.env_path}: not valid JSON ({type(err).__name__}: {err}); "
                             "repair or remove it, or pass another --out") from None
        if not isinstance(data, dict) or not isinstance(data.get("runs", []), list) \
                or not isinstance(data.get("profile") or {}, dict):
            raise InputError(f"{self.env_path}: expected an object with 'profile' (object) and 'runs' (list); "
                             "repair or remove it, or pass another --out")
        return data

    def env_runs(self) -> list[dict]:
        return list(self._env().get("runs", []))

    def write_env(self, identity: dict, runs: list[dict]) -> None:
        """Rewrite env.json atomically: the profile identity plus every run's environment record."""
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.env_path.with_suffix(".json.tmp")
        record = redact_json({"profile": identity, "runs": runs})
        tmp.write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, self.env_path)

    def identity(self) -> dict | None:
        return self._env().get("profile")


def pending_points(points: tuple[Point, ...], status: dict[tuple, str], retry_failed: bool) -> list[Point]:
    """Points still to run: never measured, or failed when `retry_failed`."""
    out = []
    for p in points:
        state = status.get(p.key())
        if state is None or (state == "failed" and retry_failed):
            out.append(p)
    return out
