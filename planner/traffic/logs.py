"""Request logs -> per-route traffic statistics -> routes (schema ROUTES).

The logs are read by fleetfacts.requestlog.read_log (formats, skipped rows and errors are documented
there; measure verify replays logs through the same reader).

`route_traffic` derives per route: mean rate, peak per-minute rate,
burstiness (CV of inter-arrival gaps), a diurnal profile (hourly rate
multipliers) when the log spans at least 24 h, and length quantiles;
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
    FORMATS,
    GENERIC_COLUMNS,
    MAX_LOG_BYTES,
    MAX_TOKENS_PER_REQUEST,
    SkipReport,
    TrafficLog,
    detect_format,
    read_log,
)
from fleetfacts.schema import ROUTES, validate_frame

BUCKET_S = 60.0          # peak rate: busiest full minute
DIURNAL_MIN_SPAN_S = 24 * 3600.0  # a diurnal profile needs at least one whole day
SECONDS_PER_HOUR = 3600.0
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

