"""Request logs, read one way for the planner and the load generator: `read_log`.

Formats (read-only inputs, not Fleetplan files):
- azure: the Azure LLM inference trace, CSV `TIMESTAMP, ContextTokens,
  GeneratedTokens` (Azure Public Dataset, CC-BY; cite Patel et al.,
  "Splitwise", ISCA 2024 wherever it is shipped or used).
- generic: CSV or JSON Lines with `timestamp, route, prompt_tokens,
  completion_tokens` (optional `model`), as OpenAI-compatible gateways
  export them, or with `input_len, output_len` for the two counts (the
  names the planner's own request tables use); `route` may be absent (one route).  A JSONL record may nest
  the counts in `usage`.  timestamp: ISO-8601 (naive = UTC) or epoch seconds.  Optional prefix structure:
  `hash_ids` (one integer per block of the prompt, ';'-separated in CSV, a list in JSONL) or `session_id`
  (multi-turn: a turn's prompt is the previous turn's prompt and output plus new text).
- mooncake: the Mooncake (FAST'25) trace, JSON Lines with `timestamp` (ms from the trace's start),
  `input_length`, `output_length` and `hash_ids` (one id per block of the prompt, 512 tokens in the
  published traces; equal ids = equal tokens), detected by those keys.  Machine-written, so read as with
  strict=True: a malformed line is an error naming it.

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

Prefix structure is read only when the caller passes `block_size` (tokens per hash id): then every request
carries `hash_ids`, its prompt's block ids (a prompt of n tokens has ceil(n / block_size) of them, the last
block possibly partial), and a hash list that is not integers, has the wrong length, or a session whose
prompt does not hold the previous turn raises InputError naming the file and line (a broken chain cannot
be skipped: it changes every later request's reuse).  Without `block_size` those columns are ignored.
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

FORMATS = ("azure", "generic", "mooncake")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MOONCAKE_COLUMNS = ("timestamp", "input_length", "output_length")
MOONCAKE_KEYS = (*MOONCAKE_COLUMNS, "hash_ids")  # a JSONL record with all of these is a Mooncake trace
# Tokens per hash id in the published Mooncake traces (FAST25-release/README.md) and AIPerf's default.
DEFAULT_BLOCK_SIZE = 512
HASH_COLUMN, SESSION_COLUMN = "hash_ids", "session_id"
# A Mooncake trace's timestamps are ms from its start (>= 0); a trace over ~30 years long is corrupt (and
# would leave pandas' nanosecond range).
MAX_TRACE_MS = 1e12
# Hash ids are held as numpy int64.
MAX_HASH_ID = 2**63 - 1
GENERIC_COLUMNS = ("timestamp", "route", "prompt_tokens", "completion_tokens")
# The generic format's two token counts, under a gateway's names or the planner's own (input_len, output_len).
GENERIC_COUNT_NAMES = (("prompt_tokens", "completion_tokens"), ("input_len", "output_len"))
GENERIC_OPTIONAL = ("route", "model")
REQUEST_COLUMNS = ("t_s", "input_len", "output_len", "route", "line")  # + HASH_COLUMN with prefix structure
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

    start: absolute time of the first arrival (UTC), for hour-of-day profiles (a Mooncake trace's times are
    relative: it starts at 1970-01-01 00:00 UTC).
    models: route -> model slug named by the log ('' when it names none).
    block_size: tokens per hash id when the requests carry `hash_ids` (numpy int64 arrays), else None.
    """

    requests: pd.DataFrame
    source: str
    format: str
    skipped: SkipReport
    start: pd.Timestamp
    models: dict[str, str]
    block_size: int | None = None

    @property
    def span_s(self) -> float:
        return float(self.requests["t_s"].iloc[-1])


# ---------------------------------------------------------------- reading

def read_log(path: str | Path, fmt: str | None = None, route: str | None = None, strict: bool = False,
             block_size: int | None = None) -> TrafficLog:
    """Read a request log (format auto-detected when `fmt` is None); see the module doc.

    route: the route name for logs without a route column (default: the file's
    stem).  block_size: tokens per hash id, to read the log's prefix structure
    (None: ignore it).  Raises InputError for an unreadable, empty or unusable log.
    """
    path = Path(path)
    _check_file(path)
    fmt = detect_format(path) if fmt is None else _check_format(fmt)
    strict = strict or fmt == "mooncake"  # a machine-written trace: a malformed line means a corrupt file
    raw, json_skips = _read_raw(path)
    if strict and json_skips:
        _refuse_json_line(path, fmt, json_skips[0])
    if raw.empty and not json_skips:
        raise InputError(f"{path}: no requests (the log has no data rows)")
    default_route = route or path.stem
    columns = _columns(raw, fmt, path)
    frame, skips = _rows(raw, columns, fmt, default_route, path, strict)
    del raw  # its text cells: the rows are parsed
    skips = {**({"json": json_skips} if json_skips else {}), **skips}
    return _finish(frame, skips, fmt, path, block_size)


def _refuse_json_line(path: Path, fmt: str, line: int) -> None:
    why = "a Mooncake trace is read strictly" if fmt == "mooncake" else "--strict stops at the first bad row"
    raise InputError(f"{path}, line {line}: unreadable JSON line ({why})")


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
    """'azure' when the header is the Azure trace's, 'mooncake' when the first JSON line has MOONCAKE_KEYS,
    else 'generic' (CSV or JSONL)."""
    first = _first_line(path)
    if first.startswith("{"):
        return "mooncake" if set(MOONCAKE_KEYS) <= set(_json_keys(first)) else "generic"
    header = {c.strip().lower() for c in first.split(",")}
    if {c.lower() for c in AZURE_COLUMNS} <= header:
        return "azure"
    if any({"timestamp", *names} <= header for names in GENERIC_COUNT_NAMES):
        return "generic"
    raise InputError(f"{path}, line 1: not a request log I recognise; expected a CSV header "
                     f"{', '.join(AZURE_COLUMNS)} (Azure trace) or {', '.join(GENERIC_COLUMNS)} (generic), "
                     f"or JSON Lines (a line starting with '{{')")


def _json_keys(line: str) -> list[str]:
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return []
    return list(record) if isinstance(record, dict) else []


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
    """The records' values column by column (a million records held as dicts at once cost a gigabyte), each cell
    as text except a hash list, which stays a list; and the lines that are not a JSON object."""
    columns: dict[str, list[object]] = {}
    rows, bad = 0, []
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
            _add_record(columns, rows, {**{k: v for k, v in usage.items() if k in GENERIC_COLUMNS}, **record,
                                        "line": number})
            rows += 1
    return (_frame(columns) if rows else pd.DataFrame({"line": []})), tuple(bad)


def _frame(columns: dict[str, list[object]]) -> pd.DataFrame:
    """The columns as a frame, each list let go once it is a column (a hash column as objects, never inferred)."""
    frame = pd.DataFrame(index=pd.RangeIndex(len(columns["line"])))
    for key in list(columns):
        values = columns.pop(key)
        if key == HASH_COLUMN:
            cells = np.empty(len(values), dtype=object)
            for k, value in enumerate(values):
                cells[k] = value
            frame[key] = cells
        else:
            frame[key] = values
        del values
    return frame


def _add_record(columns: dict[str, list[object]], row: int, record: dict[str, object]) -> None:
    """Append record number `row` to `columns` (a key first seen here: blank in the rows before; a key the record
    lacks: blank)."""
    for key, value in record.items():
        column = columns.get(key)
        if column is None:
            column = columns[key] = [None if key == HASH_COLUMN else ""] * row
        column.append(_json_cell(key, value))
    for key, column in columns.items():
        if len(column) == row:
            column.append(None if key == HASH_COLUMN else "")


# JSON keys of the timestamp and token counts (any case): a number there is kept as a number, which the parsing
# reads as its text (a million cells as text cost ~100 MB more than as numbers).
NUMERIC_KEYS = frozenset(name.lower() for name in (*AZURE_COLUMNS, *MOONCAKE_COLUMNS, *GENERIC_COLUMNS,
                                                   *(n for names in GENERIC_COUNT_NAMES for n in names))
                         if name.lower() != "route")


def _json_cell(key: str, value: object) -> object:
    """A JSON value as the raw frame holds it: the line number and a count's or timestamp's number as they are, a
    hash list as _hash_cell gives it, anything else as text (_cell_text)."""
    if key == "line":
        return value
    if key == HASH_COLUMN:
        return _hash_cell(value)
    if key.lower() in NUMERIC_KEYS and type(value) in (int, float) and value == value:  # not a bool, not NaN
        return value
    return _cell_text(value)


def _hash_cell(value: object) -> object:
    """A JSON hash list of whole numbers within MAX_HASH_ID as an int64 array (a tenth of a list's memory:
    its ids are not small ints Python shares), anything else as it came (_hash_list says what is wrong)."""
    if isinstance(value, list) and all(type(item) is int and abs(item) <= MAX_HASH_ID for item in value):
        return np.array(value, dtype=np.int64)
    return value


def _cell_text(value: object) -> str:
    """A JSON value as a cell's text: '' for null and for a key the record lacks (NaN once in a frame)."""
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def _columns(raw: pd.DataFrame, fmt: str, path: Path) -> dict[str, str | None]:
    """Map roles (timestamp, input, output, route, model, hash_ids, session_id) to the raw frame's column names."""
    lower = {c.lower(): c for c in raw.columns if c != "line"}
    counts = next((names for names in GENERIC_COUNT_NAMES if all(n in lower for n in names)), GENERIC_COUNT_NAMES[0])
    named = {"azure": AZURE_COLUMNS, "mooncake": MOONCAKE_COLUMNS}.get(fmt, ("timestamp", *counts))
    wanted = dict(zip(("timestamp", "input", "output"), named, strict=True))
    missing = [name for name in wanted.values() if name.lower() not in lower]
    if missing and not raw.empty:
        expected = {"azure": AZURE_COLUMNS, "mooncake": MOONCAKE_KEYS}.get(fmt, GENERIC_COLUMNS)
        raise InputError(f"{path}: missing column(s) {', '.join(missing)} for a {fmt} log; "
                         f"expected {', '.join(expected)}")
    out: dict[str, str | None] = {role: lower.get(name.lower()) for role, name in wanted.items()}
    for role in GENERIC_OPTIONAL:
        out[role] = lower.get(role) if fmt == "generic" else None
    out[HASH_COLUMN] = lower.get(HASH_COLUMN) if fmt != "azure" else None
    out[SESSION_COLUMN] = lower.get(SESSION_COLUMN) if fmt == "generic" else None
    return out


def _rows(raw: pd.DataFrame, col: dict[str, str | None], fmt: str, default_route: str, path: Path, strict: bool
          ) -> tuple[pd.DataFrame, dict[str, tuple[int, ...]]]:
    """Parse and check every row; returns the good rows (absolute seconds `t`) and skipped lines by reason."""
    lines = raw["line"].to_numpy()
    stamps, expected = _stamps(raw, col, fmt, path)
    bad = {"timestamp": ~np.isfinite(stamps)}
    inputs, input_bad = _counts(raw[col["input"]] if col["input"] else pd.Series([], dtype=str))
    outputs, output_bad = _counts(raw[col["output"]] if col["output"] else pd.Series([], dtype=str))
    taken = bad["timestamp"].copy()
    for reason in ("missing", "numeric", "fraction", "negative", "huge"):
        mask = (input_bad[reason] | output_bad[reason]) & ~taken
        bad[reason] = mask
        taken |= mask
    if strict:
        _raise_first(raw, col, bad, path, expected)
    frame = pd.DataFrame({
        "t": stamps, "input_len": inputs, "output_len": outputs,
        "route": raw[col["route"]].str.strip() if col["route"] else default_route,
        "model": raw[col["model"]].map(slug) if col["model"] else "", "line": lines, **_prefix_cells(raw, col),
    })
    frame["route"] = frame["route"].where(frame["route"] != "", default_route)
    skips = {reason: tuple(int(x) for x in lines[mask]) for reason, mask in bad.items() if mask.any()}
    return frame[~taken].reset_index(drop=True), skips


def _stamps(raw: pd.DataFrame, col: dict[str, str | None], fmt: str, path: Path) -> tuple[np.ndarray, str]:
    """Arrival times in seconds (NaN where bad), and what a bad cell should have been."""
    cells = raw[col["timestamp"]] if col["timestamp"] else pd.Series([], dtype=str)
    return _mooncake_times(cells) if fmt == "mooncake" else _timestamps(cells, path)


def _prefix_cells(raw: pd.DataFrame, col: dict[str, str | None]) -> dict[str, object]:
    """The raw hash_ids (None without the column) and session_id ('' without it) of every row."""
    return {HASH_COLUMN: raw[col[HASH_COLUMN]] if col[HASH_COLUMN] else None,
            SESSION_COLUMN: raw[col[SESSION_COLUMN]].str.strip() if col[SESSION_COLUMN] else ""}


def _mooncake_times(cells: pd.Series) -> tuple[np.ndarray, str]:
    """A Mooncake trace's milliseconds from its start, as seconds (NaN where not a number from 0 to MAX_TRACE_MS)."""
    ms = pd.to_numeric(cells.astype(str).str.strip(), errors="coerce").to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        ms = np.where((ms >= 0) & (ms <= MAX_TRACE_MS), ms, np.nan)
    return ms / 1000.0, f"milliseconds from the trace's start, 0 to {MAX_TRACE_MS:.0e}"


def _timestamps(cells: pd.Series, path: Path) -> tuple[np.ndarray, str]:
    """Seconds since the epoch (NaN where unreadable), and what a bad cell should have been: epoch seconds when
    most cells are plain numbers, else an ISO-8601 time."""
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
        return values, "epoch seconds"
    parsed = pd.to_datetime(text, format="ISO8601", utc=True, errors="coerce")
    # Times outside pandas' nanosecond range (years 1678-2261, e.g. 9999-12-31) are bad timestamps.
    parsed = parsed.where((parsed.dt.year > MIN_YEAR) & (parsed.dt.year < MAX_YEAR))
    seconds = (parsed - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)
    return seconds.to_numpy(dtype=float, na_value=np.nan), "an ISO-8601 time or epoch seconds"


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
                 expected: str) -> None:
    any_bad = np.zeros(len(raw), dtype=bool)
    for mask in bad.values():
        any_bad |= mask
    if not any_bad.any():
        return
    index = int(np.argmax(any_bad))
    reason = next(r for r, mask in bad.items() if mask[index])
    column = col["timestamp"] if reason == "timestamp" else _count_column(raw, col, index)
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


def _finish(frame: pd.DataFrame, skips: dict[str, tuple[int, ...]], fmt: str, path: Path, block_size: int | None
            ) -> TrafficLog:
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
    columns, block_size = _prefix_columns(frame, block_size, path)
    return TrafficLog(frame[columns], str(path), fmt, report, start, models, block_size)


def _single(models: pd.Series) -> str:
    names = sorted(set(models) - {""})
    return names[0] if len(names) == 1 else ""


# ---------------------------------------------------------------- prefix structure

def _prefix_columns(frame: pd.DataFrame, block_size: int | None, path: Path) -> tuple[list[str], int | None]:
    """The request columns and block size: with HASH_COLUMN (each request's block ids, set on `frame`) when the
    caller asked for prefix structure and the log has some, else without it and None."""
    if block_size is None or not (frame[HASH_COLUMN].notna().any() or (frame[SESSION_COLUMN] != "").any()):
        return list(REQUEST_COLUMNS), None
    if block_size < 1:
        raise InputError(f"block size: expected a whole number of tokens >= 1, got {block_size}")
    frame[HASH_COLUMN] = _prefixes(frame, block_size, path)
    return [*REQUEST_COLUMNS, HASH_COLUMN], block_size


def blocks_for(tokens: int, block_size: int) -> int:
    """Hash ids a prompt of `tokens` tokens carries: one per block of `block_size`, the last possibly partial."""
    return -(-int(tokens) // block_size)


def _prefixes(frame: pd.DataFrame, block_size: int, path: Path) -> np.ndarray:
    """Each request's block ids (an object array of int64 arrays): its `hash_ids` when the log has them, else
    derived from `session_id`."""
    if frame[HASH_COLUMN].notna().any():
        lists = [_hash_list(v, n, line, block_size, path)
                 for v, n, line in zip(frame[HASH_COLUMN], frame["input_len"], frame["line"], strict=True)]
    else:
        lists = _session_blocks(frame, block_size, path)
    out = np.empty(len(lists), dtype=object)  # not np.array(lists): equal lengths would make a 2-D array
    out[:] = lists
    return out


def _hash_list(value: object, tokens: int, line: int, block_size: int, path: Path) -> np.ndarray:
    """A `hash_ids` cell (a JSON list, its ids already an int64 array, or ids separated by ';') as int64, one id
    per block of the prompt."""
    at = f"{path}, line {line}, column {HASH_COLUMN!r}"
    ids = value if isinstance(value, np.ndarray) else _listed_ids(value, at)
    need = blocks_for(tokens, block_size)
    if len(ids) != need:
        raise InputError(f"{at}: {len(ids)} hash ids for a {tokens}-token prompt; blocks of {block_size} tokens "
                         f"need {need} (one per block, the last may be partial): was the log written with another "
                         f"block size? (--trace-block-size)")
    return ids


def _listed_ids(value: object, at: str) -> np.ndarray:
    items = value if isinstance(value, list) else [] if _blank(value) else str(value).split(";")
    ids = [_hash_id(item) for item in items]
    if any(i is None for i in ids):
        shown = str(value)[:80]
        raise InputError(f"{at}: expected a list of integer block hashes (a JSON list, or ';'-separated in CSV), "
                         f"got {shown!r}")
    return np.array(ids, dtype=np.int64)


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value)) or not str(value).strip()


def _hash_id(item: object) -> int | None:
    """An integer id within int64, else None (a bool, a float or text that is not a whole number)."""
    if isinstance(item, bool) or isinstance(item, float):
        return None
    try:
        number = int(str(item).strip()) if isinstance(item, str) else item
    except ValueError:
        return None
    return number if isinstance(number, int) and abs(number) <= MAX_HASH_ID else None


def _session_blocks(frame: pd.DataFrame, block_size: int, path: Path) -> list[np.ndarray]:
    """Block ids from `session_id`: a session is one token stream (each turn's prompt holds the previous turn's
    prompt and output), so block j of every turn of a session has one id; a request without a session shares
    nothing.  Raises InputError for a turn whose prompt is shorter than the previous turn's prompt + output."""
    streams: dict[str, tuple[list[int], int, int]] = {}  # session -> (its block ids, its context length, line)
    next_id, out = 0, []
    for session, n, o, line in zip(frame[SESSION_COLUMN], frame["input_len"], frame["output_len"], frame["line"],
                                   strict=True):
        ids, context, before = streams.get(session, ([], 0, 0)) if session else ([], 0, 0)
        if n < context:
            raise InputError(f"{path}, line {line}, column {SESSION_COLUMN!r}: session {session!r} has a {n}-token "
                             f"prompt after a turn of {context} tokens of prompt and output (line {before}); a "
                             "turn's prompt holds the previous turn's prompt and output plus new text")
        fresh = max(0, blocks_for(n, block_size) - len(ids))
        ids = ids + list(range(next_id, next_id + fresh))
        next_id += fresh
        out.append(np.array(ids[:blocks_for(n, block_size)], dtype=np.int64))
        if session:
            streams[session] = (ids, int(n + o), int(line))
    return out
