"""Request logs -> per-route traffic statistics -> routes (schema ROUTES).

The logs are read by fleetfacts.requestlog.read_log (formats, skipped rows and errors are documented
there; measure verify replays logs through the same reader).

`route_traffic` derives per route: mean rate, `peak_to_mean` (the busiest
hour over the mean hour; 1 for a log shorter than a day, which carries its own
bursts), burstiness (CV of inter-arrival gaps), burst descriptors (peak 10 s /
60 s / 300 s sliding-window rates over the mean, index of dispersion of minute
counts: descriptors, never scale factors), a diurnal profile (hourly rate
multipliers) when the log spans at least 24 h, length quantiles, and the prefix
reuse of a log that carries prefix structure (planner.traffic.prefixes);
`routes_frame` turns them into a ROUTES table.  Definitions: docs/traffic.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fleetfacts.errors import InputError
from fleetfacts.requestlog import (  # noqa: F401 - re-exported: the planner's callers read logs from here
    AZURE_COLUMNS,
    DEFAULT_BLOCK_SIZE,
    FORMATS,
    GENERIC_COLUMNS,
    HASH_COLUMN,
    MAX_LOG_BYTES,
    MAX_TOKENS_PER_REQUEST,
    SkipReport,
    TrafficLog,
    detect_format,
    read_log,
)
from fleetfacts.schema import MAX_ARRIVAL_CV, MAX_PEAK_TO_MEAN, ROUTES, validate_frame
from planner.traffic.prefixes import BlockIds, PrefixReuse, PromptBlocks, prefix_reuse

BUCKET_S = 60.0          # peak_minute_rps: busiest full minute
DIURNAL_MIN_SPAN_S = 24 * 3600.0  # a diurnal profile needs at least one whole day
SECONDS_PER_HOUR = 3600.0
# peak_to_mean compares hours of the day: below a day the log is replayed as it is (its bursts included), so 1
PEAK_HOUR_MIN_SPAN_S = DIURNAL_MIN_SPAN_S
# issue 34: 10 s (what a queue feels), 60 s (the SLO window), 300 s (about an engine's scale-up reaction time)
BURST_WINDOWS_S = (10.0, 60.0, 300.0)
DISPERSION_BIN_S = 60.0  # index of dispersion of per-minute counts (1 = Poisson, 0 = periodic)
LENGTH_QUANTILES = (50, 95, 99)
MODEL_UNKNOWN = "unknown"
AZURE_ATTRIBUTION = ("Azure LLM inference trace (Azure Public Dataset, CC-BY): Patel et al., \"Splitwise: Efficient "
                     "generative LLM inference using phase splitting\", ISCA 2024")


@dataclass(frozen=True)
class LengthStats:
    """Token-length distribution summary (tokens)."""

    mean: float
    p50: float
    p95: float
    p99: float


@dataclass(frozen=True, eq=False)
class BurstDescriptors:
    """How bursty a route's arrivals are, at the scales of a queue, an SLO window and a scale-up.

    peak_10s / peak_60s / peak_300s: the most arrivals in any window [t, t + w)
    starting at an arrival, per second, over the mean rate (NaN when the log is
    shorter than w); dispersion_60s: variance / mean (sample variance) of the
    arrival counts in the log's full 60 s bins aligned at its start (1 for
    Poisson, 0 for evenly spaced; NaN below two full bins or with no arrival in
    them).  Descriptors only: the planner replays a log's own timestamps and
    never scales a rate by them.  Equal when every field is (NaN equals NaN).
    """

    peak_10s: float
    peak_60s: float
    peak_300s: float
    dispersion_60s: float

    def peaks(self) -> dict[float, float]:
        """Window length (s) -> peak rate over the mean."""
        return dict(zip(BURST_WINDOWS_S, (self.peak_10s, self.peak_60s, self.peak_300s), strict=True))

    def _values(self) -> tuple[float, ...]:
        return (self.peak_10s, self.peak_60s, self.peak_300s, self.dispersion_60s)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BurstDescriptors):
            return NotImplemented
        return bool(np.array_equal(self._values(), other._values(), equal_nan=True))

    def __hash__(self) -> int:
        return hash(tuple(repr(v) for v in self._values()))


@dataclass(frozen=True)
class RouteTraffic:
    """Traffic of one route as derived from a log.

    rate_rps: mean rate; peak_hour_rps: busiest full hour counted from the log's
    first arrival, None when the log spans less than a day; arrival_cv: CV of
    the route's inter-arrival gaps (1.0, assumed Poisson, with only 2
    requests); diurnal: 24 hourly rate multipliers (UTC hour of day, mean 1 over
    the log's hours) or None when the log spans less than 24 h; bursts: burst
    descriptors (peak 10/60/300 s rates over the mean, dispersion at 60 s);
    reuse: the prefix reuse of a log with prefix structure, else None.
    """

    route: str
    requests: int
    span_s: float
    rate_rps: float
    peak_hour_rps: float | None
    arrival_cv: float
    diurnal: tuple[float, ...] | None
    input: LengthStats
    output: LengthStats
    bursts: BurstDescriptors
    notes: tuple[str, ...] = ()
    reuse: PrefixReuse | None = None

    @property
    def peak_to_mean(self) -> float:
        """Busiest hour over the mean rate, at least 1; 1 for a log shorter than a day (it carries its own bursts)."""
        if self.peak_hour_rps is None:
            return 1.0
        return max(1.0, self.peak_hour_rps / self.rate_rps)



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
    return _busiest_aligned_rps(t_s, span_s, BUCKET_S)


def peak_hour_rps(t_s: np.ndarray, span_s: float) -> float | None:
    """Requests/s of the busiest full hour counted from the log's first arrival (t_s = 0).

    None when the log spans less than a day (PEAK_HOUR_MIN_SPAN_S): such a log
    is replayed as it is, so it has no busier hour to scale to.
    """
    if span_s < PEAK_HOUR_MIN_SPAN_S:
        return None
    return _busiest_aligned_rps(t_s, span_s, SECONDS_PER_HOUR)


def _busiest_aligned_rps(t_s: np.ndarray, span_s: float, width_s: float) -> float | None:
    """Requests/s of the busiest full bin [k w, (k + 1) w) within [0, span_s); None if there is no full bin."""
    bins = int(span_s // width_s)
    if bins < 1:
        return None
    counts = np.bincount((np.asarray(t_s) // width_s).astype(np.int64), minlength=bins)[:bins]
    return float(counts.max()) / width_s


def burst_descriptors(arrival_s: np.ndarray, start_s: float | None = None, end_s: float | None = None,
                      mean_rps: float | None = None) -> BurstDescriptors:
    """Peak sliding-window rates over the mean and the index of dispersion at 60 s (see BurstDescriptors).

    arrival_s: arrival times (s, any order); start_s / end_s: the log's extent
    (default: first / last arrival), which sets which windows and bins are
    whole; mean_rps: the mean rate (default (n - 1) / (end_s - start_s)).
    A window w's peak is max over arrivals i of #{j: t_i <= t_j < t_i + w} / w,
    counted with np.searchsorted.  Raises InputError below 2 arrivals, for an
    empty extent or a mean rate that is not positive.
    """
    t = np.sort(np.asarray(arrival_s, dtype=float))
    if t.size < 2:
        raise InputError(f"burst descriptors need at least 2 arrivals, got {t.size}")
    start = float(t[0]) if start_s is None else float(start_s)
    span = (float(t[-1]) if end_s is None else float(end_s)) - start
    if not span > 0:
        raise InputError(f"burst descriptors need a log extent > 0 s (start to end), got {span} s")
    mean = (t.size - 1) / span if mean_rps is None else float(mean_rps)
    if not mean > 0:
        raise InputError(f"burst descriptors need a mean rate > 0 req/s, got {mean}")
    p10, p60, p300 = (_peak_window_rps(t, w) / mean if span >= w else math.nan for w in BURST_WINDOWS_S)
    return BurstDescriptors(p10, p60, p300, _dispersion(t - start, span, DISPERSION_BIN_S))


def _peak_window_rps(t: np.ndarray, width_s: float) -> float:
    """Most arrivals in any window [t_i, t_i + width_s) starting at an arrival, per second (t sorted)."""
    counts = np.searchsorted(t, t + width_s, side="left") - np.arange(t.size)
    return float(counts.max()) / width_s


def _dispersion(t: np.ndarray, span_s: float, bin_s: float) -> float:
    """Sample variance / mean of the counts in the full bins [k b, (k + 1) b) within [0, span_s); NaN below 2.
    Counted over the bins holding arrivals, each empty bin adding its squared distance from the mean: a year
    between two bursts costs nothing (a bin per minute of it was half a million counts)."""
    bins = int(span_s // bin_s)
    if bins < 2:
        return math.nan
    k = (t // bin_s).astype(np.int64)
    counts = np.unique(k[k < bins], return_counts=True)[1].astype(float)
    mean = counts.sum() / bins
    if not mean > 0:
        return math.nan
    squares = float(np.sum((counts - mean) ** 2)) + (bins - counts.size) * mean**2
    return squares / (bins - 1) / mean


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


def route_traffic(traffic: TrafficLog, cache_tokens: int | None = None) -> tuple[list[RouteTraffic], list[str]]:
    """Per-route statistics, and notes on routes left out (fewer than 2 requests: no rate).

    A log with prefix structure also gives each route's reuse (one cache per route), with what an LRU cache of
    `cache_tokens` serves when given.
    """
    req = traffic.requests
    span = traffic.span_s
    log_rate = (len(req) - 1) / span
    out, left_out = [], []
    for name, group in req.groupby("route", sort=True):
        if len(group) < 2:
            left_out.append(f"route {name!r}: {len(group)} request, cannot give a rate; left out")
            continue
        out.append(_route(str(name), group, len(req), log_rate, traffic, cache_tokens))
    if not out:
        raise InputError(f"{traffic.source}: no route has at least 2 requests; a rate needs at least 2")
    return out, left_out


def _route(name: str, group: pd.DataFrame, total: int, log_rate: float, traffic: TrafficLog,
           cache_tokens: int | None) -> RouteTraffic:
    t = group["t_s"].to_numpy()
    rate = log_rate * len(group) / total  # the log's rate times the route's share of its requests
    gaps = np.diff(t)
    notes = []
    if len(group) >= 3 and gaps.mean() > 0:
        cv = float(gaps.std() / gaps.mean())
    else:
        cv = 1.0
        notes.append("arrival_cv assumed 1 (Poisson): too few requests to measure it")
    bursts = burst_descriptors(t, start_s=0.0, end_s=traffic.span_s, mean_rps=rate)
    stats = RouteTraffic(name, len(group), float(t[-1] - t[0]), rate, peak_hour_rps(t, traffic.span_s), cv,
                         diurnal_profile(t, traffic.start, traffic.span_s), length_stats(group["input_len"]),
                         length_stats(group["output_len"]), bursts, tuple(notes),
                         _reuse(group, traffic.block_size, cache_tokens))
    if stats.peak_to_mean > MAX_PEAK_TO_MEAN or cv > MAX_ARRIVAL_CV:
        raise InputError(f"{traffic.source}: route {name!r} has {len(group)} requests over {_span_text(stats.span_s)}; "
                         f"its busiest hour runs at {stats.peak_to_mean:.3g}x its mean rate and its gaps have a CV of "
                         f"{cv:.3g} (the planner takes at most {MAX_PEAK_TO_MEAN:g} and {MAX_ARRIVAL_CV:g}): too "
                         "sparse to plan on; give a log of the route's continuous traffic")
    return stats


def log_blocks(traffic: TrafficLog) -> BlockIds | None:
    """The log's prefix structure (each request's block ids, in the log's order) when it was read with a block
    size and has one (`hash_ids` or `session_id`), else None."""
    if traffic.block_size is None:
        return None
    return BlockIds.of(traffic.requests[HASH_COLUMN], traffic.block_size)


def _reuse(group: pd.DataFrame, block_size: int | None, cache_tokens: int | None) -> PrefixReuse | None:
    if block_size is None:
        return None
    blocks = PromptBlocks(group["t_s"].to_numpy(), group["input_len"].to_numpy(), list(group[HASH_COLUMN]))
    return prefix_reuse(blocks, block_size, cache_tokens)


def _span_text(seconds: float) -> str:
    days = seconds / 86400
    return f"{days / 365.25:.3g} years" if days > 730 else f"{days:.3g} days" if days >= 2 else f"{seconds:.3g} s"


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
    start = (", times relative to its first request" if traffic.format == "mooncake"
             else f" from {traffic.start:%Y-%m-%d %H:%M} UTC")
    parts = [f"derived by planner.traffic from {Path(traffic.source).name} ({traffic.format} log; {s.requests} "
             f"requests, log span {traffic.span_s:.0f} s{start})",
             "rate_rps = log rate (requests-1)/span x the route's share of requests",
             peak_to_mean_note(s),
             "arrival_cv = std/mean of inter-arrival gaps",
             "bursts (descriptors, not scale factors) " + burst_text(s.bursts),
             "lengths = mean and p50/p95/p99 (linear) of prompt and output tokens"]
    if s.diurnal is not None:
        parts.append("diurnal multipliers by UTC hour 0-23: " + " ".join(f"{m:.2f}" for m in s.diurnal))
    if s.reuse is not None:
        parts.append(s.reuse.describe() + "; the plan replays these prefixes: each replica keeps a prefix cache and "
                     "prefills only the uncached tokens (plan column prefix_hit_rate_pred)")
    if traffic.skipped.count:
        parts.append(traffic.skipped.describe())
    parts.extend(s.notes)
    if traffic.format == "azure":
        parts.append(AZURE_ATTRIBUTION)
    parts.append("model and SLOs are not in the log: set them")
    return "; ".join(parts)


def peak_to_mean_note(s: RouteTraffic) -> str:
    """What the route's peak_to_mean means, for its notes."""
    if s.peak_hour_rps is None:
        return ("peak_to_mean = 1: the log spans less than a day, so it carries its own bursts and is replayed "
                "at its own timestamps (busiest hour over the mean hour needs a day of log)")
    return (f"peak_to_mean = busiest full hour (counted from the first arrival) / mean hour, at least 1 "
            f"({s.peak_hour_rps:.4g} / {s.rate_rps:.4g} req/s)")


def burst_text(b: BurstDescriptors) -> str:
    """'peak 10 s 16.2x, 60 s 4.7x, 300 s 1.8x mean, dispersion at 60 s 167' (n/a where the log is too short)."""
    peaks = ", ".join(f"{w:.0f} s " + (f"{r:.1f}x" if math.isfinite(r) else "n/a") for w, r in b.peaks().items())
    dispersion = f"{b.dispersion_60s:.3g}" if math.isfinite(b.dispersion_60s) else "n/a"
    return f"peak {peaks} mean, dispersion at {DISPERSION_BIN_S:.0f} s {dispersion}"


def summary_lines(traffic: TrafficLog, stats: Sequence[RouteTraffic], left_out: Sequence[str] = ()) -> list[str]:
    """Human-readable lines describing what was read and derived (for the CLI and the app)."""
    out = [f"{traffic.source}: {traffic.format} log, {len(traffic.requests)} requests over {traffic.span_s:.0f} s"]
    for text in (traffic.skipped.describe(), traffic.skipped.describe_order(), *left_out):
        if text:
            out.append(text)
    for s in stats:
        hour = "busiest hour / mean" if s.peak_hour_rps is not None else "log shorter than a day"
        out.append(f"route {s.route}: {s.requests} requests, mean {s.rate_rps:.4g} req/s, peak_to_mean "
                   f"{s.peak_to_mean:.2f} ({hour}), arrival CV {s.arrival_cv:.2f}, "
                   f"input mean/p50/p95/p99 {_lengths_text(s.input)}, output {_lengths_text(s.output)}"
                   + (", diurnal profile derived" if s.diurnal is not None else ""))
        out.append(f"{s.route}: {burst_text(s.bursts)}")
        if s.reuse is not None:
            out.append(f"{s.route}: {s.reuse.describe()}")
    return out


def _lengths_text(lengths: LengthStats) -> str:
    return "/".join(f"{v:.0f}" for v in (lengths.mean, lengths.p50, lengths.p95, lengths.p99))


def log_to_routes(path: str | Path, fmt: str | None = None, route: str | None = None, strict: bool = False,
                  model: str | None = None, block_size: int = DEFAULT_BLOCK_SIZE, cache_tokens: int | None = None,
                  **slos: float | None) -> tuple[pd.DataFrame, list[str]]:
    """read_log (its prefix structure at `block_size` tokens per hash id) + route_traffic + routes_frame:
    (ROUTES table, summary lines)."""
    traffic = read_log(path, fmt, route, strict, block_size)
    stats, left_out = route_traffic(traffic, cache_tokens)
    return routes_frame(stats, traffic, model, **slos), summary_lines(traffic, stats, left_out)

