"""Measure a running deployment against its plan: `python -m measure verify`.

The route's traffic (its request log, or arrivals at its rate with its length
distribution) is scaled to the share the deployment under test should carry
(`replicas` of the plan's replicas, at the peak rate the plan sized for), sent
with the load generator, and each metric is judged against the plan row:

- within interval: the measurement is within the plan's prediction +- its interval;
- drift: outside it, but within the SLO (the plan's numbers are off: re-plan with the
  profile row this writes);
- SLO at risk: past the route's SLO at its percentile, errors (requests still running
  at the end of the drain count), or nothing measured.

Reads plans and routes through fleetfacts only (measure never imports planner).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from fleetfacts.arrivals import arrival_times
from fleetfacts.errors import InputError
from fleetfacts.schema import ROUTES, load_plan_rows, load_table
from fleetfacts.slo import DEFAULT_WINDOW_S, SloCheck, Targets
from fleetfacts.slo import judge as judge_windows
from measure.loadgen import LoadResult, RequestSpec, load_request_log
from measure.stats import Measurement

WITHIN, DRIFT, AT_RISK = "within interval", "drift", "SLO at risk"
NOT_MEASURED = "not measured"  # e.g. TPOT when every output is one token, and no SLO depends on it
# Relative width below which a prediction cannot be judged: the run-to-run spread of one shape on one server
# (5-15% measured on the H200, README "What the measurements say"); the plan's own interval is used when wider.
RUN_TO_RUN_SPREAD = 0.15
# Length knots of the synthetic distribution: (percentile, route column); the 0th percentile is one token.
LENGTH_KNOTS = ((50.0, "p50"), (95.0, "p95"), (99.0, "p99"))


@dataclass(frozen=True)
class Verdict:
    """One metric: measured value, the plan's prediction and band, the SLO, and the judgement."""

    metric: str
    measured: float | None
    predicted: float | None
    low: float | None
    high: float | None
    slo: float | None
    verdict: str

    def row(self) -> dict[str, Any]:
        return {"metric": self.metric, "measured": self.measured, "predicted": self.predicted, "low": self.low,
                "high": self.high, "slo": self.slo, "verdict": self.verdict}


@dataclass(frozen=True)
class Share:
    """What the deployment under test should carry: its replicas out of the plan's, at this rate."""

    rate_rps: float
    replicas: int
    plan_replicas: int

    @property
    def fraction(self) -> float:
        return self.replicas / self.plan_replicas


# ------------------------------------------------------------------ inputs

def plan_row(path: str | Path, route: str) -> dict[str, Any]:
    """The route's row of a plan file (either plan format); raises InputError when absent or not planned."""
    plan = load_plan_rows(path)
    rows = plan[plan["route"] == route].to_dict("records")
    if not rows:
        raise InputError(f"{path}: no route {route!r} (routes: {', '.join(plan['route'])})")
    row = rows[0]
    if row["status"] != "ok" or row["traffic"] != "online":
        raise InputError(f"{path}: route {route!r} is {row['status']} / {row['traffic'] or 'no traffic'}; "
                         "verify needs a planned online route")
    return row


def route_row(path: str | Path, route: str) -> dict[str, Any]:
    """The route's row of a routes file, its `log` resolved against the file's folder."""
    routes = load_table(path, ROUTES)
    rows = routes[routes["name"] == route].to_dict("records")
    if not rows:
        raise InputError(f"{path}: no route {route!r} (routes: {', '.join(routes['name'])})")
    row = rows[0]
    if row["log"] and not Path(row["log"]).is_absolute():
        row["log"] = str(Path(path).resolve().parent / row["log"])
    return row


def share_of(route: Mapping[str, Any], plan: Mapping[str, Any], replicas: int, scale: float = 1.0) -> Share:
    """The peak rate (what the plan sized the fleet for) times replicas / the plan's replicas, times scale."""
    plan_replicas = int(plan["replicas"])
    if replicas < 1 or replicas > plan_replicas:
        raise InputError(f"--replicas must be between 1 and the plan's {plan_replicas}, got {replicas}")
    peak = float(route["rate_rps"]) * float(route["peak_to_mean"])
    return Share(peak * replicas / plan_replicas * scale, replicas, plan_replicas)


# ------------------------------------------------------------------ the load

def sample_lengths(route: Mapping[str, Any], prefix: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """n lengths: the route's given quantiles joined linearly (inverse CDF), or all at the mean if none given."""
    knots = [(q, float(route[f"{prefix}_{name}"])) for q, name in LENGTH_KNOTS
             if not pd.isna(route[f"{prefix}_{name}"])]
    if not knots:
        return np.full(n, max(1, round(float(route[f"{prefix}_mean"]))), dtype=int)
    levels = [0.0] + [q for q, _ in knots] + [100.0]
    values = [1.0] + [v for _, v in knots] + [knots[-1][1]]
    draws = np.interp(rng.uniform(0, 100, size=n), levels, values)
    return np.maximum(1, np.round(draws)).astype(int)


def share_cv(route_cv: float, fraction: float) -> float:
    """Arrival CV of a random share of a stream (CV^2 = 1 + (CV^2 - 1) x fraction): how the planner splits a
    route's bursts between replicas (planner.latency.OpenLoop.share)."""
    return math.sqrt(max(0.0, 1.0 + (route_cv**2 - 1.0) * fraction))


def synthetic_requests(route: Mapping[str, Any], share: Share, duration_s: float, max_requests: int,
                       seed: int) -> tuple[RequestSpec, ...]:
    """Arrivals at the share's rate for duration_s: gamma gaps with the route's arrival CV split as a load
    balancer splits it (share_cv; Poisson stays Poisson), lengths from the route's quantiles."""
    n = max(1, min(max_requests, math.ceil(share.rate_rps * duration_s)))
    times = arrival_times(n, share.rate_rps, synthetic_arrival(route, share), seed)
    rng = np.random.default_rng(seed)
    inputs, outputs = sample_lengths(route, "input_len", n, rng), sample_lengths(route, "output_len", n, rng)
    return tuple(RequestSpec(int(i), int(o), t) for i, o, t in zip(inputs, outputs, times, strict=True))


def synthetic_arrival(route: Mapping[str, Any], share: Share) -> str:
    """The arrival process of the share: 'poisson' or 'gamma:cv=X'."""
    cv = share_cv(float(route["arrival_cv"]), share.fraction)
    return "poisson" if math.isclose(cv, 1.0) else f"gamma:cv={cv:.4g}"


def replayed_requests(log: str | Path, share: Share, duration_s: float, max_requests: int,
                      route_rate_rps: float, route: str | None = None,
                      block_size: int | None = None) -> tuple[RequestSpec, ...]:
    """A request log's requests at the share of the fleet's traffic: times scaled so the whole log runs at the
    peak rate (x --scale), then the deployment's share of them round robin (of every plan_replicas requests,
    the first `replicas`), as the planner replays a route's log; cut to the bounds.  block_size: carry the
    log's prefix structure (its prompts then share tokens as the log's do)."""
    specs = load_request_log(log, route, block_size)
    whole_rate = share.rate_rps / share.fraction
    stretch = route_rate_rps / whole_rate if whole_rate > 0 else 1.0
    kept = [replace(r, send_at_s=(r.send_at_s or 0.0) * stretch) for k, r in enumerate(specs)
            if k % share.plan_replicas < share.replicas]
    return tuple(r for r in kept if (r.send_at_s or 0.0) <= duration_s)[:max_requests]


# ------------------------------------------------------------------ one window of the load (--window heaviest:S)

# Arrivals replayed before the heaviest window, so the window starts on the queue the traffic before it leaves
# (up to this many seconds; not judged).
WINDOW_LEAD_IN_S = 30.0


WINDOW_KINDS = ("heaviest", "worst", "at")


def parse_window(text: str | None) -> float | None:
    """--window heaviest:SECONDS, worst:SECONDS or at:START:SECONDS -> SECONDS (None: the whole run); window_kind
    says which, window_at where an `at` window starts."""
    if text is None:
        return None
    kind, _, rest = text.partition(":")
    start, _, seconds = rest.rpartition(":") if kind == "at" else ("0", "", rest)
    try:
        value, begin = float(seconds), float(start)
    except ValueError:
        value = begin = math.nan
    if kind not in WINDOW_KINDS or not (math.isfinite(value) and value > 0 and math.isfinite(begin) and begin >= 0):
        raise InputError(f"--window: expected heaviest:SECONDS, worst:SECONDS or at:START:SECONDS (e.g. heaviest:60, "
                         f"at:1551:60), got {text!r}")
    return value


def window_at(text: str) -> float:
    """Where an `at:START:SECONDS` window (parse_window accepted it) starts, s."""
    return float(text.partition(":")[2].rpartition(":")[0])


def window_kind(text: str | None) -> str:
    """The kind of a --window that parse_window accepted: heaviest (the most arrivals), worst or at (a start)."""
    return (text or "heaviest").partition(":")[0]


def worst_start(times: Sequence[float], predicted_ttft_ms: Sequence[float], window_s: float, pct: float) -> float:
    """Start of the window_s-long window (starting at an arrival) whose requests' predicted TTFT at percentile
    `pct` is the highest (ties: the higher mean): the minute a plan predicts worst for these requests."""
    t = np.asarray(times, dtype=float)
    order = np.argsort(t, kind="stable")
    t, ttft = t[order], np.asarray(predicted_ttft_ms, dtype=float)[order]
    if not t.size:
        return 0.0
    ends = np.searchsorted(t, t + window_s, side="left")
    scores = [(float(np.nanpercentile(ttft[i:end], pct)), float(np.nanmean(ttft[i:end])))
              if np.isfinite(ttft[i:end]).any() else (-math.inf, -math.inf) for i, end in enumerate(ends)]
    return float(t[max(range(len(scores)), key=scores.__getitem__)])


def pooled_window(records: Sequence[Mapping[str, Any]], window_s: float, pct: float) -> dict[str, float]:
    """Replays of one fleet window, one record per replica (`verify --assigned FILE --window at:START:SECONDS
    --record`), pooled as the fleet's SLO window: the `pct` percentile of TTFT and TPOT (ms) over every request a
    replay judged (due from its lead-in, within window_s), and how many.  Raises InputError for a record without
    its per-request timeline (written before it was recorded)."""
    ttft: list[float] = []
    tpot: list[float] = []
    for k, rec in enumerate(records):
        if "timeline" not in rec:
            raise InputError(f"record {k + 1}: no per-request timeline (recorded by an older verify)")
        begin = float(rec["judged_from_s"])
        for sent, first, each in rec["timeline"]:
            if begin <= sent < begin + window_s:
                ttft.append(first)
                if each is not None:
                    tpot.append(each)
    return {"requests": float(len(ttft)),
            "ttft_ms": float(np.percentile(ttft, pct)) if ttft else math.nan,
            "tpot_ms": float(np.percentile(tpot, pct)) if tpot else math.nan}


def heaviest_start(times: Sequence[float], window_s: float) -> float:
    """Start of the window_s-long window holding the most arrivals (windows start at an arrival)."""
    t = np.sort(np.asarray(times, dtype=float))
    if not t.size:
        return 0.0
    counts = np.searchsorted(t, t + window_s, side="left") - np.arange(t.size)
    return float(t[int(np.argmax(counts))])


def window_of(requests: Sequence[RequestSpec], start_s: float, window_s: float,
              lead_in_s: float = WINDOW_LEAD_IN_S) -> tuple[tuple[RequestSpec, ...], float]:
    """The requests arriving in [start - lead-in, start + window), times shifted to begin at 0, and the lead-in
    kept (not judged: the verdict's warm-up)."""
    lead = min(lead_in_s, start_s)
    begin, end = start_s - lead, start_s + window_s
    kept = tuple(replace(r, send_at_s=(r.send_at_s or 0.0) - begin) for r in requests
                 if begin <= (r.send_at_s or 0.0) < end)
    return kept, lead


# ------------------------------------------------------------------ one replica's requests as the plan's router assigned them

# Columns of `planner simulate --replica-out` (planner.planning.plan_check.REPLICA_COLUMNS).
ASSIGNED_COLUMNS = ("timestamp", "input_len", "output_len", "predicted_ttft_ms", "predicted_tpot_ms")


def assigned_requests(path: str | Path) -> pd.DataFrame:
    """The requests the plan's router sent to one replica (`planner simulate --replica-out`), sorted by time, at
    the planned load's times, with the fleet simulation's predicted TTFT and TPOT per request."""
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as err:
        raise InputError(f"--assigned {path}: cannot read ({err})") from None
    missing = [c for c in ASSIGNED_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"--assigned {path}: missing column(s) {', '.join(missing)} (write it with "
                         "`python -m planner simulate --replica-out`)")
    frame = frame[list(ASSIGNED_COLUMNS)].apply(pd.to_numeric, errors="coerce")
    if frame[["timestamp", "input_len", "output_len"]].isna().any().any() or frame.empty:
        raise InputError(f"--assigned {path}: no requests, or a timestamp or length that is not a number")
    return frame.sort_values("timestamp", kind="stable").reset_index(drop=True)


def assigned_specs(frame: pd.DataFrame) -> tuple[RequestSpec, ...]:
    return tuple(RequestSpec(max(1, int(i)), max(1, int(o)), float(t)) for t, i, o in
                 zip(frame["timestamp"], frame["input_len"], frame["output_len"], strict=True))


def predicted_check(frame: pd.DataFrame, begin_s: float, end_s: float, route: Mapping[str, Any],
                    warmup_s: float = 0.0, attainment: float = 0.99) -> SloCheck:
    """The one verdict on the fleet simulation's predictions for the replayed requests (those arriving in
    [begin_s, end_s), times from begin_s, the first warmup_s not judged): what the measured check is compared to."""
    kept = frame[(frame["timestamp"] >= begin_s) & (frame["timestamp"] < end_s)]
    ttft, tpot = kept["predicted_ttft_ms"].to_numpy(float) / 1000, kept["predicted_tpot_ms"].to_numpy(float) / 1000
    e2e = ttft + np.nan_to_num(tpot) * np.maximum(kept["output_len"].to_numpy(float) - 1, 0)
    return judge_windows(kept["timestamp"].to_numpy(float) - begin_s, ttft, tpot, e2e, route_targets(route, attainment),
                         warmup_s)


def window_comparison(measured: SloCheck, predicted: SloCheck) -> list[dict[str, float]]:
    """Per measured window, the predicted window that starts nearest: start, requests, TTFT and TPOT at the SLO
    percentile, measured and predicted (ms)."""
    rows = []
    for k in range(measured.windows):
        j = int(np.argmin(np.abs(predicted.start_s - measured.start_s[k]))) if predicted.windows else -1
        rows.append({"start_s": float(measured.start_s[k]), "requests": int(measured.requests[k]),
                     "ttft_measured_ms": float(measured.ttft_ms[k]),
                     "ttft_predicted_ms": float(predicted.ttft_ms[j]) if j >= 0 else math.nan,
                     "tpot_measured_ms": float(measured.tpot_ms[k]),
                     "tpot_predicted_ms": float(predicted.tpot_ms[j]) if j >= 0 else math.nan})
    return rows


# ------------------------------------------------------------------ judging

def measurement(load: LoadResult, requests: tuple[RequestSpec, ...]) -> Measurement:
    ok = [r for r in load.results if r.ok]
    return Measurement(
        num_requests=len(ok), duration_s=load.duration_s,
        input_tokens=sum(r.prompt_tokens or 0 for r in ok), output_tokens=sum(r.output_tokens for r in ok),
        ttft_ms=[r.ttft_s * 1000 for r in ok if r.ttft_s is not None],
        tpot_ms=[t * 1000 for r in ok if (t := r.tpot_s) is not None],
        itl_ms=[g * 1000 for r in ok for g in r.itl_s], e2e_ms=[r.e2e_s * 1000 for r in ok],
        errors=len(load.results) - len(ok) + load.cancelled,
        first_error=next((r.error for r in load.results if not r.ok), ""))


def band(plan: Mapping[str, Any], predicted: float) -> tuple[float, float]:
    """The prediction's band: the plan's relative throughput interval, at least the run-to-run spread."""
    value, low, high = (float(plan[c]) for c in ("replica_output_tok_per_s", "replica_output_tok_per_s_low",
                                                  "replica_output_tok_per_s_high"))
    relative = (high - low) / 2 / value if value > 0 and math.isfinite(high - low) else 0.0
    width = max(RUN_TO_RUN_SPREAD, relative)
    return predicted * (1 - width), predicted * (1 + width)


def latency_band(plan: Mapping[str, Any], metric: str, predicted: float) -> tuple[float, float]:
    """The plan's own 90% interval of a latency (columns <metric>_pred_ms_low/_high), at least the run-to-run
    spread around the prediction; plans without those columns: the throughput interval's width (band)."""
    low, high = _number(plan.get(f"{metric}_pred_ms_low")), _number(plan.get(f"{metric}_pred_ms_high"))
    spread_low, spread_high = predicted * (1 - RUN_TO_RUN_SPREAD), predicted * (1 + RUN_TO_RUN_SPREAD)
    if low is None or high is None:
        return band(plan, predicted)
    return min(low, spread_low), max(high, spread_high)


def judge(metric: str, measured: float | None, predicted: float | None, slo: float | None,
          plan: Mapping[str, Any], higher_is_better: bool = False,
          span: tuple[float, float] | None = None) -> Verdict:
    """Within the band (span, else the throughput interval's), drift (outside it, SLO kept), or SLO at risk
    (past the SLO, or no data for an SLO)."""
    low, high = (span or band(plan, predicted)) if predicted is not None else (None, None)
    if measured is None:
        verdict = AT_RISK if slo is not None else NOT_MEASURED
    elif slo is not None and measured > slo:
        verdict = AT_RISK
    elif low is not None and high is not None and not low <= measured <= high:
        verdict = f"{DRIFT} ({'better' if (measured > high) == higher_is_better else 'worse'} than predicted)"
    else:
        verdict = WITHIN
    return Verdict(metric, measured, predicted, low, high, slo, verdict)


def _percentile(values: Sequence[float], q: float) -> float | None:
    """numpy's linear-interpolation percentile, as the profile columns use; None without data."""
    return float(np.percentile(values, q)) if len(values) else None


def _number(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)  # type: ignore[arg-type]


def verdicts(m: Measurement, plan: Mapping[str, Any], route: Mapping[str, Any],
             load: LoadResult, requests: tuple[RequestSpec, ...]) -> list[Verdict]:
    """TTFT, TPOT and e2e at the route's SLO percentile against the plan's predictions (which are at that
    percentile too) and the SLO; served against offered output tokens/s; errors."""
    q = float(route["slo_percentile"])
    out = []
    for metric in ("ttft", "tpot", "e2e"):
        predicted = _number(plan[f"{metric}_pred_ms"])
        span = latency_band(plan, metric, predicted) if predicted is not None else None
        out.append(judge(f"{metric}_p{q:g}_ms", _percentile(getattr(m, f"{metric}_ms"), q), predicted,
                         _number(route[f"{metric}_slo_ms"]), plan, span=span))
    return out + [_throughput_verdict(load, requests, plan), _error_verdict(m)]


def route_targets(route: Mapping[str, Any], attainment: float = 0.99) -> Targets:
    """The route row's SLO as the one verdict's targets (fleetfacts.slo)."""
    window = _number(route.get("slo_window_s"))
    return Targets(_number(route.get("ttft_slo_ms")), _number(route.get("tpot_slo_ms")),
                   _number(route.get("e2e_slo_ms")), float(route["slo_percentile"]),
                   DEFAULT_WINDOW_S if window is None else window, attainment)


def window_check(load: LoadResult, route: Mapping[str, Any], warmup_s: float = 0.0,
                 attainment: float = 0.99) -> SloCheck:
    """The one SLO verdict (fleetfacts.slo) on the measured requests: every slo_window_s window of the route
    (by send time) and the attainment; requests sent before warmup_s (a window's lead-in) are not judged."""
    # By arrival as scheduled (as the planner's windows count), else by send time from the first send.
    scheduled = all(r.scheduled_s is not None for r in load.results)
    sent = [cast(float, r.scheduled_s) if scheduled else r.start_s for r in load.results]
    origin = 0.0 if scheduled or not sent else min(sent)
    nan = math.nan

    def arr(values: Sequence[float | None]) -> np.ndarray:
        return np.array([nan if v is None else v for v in values], dtype=float)

    ok = [r.ok for r in load.results]
    targets = route_targets(route, attainment)
    return judge_windows(arr([s - origin for s in sent]), arr([r.ttft_s if k else None for r, k in zip(load.results, ok, strict=True)]),
                         arr([r.tpot_s if k else None for r, k in zip(load.results, ok, strict=True)]),
                         arr([r.e2e_s if k else None for r, k in zip(load.results, ok, strict=True)]), targets, warmup_s)


def window_verdicts(check: SloCheck, plan: Mapping[str, Any], route: Mapping[str, Any]) -> list[Verdict]:
    """The worst window's TTFT and TPOT against the plan's worst-window prediction and the SLO, and the count of
    windows in breach (any is an SLO at risk)."""
    q = float(route["slo_percentile"])
    out = []
    for metric, measured in (("ttft", check.worst_ttft_ms), ("tpot", check.worst_tpot_ms)):
        predicted = _number(plan.get(f"{metric}_worst_window_ms"))
        out.append(judge(f"{metric}_p{q:g}_worst_window_ms", None if math.isnan(measured) else measured, predicted,
                         _number(route[f"{metric}_slo_ms"]), plan))
    breach = check.windows_in_breach
    verdict = AT_RISK if breach else WITHIN
    out.append(Verdict("windows_in_breach", float(breach), _number(plan.get("windows_in_breach")), None, None, 0.0,
                       f"{verdict} ({check.windows} windows judged)"))
    return out


def throughput(load: LoadResult, requests: tuple[RequestSpec, ...]) -> tuple[float | None, float | None]:
    """(served, offered) output tokens/s of the completed requests.

    served: their tokens over first send to last completion.  offered: every sent request at their
    mean tokens, over the arrival schedule's span plus the shortest request latency, i.e. what a
    deployment that keeps up would take.  Equal within noise when it keeps up; served falls below offered when it falls behind.
    """
    ok = [r for r in load.results if r.ok]
    if not ok or len(requests) < 2:
        return None, None
    tokens = sum(r.output_tokens for r in ok)
    sends = [r.send_at_s or 0.0 for r in requests]
    served = tokens / max(max(r.end_s for r in ok) - min(r.start_s for r in load.results), 1e-9)
    offered = tokens / len(ok) * len(requests) / (max(sends) - min(sends) + min(r.e2e_s for r in ok))
    return served, offered


def _throughput_verdict(load: LoadResult, requests: tuple[RequestSpec, ...], plan: Mapping[str, Any]) -> Verdict:
    """Served against offered output tokens/s (within the band, or drift); falling behind shows as SLO misses."""
    served, offered = throughput(load, requests)
    if served is None or offered is None:
        return Verdict("output_tok_per_s", served, offered, None, None, None, AT_RISK)
    return judge("output_tok_per_s", served, offered, None, plan, higher_is_better=True)


# Measured prefix-cache hit rate tolerated above the route's declared one: distinct random prompts still share
# a block now and then, and a system prompt's share varies from run to run.
PREFIX_HIT_TOLERANCE = 0.05


def prefix_hit_rate(server: Mapping[str, Any] | None) -> float | None:
    """Share of prompt tokens the server served from its prefix cache during the run (its /metrics counters).
    vLLM 0.26 counts a waiting request's lookup again at every scheduling retry (vllm-project/vllm#43736), so
    under KV pressure the queries are over-counted and this share is too low: `usage_hit_rate` is preferred."""
    counters = (server or {}).get("counters", {})
    queries, hits = counters.get("prefix_cache_queries"), counters.get("prefix_cache_hits")
    return hits / queries if queries and hits is not None else None


def usage_hit_rate(load: LoadResult) -> float | None:
    """Share of prompt tokens served from the prefix cache, summed over the completed requests whose usage
    carried `prompt_tokens_details.cached_tokens` (vLLM: `--enable-prompt-tokens-details`); None if none did."""
    pairs = [(r.cached_tokens, r.prompt_tokens) for r in load.results
             if r.ok and r.cached_tokens is not None and r.prompt_tokens]
    prompt = sum(p for _, p in pairs)
    return sum(c for c, _ in pairs) / prompt if prompt else None


def measured_hit_rate(load: LoadResult, server: Mapping[str, Any] | None) -> tuple[float | None, str]:
    """(the run's prefix-cache hit rate, where it was read: 'usage', '/metrics' or '')."""
    from_usage = usage_hit_rate(load)
    if from_usage is not None:
        return from_usage, "usage"
    from_metrics = prefix_hit_rate(server)
    return (from_metrics, "/metrics") if from_metrics is not None else (None, "")


def prefix_verdict(measured: float | None, route: Mapping[str, Any], plan: Mapping[str, Any] | None = None,
                   source: str = "") -> Verdict:
    """With the plan's predicted hit rate (`prefix_hit_rate_pred`, a route with prefix structure): the measured
    rate beside it, within PREFIX_HIT_TOLERANCE either way.  Without: drift when the run hit the prefix cache
    more than the route declares (`prefix_hit_rate`, default 0): it measured less prefill than production."""
    predicted = _number((plan or {}).get("prefix_hit_rate_pred"))
    name = "prefix_hit_rate" + (f" ({source})" if source else "")
    if predicted is not None and not math.isnan(predicted):
        low, high = max(0.0, predicted - PREFIX_HIT_TOLERANCE), predicted + PREFIX_HIT_TOLERANCE
        if measured is None:
            return Verdict(name, None, predicted, low, high, None, NOT_MEASURED)
        verdict = WITHIN if low <= measured <= high else (
            f"{DRIFT} (the prefix cache served {measured:.0%} of prompt tokens, the plan predicted {predicted:.0%})")
        return Verdict(name, measured, predicted, low, high, None, verdict)
    declared = _number(route.get("prefix_hit_rate")) or 0.0
    if measured is None:
        return Verdict(name, None, declared, None, None, None, NOT_MEASURED)
    high = declared + PREFIX_HIT_TOLERANCE
    verdict = WITHIN if measured <= high else (
        f"{DRIFT} (the prefix cache served {measured:.0%} of prompt tokens, the route declares {declared:.0%}: "
        "less prefill than production)")
    return Verdict(name, measured, declared, 0.0, high, None, verdict)


def _error_verdict(m: Measurement) -> Verdict:
    return Verdict("errors", float(m.errors), 0.0, None, None, 0.0, WITHIN if m.errors == 0 else AT_RISK)


def exit_code(results: list[Verdict]) -> int:
    """0: every metric within its band; EXIT_DRIFT: SLOs kept, predictions off; EXIT_AT_RISK: an SLO at risk."""
    kinds = {v.verdict.split(" (")[0] for v in results}
    if AT_RISK in kinds:
        return EXIT_AT_RISK
    return EXIT_DRIFT if DRIFT in kinds else EXIT_MEETS


EXIT_MEETS, EXIT_DRIFT, EXIT_AT_RISK = 0, 4, 5


# ------------------------------------------------------------------ the measured profile row

def profile_row(columns: Mapping[str, Any], m: Measurement, plan: Mapping[str, Any], share: Share,
                requests: tuple[RequestSpec, ...], arrival: str, source: str,
                arrival_seed: int | None = None) -> dict[str, Any]:
    """A PROFILE row (mode rate) of what the deployment measured, in the plan's engine group.

    arrival_seed: the seed of synthetic arrivals (None for a replayed log).
    Throughput is per replica (the share's replicas split the load), as profiles record it.
    """
    per_replica = {k: (v / share.replicas if v is not None else None)
                   for k, v in columns.items() if k in ("output_tok_per_s", "total_tok_per_s", "req_per_s")}
    return {**columns, **per_replica,
            "gpu": plan["gpu"], "engine": plan["engine"], "engine_version": plan["engine_version"] or "unknown",
            "model": plan["model"] or "unknown", "precision": plan["precision"], "tp": int(plan["tp"]),
            "config": plan["engine_config"] or "default", "mode": "rate",
            "input_len": max(1, round(float(np.mean([r.input_len for r in requests])))),
            "output_len": max(1, round(float(np.mean([r.output_len for r in requests])))),
            "request_rate": share.rate_rps / share.replicas, "arrival": arrival, "arrival_seed": arrival_seed,
            "status": "ok",
            "provenance": "measured", "source": source,
            "date": datetime.now(timezone.utc).date().isoformat(),
            "notes": f"measure verify of plan route {plan['route']} on {share.replicas} of {share.plan_replicas} "
                     f"replicas; {m.errors} errors"}
