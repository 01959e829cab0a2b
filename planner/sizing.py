"""Sizing one route on one fitted curve: operating concurrency and replicas.

Online routes: search the largest concurrency C per replica whose predicted
TPOT, and TTFT / end-to-end latency before queueing, meet the route's SLOs at
its percentile, then size replicas with the G/G/c model of planner.queueing
(each replica = C slots, each busy for one request's end-to-end time) for the
route's peak rate and arrival variability.  Batch routes: the fewest replicas
that finish one job before its deadline.  Predictions are used conservatively:
the low end of the throughput interval, latencies scaled by the same factor.
Model and limits: docs/planning.md.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from fleetfacts.errors import InputError
from planner import queueing
from planner.curves import CurveLike
from planner.routes import Route

log = logging.getLogger(__name__)

# Concurrency candidates evaluated below the latency limit: fractions of it.  A smaller C leaves
# more TTFT budget for queueing, which can need fewer replicas when the TTFT SLO is tight.
CONCURRENCY_FRACTIONS = (1.0, 0.5, 0.25, 0.125)
# Predictions are memoised per (curve, shape); this bounds the cache.
PREDICTION_CACHE_SIZE = 1 << 17
# Provenance labels from strongest to weakest; a sizing takes the weakest it used.
PROVENANCE_ORDER = ("measured", "published", "predicted", "extrapolated", "transferred")


@dataclass(frozen=True)
class Policy:
    """Sizing assumptions (set from planner.assumptions.Assumptions).

    utilisation_cap: highest peak utilisation allowed; batch_efficiency: share of
    a batch job's wall time spent at predicted throughput; default_service_cv2:
    squared CV of service time when a route gives no output-length percentiles.
    """

    utilisation_cap: float = 0.95
    batch_efficiency: float = 0.9
    default_service_cv2: float = 1.0


@dataclass(frozen=True)
class Sizing:
    """The fleet one curve needs for one route.

    Latencies (ms) are at the route's SLO percentile, queueing included (online);
    throughput is per replica at the operating point, tok/s with its interval.
    utilisation: mean offered load over fleet capacity (online) or busy share of
    the deadline (batch).  job_hours: wall hours of one batch job (NaN online).
    miss / miss_ratio: for an infeasible online option, the SLO it misses most
    and by how much (ratio of predicted to target, minus 1).
    """

    feasible: bool
    reason: str
    replicas: int
    gpus: int
    concurrency: float
    replica_tok_s: float
    replica_tok_s_low: float
    replica_tok_s_high: float
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    utilisation: float
    peak_utilisation: float
    job_hours: float
    provenance: str
    note: str = ""
    miss_ratio: float = 0.0


# ---------------------------------------------------------------- memoised predictions

@lru_cache(maxsize=PREDICTION_CACHE_SIZE)
def _concurrency(curve: CurveLike, input_len: float, output_len: float, concurrency: int) -> Any:
    return curve.predict_concurrency(input_len, output_len, concurrency)


@lru_cache(maxsize=PREDICTION_CACHE_SIZE)
def _offline(curve: CurveLike, input_len: float, output_len: float, batch: int) -> Any:
    return curve.predict_offline(input_len, output_len, batch)


@lru_cache(maxsize=PREDICTION_CACHE_SIZE)
def _max_batch(curve: CurveLike, input_len: float, output_len: float) -> int:
    return int(curve.max_batch(input_len, output_len))


def clear_cache() -> None:
    """Forget memoised predictions (after refitting curves in place; new Curve objects need not)."""
    for fn in (_concurrency, _offline, _max_batch):
        fn.cache_clear()


def weakest_provenance(labels: list[str]) -> str:
    """The weakest of several provenance labels (transferred < extrapolated < predicted < published < measured)."""
    known = [label for label in labels if label in PROVENANCE_ORDER]
    return max(known, key=PROVENANCE_ORDER.index) if known else "predicted"


def _inflation(pred: Any) -> float:
    """Latency multiplier matching the low end of the throughput interval (>= 1)."""
    return max(1.0, pred.output_tok_per_s / pred.low) if pred.low > 0 else math.inf


# ---------------------------------------------------------------- online

@dataclass(frozen=True)
class _Point:
    """Service (pre-queueing) figures of one concurrency, at the SLO percentile, conservative side."""

    concurrency: int
    slot_service_s: float
    tpot_ms: float
    ttft_ms: float
    e2e_ms: float
    mean: Any
    pct: Any

    def misses(self, route: Route) -> list[tuple[float, str]]:
        """(ratio - 1, description) for each SLO the point misses before queueing."""
        out = []
        for metric, predicted, target in (("TPOT", self.tpot_ms, route.slo.tpot_ms),
                                          ("TTFT", self.ttft_ms, route.slo.ttft_ms),
                                          ("end-to-end latency", self.e2e_ms, route.slo.e2e_ms)):
            if target is not None and predicted > target:
                out.append((predicted / target - 1.0,
                            f"p{route.slo_percentile:g} {metric} by {_ms(predicted - target)} ms at concurrency "
                            f"{self.concurrency} (predicted {_ms(predicted)} ms, SLO {target:g} ms)"))
        return out


def _ms(value: float) -> str:
    return f"{value:.1f}" if abs(value) < 10 else f"{value:.0f}"


def _point(curve: CurveLike, route: Route, concurrency: int) -> _Point:
    mean = _concurrency(curve, route.input_len, route.output_len, concurrency)
    pct = _concurrency(curve, route.input_len_pct, route.output_len, concurrency)
    slot_service_s = concurrency * route.output_len / mean.low if mean.low > 0 else math.inf
    factor = _inflation(pct)
    tpot = pct.tpot_ms * factor
    ttft = pct.ttft_ms * factor
    e2e = ttft + (route.output_len_pct - 1.0) * tpot
    return _Point(concurrency, slot_service_s, tpot, ttft, e2e, mean, pct)


def _largest_meeting(curve: CurveLike, route: Route, cap: int) -> int:
    """Largest C in [1, cap] meeting the service SLOs (latency grows with C); 0 if none."""
    if _point(curve, route, 1).misses(route):
        return 0
    low, high = 1, cap
    if not _point(curve, route, high).misses(route):
        return high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if not _point(curve, route, mid).misses(route) else (low, mid)
    return low


def size_online(curve: CurveLike, route: Route, tp: int, policy: Policy = Policy()) -> Sizing:
    """Replicas of `curve` serving `route` within its SLOs at its peak rate (see module doc)."""
    cap = _max_batch(curve, route.input_len, route.output_len)
    best = _largest_meeting(curve, route, cap)
    if best == 0:
        return _infeasible_online(_point(curve, route, 1), route, tp)
    cs2 = route.output_cv2 if route.output_cv2 is not None else policy.default_service_cv2
    point = _point(curve, route, best)
    queue = _queue(point, route, cs2, policy)
    if queue.replicas > queueing.load_bound(route.peak_rps, best / point.slot_service_s, policy.utilisation_cap):
        # The TTFT budget, not capacity, set the replicas: a lower concurrency may leave more of it.
        for c in sorted({max(1, round(best * f)) for f in CONCURRENCY_FRACTIONS[1:]} - {best}, reverse=True):
            other = _point(curve, route, c)
            other_queue = _queue(other, route, cs2, policy)
            if other_queue.replicas < queue.replicas:
                point, queue = other, other_queue
    return _online_sizing(curve, route, tp, point, queue)


def _wait_budget_s(point: _Point, route: Route) -> float:
    budgets = [target - predicted for target, predicted in ((route.slo.ttft_ms, point.ttft_ms),
                                                             (route.slo.e2e_ms, point.e2e_ms))
               if target is not None]
    return min(budgets) / 1000.0 if budgets else math.inf


def _queue(point: _Point, route: Route, cs2: float, policy: Policy) -> queueing.QueueSizing:
    return queueing.replicas_for(
        route.peak_rps, point.concurrency / point.slot_service_s, route.arrival_cv**2, cs2,
        _wait_budget_s(point, route), percentile=route.slo_percentile / 100.0,
        slots_per_replica=point.concurrency, utilisation_cap=policy.utilisation_cap)


def _online_sizing(curve: CurveLike, route: Route, tp: int, point: _Point,
                   queue: queueing.QueueSizing) -> Sizing:
    wait_ms = queue.wait_pct_s * 1000.0
    mean = point.mean
    return Sizing(
        feasible=True, reason="", replicas=queue.replicas, gpus=queue.replicas * tp,
        concurrency=float(point.concurrency), replica_tok_s=mean.output_tok_per_s, replica_tok_s_low=mean.low,
        replica_tok_s_high=mean.high, ttft_ms=point.ttft_ms + wait_ms, tpot_ms=point.tpot_ms,
        e2e_ms=point.e2e_ms + wait_ms, utilisation=queue.utilisation / route.peak_to_mean,
        peak_utilisation=queue.utilisation, job_hours=math.nan,
        provenance=weakest_provenance([mean.provenance, point.pct.provenance]),
        note=_latency_note(curve, mean))


def _latency_note(curve: CurveLike, pred: Any) -> str:
    notes = [str(pred.note)] if getattr(pred, "note", "") else []
    if not curve.has_latency and not any("latency" in n for n in notes):
        notes.append("latency predicted without latency measurements")
    return "; ".join(notes)


def _infeasible_online(point: _Point, route: Route, tp: int) -> Sizing:
    ratio, what = max(point.misses(route))
    return Sizing(
        feasible=False, reason=f"misses {what}", replicas=0, gpus=0, concurrency=1.0,
        replica_tok_s=point.mean.output_tok_per_s, replica_tok_s_low=point.mean.low,
        replica_tok_s_high=point.mean.high, ttft_ms=point.ttft_ms, tpot_ms=point.tpot_ms, e2e_ms=point.e2e_ms,
        utilisation=math.nan, peak_utilisation=math.nan, job_hours=math.nan,
        provenance=weakest_provenance([point.mean.provenance, point.pct.provenance]), miss_ratio=ratio)


# ---------------------------------------------------------------- batch

def _batch_run(curve: CurveLike, route: Route, replicas: int) -> tuple[float, Any, int]:
    """(wall seconds at predicted throughput, prediction, requests per replica) for one job."""
    per_replica = math.ceil(route.num_requests / replicas)
    pred = _offline(curve, route.input_len, route.output_len, per_replica)
    seconds = per_replica * route.output_len / pred.low if pred.low > 0 else math.inf
    return seconds, pred, per_replica


def size_batch(curve: CurveLike, route: Route, tp: int, policy: Policy = Policy()) -> Sizing:
    """Fewest replicas finishing one job within deadline * batch_efficiency (more replicas never hurt)."""
    budget_s = route.deadline_hours * 3600.0 * policy.batch_efficiency

    def meets(replicas: int) -> bool:
        return _batch_run(curve, route, replicas)[0] <= budget_s

    most = max(1, route.num_requests)
    if not meets(most):
        seconds = _batch_run(curve, route, most)[0]
        return _infeasible_batch(route, seconds)
    low, high = 0, 1
    while not meets(high):
        low, high = high, min(high * 2, most)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if meets(mid) else (mid, high)
    return _batch_sizing(curve, route, tp, high, policy)


def _batch_sizing(curve: CurveLike, route: Route, tp: int, replicas: int, policy: Policy) -> Sizing:
    seconds, pred, per_replica = _batch_run(curve, route, replicas)
    wall_hours = seconds / 3600.0 / policy.batch_efficiency
    return Sizing(
        feasible=True, reason="", replicas=replicas, gpus=replicas * tp,
        concurrency=float(min(per_replica, _max_batch(curve, route.input_len, route.output_len))),
        replica_tok_s=pred.output_tok_per_s, replica_tok_s_low=pred.low, replica_tok_s_high=pred.high,
        ttft_ms=pred.ttft_ms, tpot_ms=pred.tpot_ms, e2e_ms=pred.e2e_ms,
        utilisation=wall_hours / route.deadline_hours, peak_utilisation=wall_hours / route.deadline_hours,
        job_hours=wall_hours, provenance=weakest_provenance([pred.provenance]), note=str(pred.note or ""))


def _infeasible_batch(route: Route, seconds: float) -> Sizing:
    return unsized(f"one request alone takes {seconds / 3600:.2f} h, longer than the {route.deadline_hours:g} h "
                   f"deadline (x batch efficiency)")


def unsized(reason: str) -> Sizing:
    """An infeasible sizing with no prediction behind it."""
    nan = math.nan
    return Sizing(False, reason, 0, 0, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, "predicted")


def size_route(curve: CurveLike, route: Route, tp: int, policy: Policy = Policy()) -> Sizing:
    """Size `route` on `curve` (tp GPUs per replica): online or batch."""
    if route.traffic == "online":
        return size_online(curve, route, tp, policy)
    if route.traffic == "batch":
        return size_batch(curve, route, tp, policy)
    raise InputError(f"route {route.name!r}: traffic must be online or batch, got {route.traffic!r}")
