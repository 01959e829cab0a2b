"""Sizing one route on one fitted curve: replicas, and the latency they will see.

Online routes: the fewest replicas whose latency, as the latency door
(planner.latency.predict) predicts it for one replica carrying its share of the
route's peak rate, meets every SLO at the route's percentile: the route's log
replayed at that share where it has one, else open-loop arrivals at its arrival
CV with its length distribution.  The search starts at the utilisation cap's
floor (peak rate over the low end of a replica's saturated throughput, times
the cap) and doubles, then bisects.  The sizing keeps that report: the plan
prints its percentiles, interval and tier, which is what `measure verify`
measures.  A request alone (closed loop, concurrency 1) missing an SLO makes
the option infeasible at once.  Batch routes: the fewest replicas that finish
one job before its deadline, at the low end of the throughput interval.
Model and limits: docs/planning.md.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from fleetfacts.errors import InputError
from fleetfacts.slo import SloCheck
from planner.engine.curves import CurveLike
from planner.latency import DEFAULT_ROUTER, PERCENTILES, Fleet, LatencyReport, Lengths, OpenLoop, Replay, predict
from planner.latency.analytic import Offline, Steady, analytic
from planner.sizing import queueing
from planner.sizing.search import bisect_replicas
from planner.traffic.routes import Route
from planner.traffic.workload import LOAD_MAX_REQUESTS, LogRequests, Requests

log = logging.getLogger(__name__)

# Predictions are memoised per (curve, shape); this bounds the cache.
PREDICTION_CACHE_SIZE = 1 << 17
# Provenance labels from strongest to weakest; a sizing takes the weakest it used.
PROVENANCE_ORDER = ("measured", "published", "predicted", "physics", "extrapolated", "transferred")


@dataclass(frozen=True)
class Policy:
    """Sizing assumptions (set from planner.sizing.assumptions.Assumptions).

    utilisation_cap: highest peak utilisation allowed; batch_efficiency: share of
    a batch job's wall time spent at predicted throughput.
    """

    utilisation_cap: float = 0.95
    batch_efficiency: float = 0.9


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
    latency: LatencyReport | None = None
    check: SloCheck | None = None


# ---------------------------------------------------------------- memoised predictions

@lru_cache(maxsize=PREDICTION_CACHE_SIZE)
def _concurrency(curve: CurveLike, input_len: float, output_len: float, concurrency: int) -> Any:
    return analytic(curve, Steady(input_len, output_len, concurrency)).prediction


@lru_cache(maxsize=PREDICTION_CACHE_SIZE)
def _offline(curve: CurveLike, input_len: float, output_len: float, batch: int) -> Any:
    return analytic(curve, Offline(input_len, output_len, batch)).prediction


@lru_cache(maxsize=PREDICTION_CACHE_SIZE)
def _max_batch(curve: CurveLike, input_len: float, output_len: float) -> int:
    return int(curve.max_batch(input_len, output_len))


@lru_cache(maxsize=PREDICTION_CACHE_SIZE)
def _saturated(curve: CurveLike, input_len: float, output_len: float) -> Any:
    return curve.saturated(input_len, output_len)


def clear_cache() -> None:
    """Forget memoised predictions (after refitting curves in place; new Curve objects need not)."""
    for fn in (_concurrency, _offline, _max_batch, _saturated):
        fn.cache_clear()
    _SHARES.clear()
    _FLEETS.clear()


def weakest_provenance(labels: list[str]) -> str:
    """The weakest of several provenance labels (transferred < extrapolated < physics < predicted < published < measured)."""
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
        """(ratio - 1, description) for each SLO the point misses before queueing.  A route whose requests have
        no second token (mean output 1 token: a 0- or 1-token log) has no TPOT to miss (fleetfacts.slo)."""
        out = []
        tpot_target = route.slo.tpot_ms if route.output_len > 1 else None
        for metric, predicted, target in (("TPOT", self.tpot_ms, tpot_target),
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


# A replica's share of a log replayed by the screen is at most this many requests: its busiest stretch of them
# (every option is screened, on each count the search tries; a million-request log replayed whole for each cost
# minutes and a gigabyte).  The fleet check judges the whole log.  As many as a route without a log is planned on.
SHARE_MAX_REQUESTS = LOAD_MAX_REQUESTS
# Bisection steps of sustainable_rps on the rate (10: within 0.1% of the top).
RATE_SEARCH_STEPS = 10
# Replica counts searched: up to this many times the utilisation floor (and at least this many).
SEARCH_CEILING_FACTOR = 8
SEARCH_CEILING_MIN = 64


def size_online(curve: CurveLike, route: Route, tp: int, policy: Policy = Policy(),
                log: LogRequests | None = None, uncached: float = 1.0) -> Sizing:
    """The fewest replicas of `curve` whose latency at the route's peak share meets its SLOs (module doc).

    log: the route's request log (arrival times, (prompt, output tokens)): replayed at each replica's share
    instead of synthetic arrivals at the route's arrival CV.  uncached: the share of prompt tokens a replica
    prefills (a route with prefix structure: 1 - the share its prefix cache serves; 1: cold): the capacity, the
    utilisation cap's floor and the share's latency are taken at prompts that much shorter (a request alone stays
    cold), the capacity never below the cold prompts' (a cache hit takes no work away from a replica's decode or
    KV cache, and a prompt shortened below the curve's measured lengths would read the low end of an
    extrapolated interval); the fleet simulation with the prefix caches judges the count.
    """
    alone = _point(curve, route, 1)
    if alone.misses(route):
        return _infeasible_online(alone, route, tp)
    if uncached < 1.0:
        warm, warm_log = uncached_view(route, log, uncached)
        sized = _size_online_at(curve, warm, tp, policy, warm_log, alone, at_least=_capacity(curve, route))
        return replace(sized, note="; ".join(n for n in (sized.note, _uncached_note(route, uncached)) if n))
    return _size_online_at(curve, route, tp, policy, log, alone)


def uncached_view(route: Route, log: LogRequests | None, uncached: float) -> tuple[Route, LogRequests | None]:
    """The route and its log with every prompt `uncached` times as long (at least 1 token): what a replica
    prefills when its prefix cache serves the rest."""
    i = route.input
    warm = replace(route, input=replace(i, mean=i.mean * uncached, p50=i.p50 * uncached, p95=i.p95 * uncached,
                                        p99=i.p99 * uncached))
    if log is None:
        return warm, None
    times, (inputs, outputs) = log
    short = np.maximum(1, np.rint(np.asarray(inputs, dtype=float) * uncached)).astype(np.int64)
    return warm, (times, (short, outputs))


def _uncached_note(route: Route, uncached: float) -> str:
    return (f"first pass at the mean uncached prompt ({route.input_len * uncached:.0f} of {route.input_len:.0f} "
            f"tokens: {1.0 - uncached:.1%} of prompt tokens served by an unbounded prefix cache)")


def _size_online_at(curve: CurveLike, route: Route, tp: int, policy: Policy, log: LogRequests | None,
                    alone: _Point, at_least: Any = None) -> Sizing:
    capacity = _capacity(curve, route)
    if at_least is not None and at_least.low > capacity.low:  # the cold prompts' capacity (size_online)
        capacity = at_least
    if not capacity.low > 0:
        return _infeasible_online(alone, route, tp)
    floor = queueing.load_bound(route.peak_rps, capacity.low / route.output_len, policy.utilisation_cap)
    reports: dict[int, LatencyReport] = {}

    def meets(replicas: int) -> bool:
        if replicas not in reports:
            reports[replicas] = share_latency(curve, route, replicas, log)
        return reports[replicas].meets(route)

    ceiling = max(SEARCH_CEILING_MIN, SEARCH_CEILING_FACTOR * floor)
    replicas = bisect_replicas(lambda r: r >= floor and meets(r), floor, ceiling)
    if replicas is None:
        return _infeasible_at_ceiling(reports[max(reports)], alone, capacity, route, max(reports))
    return _online_sizing(curve, route, tp, replicas, reports[replicas], capacity, alone)




def share_latency(curve: CurveLike, route: Route, replicas: int, log: LogRequests | None = None) -> LatencyReport:
    """Latency of one of `replicas` replicas carrying its share of the route's peak rate: its log at that
    peak, every replicas-th request (round robin), else open-loop arrivals at the route's arrival CV and
    length distribution split at random (planner.latency.OpenLoop.share).  Memoised per curve, route, count
    and log file (the app re-plans on every edit; a re-plan of unchanged routes simulates nothing)."""
    key = (curve, route, replicas, route.log if log is not None else None)
    if key not in _SHARES:
        if len(_SHARES) >= PREDICTION_CACHE_SIZE:
            _SHARES.clear()
        _SHARES[key] = _share_latency(curve, route, replicas, log)
    return _SHARES[key]


_SHARES: dict[tuple, LatencyReport] = {}


def _share_latency(curve: CurveLike, route: Route, replicas: int, log: LogRequests | None) -> LatencyReport:
    percentiles = tuple(sorted({*PERCENTILES, route.slo_percentile}))
    if log is not None:
        times, lengths = log
        share = Replay.of_log(times, lengths, route.peak_rps, replicas).busiest(SHARE_MAX_REQUESTS)
        return predict(curve, share, percentiles=percentiles)
    load = OpenLoop(route.peak_rps, route.arrival_cv).share(replicas)
    return predict(curve, load, Lengths.of_route(route), percentiles=percentiles)


# ---------------------------------------------------------------- the fleet: what decides an online replica count

@dataclass(frozen=True, eq=False)
class FleetSizing:
    """Outcome of search_fleet: the fewest replicas whose whole fleet meets the route's SLO by the one verdict
    (None: none up to the ceiling), that fleet's latency report and verdict (the largest tried when none met),
    and every (replicas, verdict) simulated."""

    replicas: int | None
    report: LatencyReport
    check: SloCheck
    tried: tuple[tuple[int, SloCheck], ...]

    @property
    def feasible(self) -> bool:
        return self.replicas is not None


def fleet_latency(curve: CurveLike, route: Route, replicas: int, requests: Requests,
                  router: str = DEFAULT_ROUTER) -> LatencyReport:
    """The door's fleet tier: `replicas` replicas of `curve` behind `router` serving the route's one load
    (planner.traffic.workload.route_load).  Memoised per curve, route, count, router and whether the load carries
    prefix structure (a route's load is fixed by the route and its log; the same log without its block ids is the
    cold load); the least recently used reports go first past FLEET_CACHE_REQUESTS."""
    key = (curve, replace(route, slo_window_s=0.0), replicas, router, requests.arrival_s.size,  # windows: no effect
           requests.blocks is not None)
    if key in _FLEETS:
        _FLEETS[key] = _FLEETS.pop(key)  # now the most recently used
        return _FLEETS[key]
    percentiles = tuple(sorted({*PERCENTILES, route.slo_percentile}))
    report = predict(curve, Fleet(requests, replicas, router), percentiles=percentiles)
    _FLEETS[key] = report
    held = sum(_requests_held(r) for r in _FLEETS.values())
    while len(_FLEETS) > 1 and (len(_FLEETS) > PREDICTION_CACHE_SIZE or held > FLEET_CACHE_REQUESTS):
        held -= _requests_held(_FLEETS.pop(next(iter(_FLEETS))))
    return report


def _requests_held(report: LatencyReport) -> int:
    return sum(result.n for result in report.results)


# Simulated requests the fleet reports memoised by fleet_latency hold at most (~40 bytes of results each): four
# simulations of a million-request log, ~160 MB.  Unbounded, a plan of such a log kept every fleet its search and
# views simulated; at half this, the views simulate evicted fleets again (benchmarks/odd_logs.py: +13 s CPU).
FLEET_CACHE_REQUESTS = 4_000_000
_FLEETS: dict[tuple, LatencyReport] = {}


def search_fleet(curve: CurveLike, route: Route, requests: Requests, start: int, attainment: float,
                 router: str = DEFAULT_ROUTER, floor: int = 1, ceiling: int | None = None) -> FleetSizing:
    """The fewest replicas (>= floor) whose fleet simulation holds every SLO window and the attainment target
    (fleetfacts.slo), searched from `start` down or up (doubling), then bisected."""
    targets = route.targets(attainment)
    floor = max(1, int(floor))
    start = max(floor, int(start))
    top = ceiling or max(SEARCH_CEILING_MIN, SEARCH_CEILING_FACTOR * start)
    checks: dict[int, SloCheck] = {}

    def meets(replicas: int) -> bool:
        if replicas < floor:
            return False
        if replicas not in checks:
            checks[replicas] = fleet_latency(curve, route, replicas, requests, router).check(targets)
        return checks[replicas].ok

    best = bisect_replicas(meets, start, max(top, start))
    chosen = best if best is not None else max(checks)
    return FleetSizing(best, fleet_latency(curve, route, chosen, requests, router), checks[chosen],
                       tuple(sorted(checks.items())))


def sustainable_rps(curve: CurveLike, route: Route, policy: Policy = Policy(), log: LogRequests | None = None,
                    steps: int = RATE_SEARCH_STEPS) -> float:
    """Requests/s one replica carries within the route's SLOs and the utilisation cap (0: none), searched
    on the same latency model as size_online (bisection on the rate)."""
    if _point(curve, route, 1).misses(route):
        return 0.0
    capacity = _capacity(curve, route)
    top = policy.utilisation_cap * capacity.low / route.output_len if capacity.low > 0 else 0.0
    if not top > 0:
        return 0.0

    def meets(rate: float) -> bool:
        return share_latency(curve, replace(route, rate_rps=rate, peak_to_mean=1.0), 1, log).meets(route)

    if meets(top):
        return top
    low, high = 0.0, top
    for _ in range(steps):
        mid = (low + high) / 2
        low, high = (mid, high) if meets(mid) else (low, mid)
    return low


def _capacity(curve: CurveLike, route: Route) -> Any:
    """Saturated output tokens/s of one replica at the route's mean lengths (with its interval)."""
    return _saturated(curve, route.input_len, route.output_len)


def _online_sizing(curve: CurveLike, route: Route, tp: int, replicas: int, report: LatencyReport, capacity: Any,
                   alone: _Point) -> Sizing:
    peak = route.peak_rps * route.output_len / (replicas * capacity.low)
    nan = math.nan
    sized = Sizing(
        feasible=True, reason="", replicas=replicas, gpus=replicas * tp, concurrency=nan,
        replica_tok_s=capacity.output_tok_per_s, replica_tok_s_low=capacity.low, replica_tok_s_high=capacity.high,
        ttft_ms=nan, tpot_ms=nan, e2e_ms=nan, utilisation=peak / route.peak_to_mean, peak_utilisation=peak,
        job_hours=nan, provenance=weakest_provenance([capacity.provenance, alone.pct.provenance]),
        note=_latency_note(curve, capacity))
    return with_latency(sized, report, route)


def with_latency(sized: Sizing, report: LatencyReport, route: Route, check: SloCheck | None = None) -> Sizing:
    """`sized` reporting `report`'s latency at the route's percentile (after a check changed its replicas), and
    the verdict that decided its replicas (None: sized on one replica's share, not judged per window)."""
    pct = route.slo_percentile
    return replace(sized, ttft_ms=report.value("ttft", pct), tpot_ms=report.value("tpot", pct),
                   e2e_ms=report.value("e2e", pct), concurrency=report.in_flight_p99, latency=report, check=check)


def _infeasible_at_ceiling(report: LatencyReport, alone: _Point, capacity: Any, route: Route, ceiling: int) -> Sizing:
    ratio, what = max(report.misses(route))
    pct = route.slo_percentile
    return Sizing(
        feasible=False, reason=f"misses {what} even on {ceiling} replicas", replicas=0, gpus=0, concurrency=1.0,
        replica_tok_s=capacity.output_tok_per_s, replica_tok_s_low=capacity.low, replica_tok_s_high=capacity.high,
        ttft_ms=report.value("ttft", pct), tpot_ms=report.value("tpot", pct), e2e_ms=report.value("e2e", pct),
        utilisation=math.nan, peak_utilisation=math.nan, job_hours=math.nan,
        provenance=weakest_provenance([capacity.provenance, alone.pct.provenance]), miss_ratio=ratio,
        latency=report)


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


def size_route(curve: CurveLike, route: Route, tp: int, policy: Policy = Policy(),
               log: LogRequests | None = None, uncached: float = 1.0) -> Sizing:
    """Size `route` on `curve` (tp GPUs per replica): online (replaying `log` where given; uncached: size_online)
    or batch."""
    if route.traffic == "online":
        return size_online(curve, route, tp, policy, log, uncached)
    if route.traffic == "batch":
        return size_batch(curve, route, tp, policy)
    raise InputError(f"route {route.name!r}: traffic must be online or batch, got {route.traffic!r}")
