"""Request logs, read one way for the planner and the load generator: `read_log`.

Formats (read-only inputs, not Fleetplan files):
- azure: the Azure LLM inference trace, CSV `TIMESTAMP, ContextTokens,
  GeneratedTokens` (Azure Public Dataset, CC-BY; cite Patel et al.,
  "Splitwise", ISCA 2024 wherever it is shipped or used).
- generic: CSV or JSON Lines with `timestamp, route, prompt_tokens,
  completion_tokens` (optional `model`), as OpenAI-compatible gateways
  export them, or with `input_len, output_len` for the two counts (the
  names the planner's own request tables use); `route` may be absent (one route).  A JSONL record may nest
  the counts in `usage`.  timestamp: ISO-8601 (naive = UTC) or epoch seconds.

Errors name the file, the line and the column and say what was expected; they never quote the file's text (a
log named by someone else may be any file: the app shows its errors).

`read_log` returns the requests (t_s from the first arrival, input_len,
output_len, route, line), sorted by time.  Rows with a bad timestamp or a
missing, non-numeric, fractional or negative token count are skipped and
counted per reason with their line numbers (or, with strict=True, the first
one raises InputError naming the file, line and column); rows out of time
order are sorted and reported.  An empty log, one with fewer than 2 usable
requests, or one whose requests all share one timestamp raises InputError:
it cannot give a rate.  planner/traffic/logs.py derives route statistics from it;
measure verify replays it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from fleetfacts.errors import InputError
from fleetfacts.schema import escape_controls, record_lines, slug

log = logging.getLogger(__name__)

FORMATS = ("azure", "generic")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
GENERIC_COLUMNS = ("timestamp", "route", "prompt_tokens", "completion_tokens")
# The generic format's two token counts, under a gateway's names or the planner's own (input_len, output_len).
GENERIC_COUNT_NAMES = (("prompt_tokens", "completion_tokens"), ("input_len", "output_len"))
GENERIC_OPTIONAL = ("route", "model")
REQUEST_COLUMNS = ("t_s", "input_len", "output_len", "route", "line")
# Epoch values above this are milliseconds (or micro/nanoseconds), not seconds: year 5138 in seconds.
MAX_EPOCH_SECONDS = 1e11
REASONS = {"timestamp": "bad timestamp", "missing": "missing token count", "numeric": "non-numeric token count",
           "fraction": "fractional token count", "negative": "negative token count",
           "huge": "implausibly large token count", "json": "unreadable JSON line"}
# No model reads or writes this many tokens in one request (the longest published context windows are
# ~1e7 tokens); larger counts are corrupt rows, and past 2^53 a float no longer holds a whole number.
MAX_TOKENS_PER_REQUEST = 1e9
MAX_LINES_SHOWN = 5
# pandas holds times as nanoseconds since 1970: representable from 1677-09-21 to 2262-04-11.
MIN_YEAR, MAX_YEAR = 1677, 2262
# Every cell is held as a string while parsing (~10x the file in memory): larger logs are refused.
MAX_LOG_BYTES = 2 * 2**30


# ---------------------------------------------------------------- records

@dataclass(frozen=True)
class SkipReport:
    """Rows left out of a log, by reason: {reason: (line, ...)}; out_of_order: rows earlier than the row above."""

    lines: dict[str, tuple[int, ...]] = field(default_factory=dict)
    out_of_order: int = 0
    first_out_of_order_line: int | None = None

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.lines.values())

    def describe(self) -> str:
        """e.g. 'skipped 3 rows: 2 negative token counts (lines 5, 9), 1 bad timestamp (line 12)'; '' if none."""
        if not self.count:
            return ""
        parts = [f"{len(lines)} {_plural(reason, len(lines))} ({_lines(lines)})"
                 for reason, lines in sorted(self.lines.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
        return f"skipped {self.count} {_plural('row', self.count)}: " + ", ".join(parts)

    def describe_order(self) -> str:
        if not self.out_of_order:
            return ""
        return (f"sorted by timestamp: {self.out_of_order} {_plural('row', self.out_of_order)} out of time order "
                f"(first at line {self.first_out_of_order_line})")


def _plural(word: str, n: int) -> str:
    return word if n == 1 else word + "s"


def _lines(lines: Sequence[int]) -> str:
    shown = ", ".join(str(x) for x in lines[:MAX_LINES_SHOWN])
    more = f", ... {len(lines) - MAX_LINES_SHOWN} more" if len(lines) > MAX_LINES_SHOWN else ""
    return f"{_plural('line', len(lines))} {shown}{more}"


@dataclass(frozen=True, eq=False)
class TrafficLog:
    """A parsed request log: requests (REQUEST_COLUMNS, sorted by t_s), where it came from, what was skipped.

    start: absolute time of the first arrival (UTC), for hour-of-day profiles.
    models: route -> model slug named by the log ('' when it names none).
    """

    requests: pd.DataFrame
    source: str
    format: str
    skipped: SkipReport
    start: pd.Timestamp
    models: dict[str, str]

    @property
    def span_s(self) -> float:
        return float(self.requests["t_s"].iloc[-1])


# ---------------------------------------------------------------- reading

def read_log(path: str | Path, fmt: str | None = None, route: str | None = None, strict: bool = False
             ) -> TrafficLog:
    """Read a request log (format auto-detected when `fmt` is None); see the module doc.

    route: the route name for logs without a route column (default: the file's
    stem).  Raises InputError for an unreadable, empty or unusable log.
    """
    path = Path(path)
    _check_file(path)
    fmt = detect_format(path) if fmt is None else _check_format(fmt)
    raw, json_skips = _read_raw(path)
    if strict and json_skips:
        raise InputError(f"{path}, line {json_skips[0]}: unreadable JSON line (--strict stops at the first bad row)")
    if raw.empty and not json_skips:
        raise InputError(f"{path}: no requests (the log has no data rows)")
    default_route = route or path.stem
    columns = _columns(raw, fmt, path)
    frame, skips = _rows(raw, columns, fmt, default_route, path, strict)
    skips = {**({"json": json_skips} if json_skips else {}), **skips}
    return _finish(frame, skips, fmt, path)


def _check_file(path: Path) -> None:
    """A regular file of at most MAX_LOG_BYTES (a device such as /dev/zero never ends)."""
    if path.exists() and not path.is_dir() and not path.is_file():
        raise InputError(f"{path}: not a regular file (expected a request log)")
    if path.is_file() and path.stat().st_size > MAX_LOG_BYTES:
        raise InputError(f"{path}: {path.stat().st_size / 2**30:.1f} GiB is over the {MAX_LOG_BYTES / 2**30:.0f} GiB "
                         f"limit for one request log; split it (e.g. by day) and derive routes per part")


def _check_format(fmt: str) -> str:
    fmt = slug(fmt)
    if fmt not in FORMATS:
        raise InputError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    return fmt


def detect_format(path: Path) -> str:
    """'azure' when the header is the Azure trace's, else 'generic' (CSV or JSONL)."""
    first = _first_line(path)
    if first.startswith("{"):
        return "generic"
    header = {c.strip().lower() for c in first.split(",")}
    if {c.lower() for c in AZURE_COLUMNS} <= header:
        return "azure"
    if any({"timestamp", *names} <= header for names in GENERIC_COUNT_NAMES):
        return "generic"
    raise InputError(f"{path}, line 1: not a request log I recognise; expected a CSV header "
                     f"{', '.join(AZURE_COLUMNS)} (Azure trace) or {', '.join(GENERIC_COLUMNS)} (generic), "
                     f"or JSON Lines (a line starting with '{{')")


def _first_line(path: Path) -> str:
    try:
        with open(path, encoding="utf-8-sig") as handle:
            for line in handle:
                if line.strip():
                    return line.strip()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a request log") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file (expected CSV or JSON Lines)") from None
    raise InputError(f"{path}: the file is empty (expected a request log)")


def _read_raw(path: Path) -> tuple[pd.DataFrame, tuple[int, ...]]:
    """All cells as strings plus a `line` column (1-based file line); JSONL lines that do not parse."""
    if _first_line(path).startswith("{"):
        return _read_jsonl(path)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=True, encoding="utf-8-sig")
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: the file is empty (expected a request log)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"{path}: not a readable CSV file ({first})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    blank = (frame.apply(lambda col: col.str.strip()) == "").all(axis=1)
    frame = frame[~blank].reset_index(drop=True)
    lines = record_lines(path)  # physical lines: quoted newlines and blank lines counted
    frame["line"] = lines if len(lines) == len(frame) else np.arange(len(frame)) + 2
    return frame, ()


def _read_jsonl(path: Path) -> tuple[pd.DataFrame, tuple[int, ...]]:
    records, bad = [], []
    with open(path, encoding="utf-8-sig") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except (json.JSONDecodeError, RecursionError):  # RecursionError: nested deeper than Python parses
                bad.append(number)
                continue
            if not isinstance(record, dict):
                bad.append(number)
                continue
            usage = record.get("usage")
            if not isinstance(usage, dict):
                usage = {}
            records.append({**{k: v for k, v in usage.items() if k in GENERIC_COLUMNS}, **record, "line": number})
    frame = pd.DataFrame.from_records(records) if records else pd.DataFrame({"line": []})
    for column in frame.columns:
        if column != "line":
            frame[column] = frame[column].map(lambda v: "" if v is None else str(v))
    return frame, tuple(bad)


def _columns(raw: pd.DataFrame, fmt: str, path: Path) -> dict[str, str | None]:
    """Map roles (timestamp, input, output, route, model) to the raw frame's column names."""
    lower = {c.lower(): c for c in raw.columns if c != "line"}
    counts = next((names for names in GENERIC_COUNT_NAMES if all(n in lower for n in names)), GENERIC_COUNT_NAMES[0])
    wanted = dict(zip(("timestamp", "input", "output"), AZURE_COLUMNS if fmt == "azure"
                      else ("timestamp", *counts), strict=True))
    missing = [name for name in wanted.values() if name.lower() not in lower]
    if missing and not raw.empty:
        expected = AZURE_COLUMNS if fmt == "azure" else GENERIC_COLUMNS
        raise InputError(f"{path}: missing column(s) {', '.join(missing)} for a {fmt} log; "
                         f"expected {', '.join(expected)}")
    out: dict[str, str | None] = {role: lower.get(name.lower()) for role, name in wanted.items()}
    for role in GENERIC_OPTIONAL:
        out[role] = lower.get(role) if fmt == "generic" else None
    return out


def _rows(raw: pd.DataFrame, col: dict[str, str | None], fmt: str, default_route: str, path: Path, strict: bool
          ) -> tuple[pd.DataFrame, dict[str, tuple[int, ...]]]:
    """Parse and check every row; returns the good rows (absolute seconds `t`) and skipped lines by reason."""
    lines = raw["line"].to_numpy()
    stamps, epoch_mode = _timestamps(raw[col["timestamp"]] if col["timestamp"] else pd.Series([], dtype=str), path)
    bad = {"timestamp": ~np.isfinite(stamps)}
    inputs, input_bad = _counts(raw[col["input"]] if col["input"] else pd.Series([], dtype=str))
    outputs, output_bad = _counts(raw[col["output"]] if col["output"] else pd.Series([], dtype=str))
    taken = bad["timestamp"].copy()
    for reason in ("missing", "numeric", "fraction", "negative", "huge"):
        mask = (input_bad[reason] | output_bad[reason]) & ~taken
        bad[reason] = mask
        taken |= mask
    if strict:
        _raise_first(raw, col, bad, path, epoch_mode)
    frame = pd.DataFrame({
        "t": stamps, "input_len": inputs, "output_len": outputs,
        "route": raw[col["route"]].str.strip() if col["route"] else default_route,
        "model": raw[col["model"]].map(slug) if col["model"] else "", "line": lines,
    })
    frame["route"] = frame["route"].where(frame["route"] != "", default_route)
    skips = {reason: tuple(int(x) for x in lines[mask]) for reason, mask in bad.items() if mask.any()}
    return frame[~taken].reset_index(drop=True), skips


def _timestamps(cells: pd.Series, path: Path) -> tuple[np.ndarray, bool]:
    """Seconds since the epoch (NaN where unreadable); epoch mode when most cells are plain numbers."""
    text = cells.astype(str).str.strip()
    numbers = pd.to_numeric(text, errors="coerce")
    filled = text != ""
    epoch_mode = bool(filled.any()) and numbers[filled].notna().mean() > 0.5
    if epoch_mode:
        values = numbers.to_numpy(dtype=float)
        finite = values[np.isfinite(values)]
        if finite.size and np.median(finite) > MAX_EPOCH_SECONDS:
            raise InputError(f"{path}, column 'timestamp': epoch values above {MAX_EPOCH_SECONDS:.0e} look like "
                             f"milliseconds or finer; expected epoch seconds (divide by 1000) or ISO-8601 times")
        return values, True
    parsed = pd.to_datetime(text, format="ISO8601", utc=True, errors="coerce")
    # Times outside pandas' nanosecond range (years 1678-2261, e.g. 9999-12-31) are bad timestamps.
    parsed = parsed.where((parsed.dt.year > MIN_YEAR) & (parsed.dt.year < MAX_YEAR))
    seconds = (parsed - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)
    return seconds.to_numpy(dtype=float, na_value=np.nan), False


def _counts(cells: pd.Series) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    text = cells.astype(str).str.strip()
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
    missing = (text == "").to_numpy()
    numeric = ~missing & ~np.isfinite(values)
    with np.errstate(invalid="ignore"):
        fraction = np.isfinite(values) & (values != np.round(values))
        negative = np.isfinite(values) & (values < 0)
        huge = np.isfinite(values) & (values > MAX_TOKENS_PER_REQUEST)
    return values, {"missing": missing, "numeric": numeric, "fraction": fraction, "negative": negative, "huge": huge}


def _raise_first(raw: pd.DataFrame, col: dict[str, str | None], bad: dict[str, np.ndarray], path: Path,
                 epoch_mode: bool) -> None:
    any_bad = np.zeros(len(raw), dtype=bool)
    for mask in bad.values():
        any_bad |= mask
    if not any_bad.any():
        return
    index = int(np.argmax(any_bad))
    reason = next(r for r, mask in bad.items() if mask[index])
    column = col["timestamp"] if reason == "timestamp" else _count_column(raw, col, index)
    expected = "epoch seconds" if epoch_mode else "an ISO-8601 time or epoch seconds"
    what = (f"expected {expected}" if reason == "timestamp"
            else f"expected a whole number of tokens from 0 to {MAX_TOKENS_PER_REQUEST:.0e}")
    raise InputError(f"{path}, line {raw.at[index, 'line']}, column {column!r}: {REASONS[reason]} ({what})")


def _count_column(raw: pd.DataFrame, col: dict[str, str | None], index: int) -> str | None:
    for role in ("input", "output"):
        name = col[role]
        text = str(raw.at[index, name]).strip() if name else ""
        number = pd.to_numeric(text, errors="coerce")
        if text == "" or pd.isna(number) or number < 0 or number != round(number) or number > MAX_TOKENS_PER_REQUEST:
            return name
    return col["input"]


def _finish(frame: pd.DataFrame, skips: dict[str, tuple[int, ...]], fmt: str, path: Path) -> TrafficLog:
    """Sort (reporting rows out of order), check there is a rate to measure, and build the TrafficLog."""
    report_lines = {REASONS[k]: v for k, v in skips.items()}
    t = frame["t"].to_numpy()
    late = np.flatnonzero(np.diff(t) < 0) + 1 if len(t) > 1 else np.array([], dtype=int)
    report = SkipReport(report_lines, int(late.size), int(frame["line"].iloc[late[0]]) if late.size else None)
    if len(frame) < 2:
        skipped = f"; {report.describe()}" if report.count else ""
        raise InputError(f"{path}: {len(frame)} usable {_plural('request', len(frame))}; a rate needs at least 2"
                         f"{skipped}")
    frame = frame.sort_values("t", kind="stable").reset_index(drop=True)
    if frame["t"].iloc[-1] <= frame["t"].iloc[0]:
        raise InputError(f"{path}: every request has the same timestamp; a rate needs requests spread over time")
    start = pd.Timestamp(float(frame["t"].iloc[0]), unit="s", tz="UTC")
    frame["t_s"] = frame["t"] - frame["t"].iloc[0]
    frame["input_len"] = frame["input_len"].astype(np.int64)
    frame["output_len"] = frame["output_len"].astype(np.int64)
    frame["route"] = frame["route"].astype(str).map(escape_controls)  # as route names load (planner.planning.plan)
    models = {r: _single(g["model"]) for r, g in frame.groupby("route", sort=True)}
    if report.count:
        log.warning("%s: %s", path, report.describe())
    return TrafficLog(frame[list(REQUEST_COLUMNS)], str(path), fmt, report, start, models)


def _single(models: pd.Series) -> str:
    names = sorted(set(models) - {""})
    return names[0] if len(names) == 1 else ""
