"""Request logs -> per-route traffic statistics -> routes (schema ROUTES).

Log formats (read-only inputs, not Fleetplan files):
- azure: the Azure LLM inference trace, CSV `TIMESTAMP, ContextTokens,
  GeneratedTokens` (Azure Public Dataset, CC-BY; cite Patel et al.,
  "Splitwise", ISCA 2024 wherever it is shipped or used).
- generic: CSV or JSON Lines with `timestamp, route, prompt_tokens,
  completion_tokens` (optional `model`), as OpenAI-compatible gateways
  export them; `route` may be absent (one route).  A JSONL record may nest
  the counts in `usage`.  timestamp: ISO-8601 (naive = UTC) or epoch seconds.

`read_log` returns the requests (t_s from the first arrival, input_len,
output_len, route, line), sorted by time.  Rows with a bad timestamp or a
missing, non-numeric, fractional or negative token count are skipped and
counted per reason with their line numbers (or, with strict=True, the first
one raises InputError naming the file, line and column); rows out of time
order are sorted and reported.  An empty log, one with fewer than 2 usable
requests, or one whose requests all share one timestamp raises InputError:
it cannot give a rate.

`route_traffic` derives per route: mean rate, peak per-minute rate,
burstiness (CV of inter-arrival gaps), a diurnal profile (hourly rate
multipliers) when the log spans at least 24 h, and length quantiles;
`routes_frame` turns them into a ROUTES table.  Definitions: docs/traffic.md.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from fleetfacts.errors import InputError
from fleetfacts.schema import ROUTES, record_lines, slug, validate_frame

log = logging.getLogger(__name__)

FORMATS = ("azure", "generic")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
GENERIC_COLUMNS = ("timestamp", "route", "prompt_tokens", "completion_tokens")
GENERIC_OPTIONAL = ("route", "model")
REQUEST_COLUMNS = ("t_s", "input_len", "output_len", "route", "line")
# Epoch values above this are milliseconds (or micro/nanoseconds), not seconds: year 5138 in seconds.
MAX_EPOCH_SECONDS = 1e11
BUCKET_S = 60.0          # peak rate: busiest full minute
DIURNAL_MIN_SPAN_S = 24 * 3600.0  # a diurnal profile needs at least one whole day
SECONDS_PER_HOUR = 3600.0
LENGTH_QUANTILES = (50, 95, 99)
MODEL_UNKNOWN = "unknown"
AZURE_ATTRIBUTION = ("Azure LLM inference trace (Azure Public Dataset, CC-BY): Patel et al., \"Splitwise: Efficient "
                     "generative LLM inference using phase splitting\", ISCA 2024")
# Skip reasons, in the order a row is checked (a row is counted once, under its first problem).
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


@dataclass(frozen=True)
class LengthStats:
    """Token-length distribution summary (tokens)."""

    mean: float
    p50: float
    p95: float
    p99: float


@dataclass(frozen=True)
class RouteTraffic:
    """Traffic of one route as derived from a log.

    rate_rps: mean rate; peak_rps: busiest full minute (= rate when the log is
    shorter than a minute); arrival_cv: CV of the route's inter-arrival gaps
    (1.0, assumed Poisson, with only 2 requests); diurnal: 24 hourly rate
    multipliers (UTC hour of day, mean 1 over the log's hours) or None when
    the log spans less than 24 h.
    """

    route: str
    requests: int
    span_s: float
    rate_rps: float
    peak_rps: float
    arrival_cv: float
    diurnal: tuple[float, ...] | None
    input: LengthStats
    output: LengthStats
    notes: tuple[str, ...] = ()

    @property
    def peak_to_mean(self) -> float:
        return max(1.0, self.peak_rps / self.rate_rps)


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
    if {"timestamp", "prompt_tokens", "completion_tokens"} <= header:
        return "generic"
    raise InputError(f"{path}, line 1: not a request log I recognise; expected a CSV header "
                     f"{', '.join(AZURE_COLUMNS)} (Azure trace) or {', '.join(GENERIC_COLUMNS)} (generic), "
                     f"or JSON Lines, got {first[:80]!r}")


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
    wanted = dict(zip(("timestamp", "input", "output"), AZURE_COLUMNS if fmt == "azure"
                      else ("timestamp", "prompt_tokens", "completion_tokens"), strict=True))
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
            raise InputError(f"{path}, column 'timestamp': epoch values like {finite[0]:.0f} look like milliseconds "
                             f"or finer; expected epoch seconds (divide by 1000) or ISO-8601 times")
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
    value = raw.at[index, column] if column else ""
    expected = "epoch seconds" if epoch_mode else "an ISO-8601 time or epoch seconds"
    what = (f"expected {expected}" if reason == "timestamp"
            else f"expected a whole number of tokens from 0 to {MAX_TOKENS_PER_REQUEST:.0e}")
    raise InputError(f"{path}, line {raw.at[index, 'line']}, column {column!r}: {REASONS[reason]} {value!r} ({what})")


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
    models = {r: _single(g["model"]) for r, g in frame.groupby("route", sort=True)}
    if report.count:
        log.warning("%s: %s", path, report.describe())
    return TrafficLog(frame[list(REQUEST_COLUMNS)], str(path), fmt, report, start, models)


def _single(models: pd.Series) -> str:
    names = sorted(set(models) - {""})
    return names[0] if len(names) == 1 else ""


# ---------------------------------------------------------------- statistics

def length_stats(values: np.ndarray) -> LengthStats:
    """Mean and p50/p95/p99 (linear interpolation) of token counts."""
    v = np.asarray(values, dtype=float)
    p50, p95, p99 = np.percentile(v, LENGTH_QUANTILES)
    return LengthStats(float(v.mean()), float(p50), float(p95), float(p99))


def length_histogram(values: np.ndarray, bins: int = 20, log_scale: bool = True) -> pd.DataFrame:
    """Histogram of token counts: bin_low, bin_high (tokens), count, share; log-spaced bins by default."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return pd.DataFrame(columns=["bin_low", "bin_high", "count", "share"])
    low, high = max(float(v.min()), 1.0), max(float(v.max()), 1.0)
    if log_scale and high > low:
        edges = np.geomspace(low, high, bins + 1)
        edges[0] = min(edges[0], float(v.min()))
    else:
        edges = np.linspace(float(v.min()), float(v.max()) + (0 if high > low else 1), bins + 1)
    counts, edges = np.histogram(v, bins=edges)
    return pd.DataFrame({"bin_low": edges[:-1], "bin_high": edges[1:], "count": counts, "share": counts / v.size})


def peak_minute_rps(t_s: np.ndarray, span_s: float) -> float | None:
    """Requests/s of the busiest full minute counted from the first arrival; None if the log is shorter."""
    minutes = int(span_s // BUCKET_S)
    if minutes < 1:
        return None
    counts = np.bincount((np.asarray(t_s) // BUCKET_S).astype(np.int64), minlength=minutes)[:minutes]
    return float(counts.max()) / BUCKET_S


def diurnal_profile(t_s: np.ndarray, start: pd.Timestamp, span_s: float) -> tuple[float, ...] | None:
    """24 rate multipliers by UTC hour of day (rate in that hour over the mean rate); None below 24 h of log.

    Each hour's rate is its requests over the seconds of the log that fall in
    that hour of day, so partial first and last hours are weighted correctly.
    """
    if span_s < DIURNAL_MIN_SPAN_S:
        return None
    offset = (start - start.normalize()) / pd.Timedelta(seconds=1)  # seconds after UTC midnight at t = 0
    hours = (((np.asarray(t_s) + offset) // SECONDS_PER_HOUR) % 24).astype(int)
    counts = np.bincount(hours, minlength=24).astype(float)
    exposure = _hour_exposure(offset, span_s)
    mean_rate = counts.sum() / exposure.sum()
    return tuple(float(c / e / mean_rate) if e > 0 else 0.0 for c, e in zip(counts, exposure, strict=True))


def _hour_exposure(offset: float, span_s: float) -> np.ndarray:
    """Seconds of [offset, offset + span) falling in each hour of day."""
    exposure = np.zeros(24)
    t, end = offset, offset + span_s
    while t < end:
        boundary = (math.floor(t / SECONDS_PER_HOUR) + 1) * SECONDS_PER_HOUR
        exposure[int(t // SECONDS_PER_HOUR) % 24] += min(boundary, end) - t
        t = boundary
    return exposure


def route_traffic(traffic: TrafficLog) -> tuple[list[RouteTraffic], list[str]]:
    """Per-route statistics, and notes on routes left out (fewer than 2 requests: no rate)."""
    req = traffic.requests
    span = traffic.span_s
    log_rate = (len(req) - 1) / span
    out, left_out = [], []
    for name, group in req.groupby("route", sort=True):
        if len(group) < 2:
            left_out.append(f"route {name!r}: {len(group)} request, cannot give a rate; left out")
            continue
        out.append(_route(str(name), group, len(req), log_rate, traffic))
    if not out:
        raise InputError(f"{traffic.source}: no route has at least 2 requests; a rate needs at least 2")
    return out, left_out


def _route(name: str, group: pd.DataFrame, total: int, log_rate: float, traffic: TrafficLog) -> RouteTraffic:
    t = group["t_s"].to_numpy()
    rate = log_rate * len(group) / total  # the log's rate times the route's share of its requests
    gaps = np.diff(t)
    notes = []
    if len(group) >= 3 and gaps.mean() > 0:
        cv = float(gaps.std() / gaps.mean())
    else:
        cv = 1.0
        notes.append("arrival_cv assumed 1 (Poisson): too few requests to measure it")
    peak = peak_minute_rps(t, traffic.span_s)
    if peak is None:
        notes.append("peak_to_mean 1: the log is shorter than one minute")
    return RouteTraffic(name, len(group), float(t[-1] - t[0]), rate, rate if peak is None else peak, cv,
                        diurnal_profile(t, traffic.start, traffic.span_s), length_stats(group["input_len"]),
                        length_stats(group["output_len"]), tuple(notes))


# ---------------------------------------------------------------- routes table

def routes_frame(stats: Sequence[RouteTraffic], traffic: TrafficLog, model: str | None = None,
                 ttft_slo_ms: float | None = None, tpot_slo_ms: float | None = None,
                 e2e_slo_ms: float | None = None, slo_percentile: float | None = None) -> pd.DataFrame:
    """A ROUTES table (validated) with one online route per entry of `stats`.

    model: used where the log names none (default 'unknown', to be edited);
    SLO columns stay empty unless given.  notes say how each number was derived.
    """
    rows = [_route_row(s, traffic, model, (ttft_slo_ms, tpot_slo_ms, e2e_slo_ms), slo_percentile) for s in stats]
    return validate_frame(pd.DataFrame(rows), ROUTES, f"routes from {traffic.source}")


def _route_row(s: RouteTraffic, traffic: TrafficLog, model: str | None, slos: tuple, pct: float | None) -> dict:
    row: dict[str, object] = {
        "name": s.route, "model": traffic.models.get(s.route) or model or MODEL_UNKNOWN, "traffic": "online",
        "rate_rps": _round(s.rate_rps), "peak_to_mean": _round(s.peak_to_mean), "arrival_cv": _round(s.arrival_cv),
        "ttft_slo_ms": slos[0], "tpot_slo_ms": slos[1], "e2e_slo_ms": slos[2], "notes": route_notes(s, traffic),
    }
    if pct is not None:
        row["slo_percentile"] = pct
    for prefix, lengths in (("input_len", s.input), ("output_len", s.output)):
        for stat in ("mean", "p50", "p95", "p99"):
            row[f"{prefix}_{stat}"] = max(_round(getattr(lengths, stat)), 1.0)  # ROUTES lengths must be > 0
    return row


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def route_notes(s: RouteTraffic, traffic: TrafficLog) -> str:
    """How the route's numbers were derived, for the ROUTES notes column."""
    parts = [f"derived by planner.traffic from {Path(traffic.source).name} ({traffic.format} log; {s.requests} "
             f"requests, log span {traffic.span_s:.0f} s from {traffic.start:%Y-%m-%d %H:%M} UTC)",
             "rate_rps = log rate (requests-1)/span x the route's share of requests",
             f"peak_to_mean = busiest full minute / mean ({s.peak_rps:.4g} / {s.rate_rps:.4g} req/s)",
             "arrival_cv = std/mean of inter-arrival gaps",
             "lengths = mean and p50/p95/p99 (linear) of prompt and output tokens"]
    if s.diurnal is not None:
        parts.append("diurnal multipliers by UTC hour 0-23: " + " ".join(f"{m:.2f}" for m in s.diurnal))
    if traffic.skipped.count:
        parts.append(traffic.skipped.describe())
    parts.extend(s.notes)
    if traffic.format == "azure":
        parts.append(AZURE_ATTRIBUTION)
    parts.append("model and SLOs are not in the log: set them")
    return "; ".join(parts)


def summary_lines(traffic: TrafficLog, stats: Sequence[RouteTraffic], left_out: Sequence[str] = ()) -> list[str]:
    """Human-readable lines describing what was read and derived (for the CLI and the app)."""
    out = [f"{traffic.source}: {traffic.format} log, {len(traffic.requests)} requests over {traffic.span_s:.0f} s"]
    for text in (traffic.skipped.describe(), traffic.skipped.describe_order(), *left_out):
        if text:
            out.append(text)
    for s in stats:
        out.append(f"route {s.route}: {s.requests} requests, mean {s.rate_rps:.4g} req/s, peak minute "
                   f"{s.peak_rps:.4g} req/s (x{s.peak_to_mean:.2f}), arrival CV {s.arrival_cv:.2f}, "
                   f"input mean/p50/p95/p99 {_lengths_text(s.input)}, output {_lengths_text(s.output)}"
                   + (", diurnal profile derived" if s.diurnal is not None else ""))
    return out


def _lengths_text(lengths: LengthStats) -> str:
    return "/".join(f"{v:.0f}" for v in (lengths.mean, lengths.p50, lengths.p95, lengths.p99))


def log_to_routes(path: str | Path, fmt: str | None = None, route: str | None = None, strict: bool = False,
                  model: str | None = None, **slos: float | None) -> tuple[pd.DataFrame, list[str]]:
    """read_log + route_traffic + routes_frame: (ROUTES table, summary lines)."""
    traffic = read_log(path, fmt, route, strict)
    stats, left_out = route_traffic(traffic)
    return routes_frame(stats, traffic, model, **slos), summary_lines(traffic, stats, left_out)

