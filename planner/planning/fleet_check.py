"""The simulation check of one fleet deployment serving the mixed traffic of several routes.

A deployment (one fitted curve, R replicas) serves streams: a route's requests, or (GPU mix) those of
its requests whose lengths fall in a bucket.  `attainment` simulates the deployment to steady state
on all its streams at once and judges each route by the one SLO verdict (fleetfacts.slo: every window of
its slo_window_s and the attainment target, measured after the warm-up); `smallest_fleet` searches the fewest
replicas at which every route holds.

Traffic: a route with a request log (its `log` column) replays its one load (planner.traffic.workload.
route_requests: the log's own timestamps, its busiest hour peak_to_mean times as busy), as the plan does,
stretched only where an hour's rate is below the peak; any other route draws arrivals at the given rate with its
arrival CV (a gamma renewal process) and lengths from its distributions.  A stream keeps the requests
whose lengths fall in its bucket.  As the door's Fleet tier does, a large deployment is represented by
k = min(R, SIM_MAX_REPLICAS) replicas fed a random k/R share of every stream.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from fleetfacts.errors import InputError
from fleetfacts.slo import SloCheck, judge
from planner.engine.curves import CurveLike
from planner.latency import DEFAULT_ROUTER, Fleet, SimResult, predict, service_time_s
from planner.sizing.search import bisect_replicas
from planner.traffic.prefixes import BlockIds
from planner.traffic.routes import Route
from planner.traffic.workload import (
    ROUTE_BLOCK_SIZE,
    SIM_MAX_REPLICAS,
    SIM_MAX_REQUESTS,
    SIM_MIN_MEASURED,
    SIM_SERVICE_TIMES,
    SIM_WARMUP_SERVICE_TIMES,
    THINNING_MARGIN,
    THINNING_SLACK,
    Requests,
    route_load,
    route_log_load,
    route_log_requests,
    thinned_gamma,
)

# Search ceiling: this many times the starting fleet (a fleet that needs more is not worth keeping).
SEARCH_CEILING_FACTOR = 8


@dataclass(frozen=True)
class Bucket:
    """Requests whose prompt and output lengths fall in (low, high] token ranges (all: the whole route)."""

    input_low: float = 0.0
    input_high: float = math.inf
    output_low: float = 0.0
    output_high: float = math.inf

    def holds(self, input_len: np.ndarray, output_len: np.ndarray) -> np.ndarray:
        return ((input_len > self.input_low) & (input_len <= self.input_high)
                & (output_len > self.output_low) & (output_len <= self.output_high))

    @property
    def whole(self) -> bool:
        return self == Bucket()

    def label(self) -> str:
        """'' for the whole route, else e.g. 'in<=1469,out>13'."""
        parts = []
        for name, low, high in (("in", self.input_low, self.input_high), ("out", self.output_low, self.output_high)):
            if math.isfinite(high):
                parts.append(f"{name}<={high:g}")
            if low > 0:
                parts.append(f"{name}>{low:g}")
        return ",".join(parts)


@dataclass(frozen=True)
class Stream:
    """Part of a route's traffic sent to one deployment: its requests in `bucket`, at `route_rps` for the
    whole route (the bucket's own rate is that times its share)."""

    route: Route
    route_rps: float
    bucket: Bucket = Bucket()
    share: float = 1.0  # of the route's requests in the bucket (sets how long a low-rate stream is simulated)


# Simulations kept for reuse, most recent first: the fleet's check rounds (and the steps of a $-by-lever
# waterfall) simulate the same deployment on the same streams again; a simulation is seeded, so its result
# is the same.  Bounded, so a long-running app process does not grow without limit.
SIM_MEMO_SIZE = 512
_ATTAINED: OrderedDict[Hashable, _Simulated] = OrderedDict()
_ATTAINED_LOCK = threading.Lock()


def attainment(curve: CurveLike, streams: Sequence[Stream], replicas: int, seed: int = 0,
               target: float = 0.99, router: str = DEFAULT_ROUTER) -> dict[str, float]:
    """Each route's simulated SLO attainment with `replicas` replicas of `curve` serving every stream."""
    return {name: c.attainment for name, c in checks(curve, streams, replicas, seed, target, router).items()}


def checks(curve: CurveLike, streams: Sequence[Stream], replicas: int, seed: int = 0,
           target: float = 0.99, router: str = DEFAULT_ROUTER) -> dict[str, SloCheck]:
    """Each route's SLO verdict (fleetfacts.slo) with `replicas` replicas of `curve` behind `router` serving every
    stream (a simulation already run on the same curve object, streams, replicas, seed, target and router is
    reused)."""
    return dict(_simulation(curve, streams, replicas, seed, target, router).checks)


def prefix_hit_rate(curve: CurveLike, streams: Sequence[Stream], replicas: int, seed: int = 0,
                    target: float = 0.99, router: str = DEFAULT_ROUTER) -> float:
    """Prompt tokens found in the replicas' prefix caches over the prompt tokens of the streams with prefix
    structure (served requests), in the same simulation as `checks`; NaN when no stream has any."""
    return _simulation(curve, streams, replicas, seed, target, router).prefix_hit_rate


def carries_prefixes(streams: Sequence[Stream]) -> bool:
    """Whether any stream has prefix structure (its route's log's block ids, or a declared shared prefix): the
    deployment's router then decides its cache hits."""
    for stream in streams:
        logged = _log(stream.route)
        structured = logged.blocks is not None if logged is not None else stream.route.shared_prefix_tokens > 0
        if structured:
            return True
    return False


@dataclass(frozen=True)
class _Simulated:
    checks: dict[str, SloCheck]
    prefix_hit_rate: float


def _simulation(curve: CurveLike, streams: Sequence[Stream], replicas: int, seed: int,
                target: float, router: str = DEFAULT_ROUTER) -> _Simulated:
    key = (curve, tuple(streams), replicas, seed, target, router)
    with _ATTAINED_LOCK:
        if key in _ATTAINED:
            _ATTAINED.move_to_end(key, last=False)
            return _ATTAINED[key]
    out = _simulated_checks(curve, streams, replicas, seed, target, router)
    with _ATTAINED_LOCK:
        _ATTAINED[key] = out
        _ATTAINED.move_to_end(key, last=False)
        while len(_ATTAINED) > SIM_MEMO_SIZE:
            _ATTAINED.popitem(last=True)
    return out


def _simulated_checks(curve: CurveLike, streams: Sequence[Stream], replicas: int, seed: int,
                      target: float, router: str = DEFAULT_ROUTER) -> _Simulated:
    """Per route, the verdict of its worst stream (a route split over buckets holds only if each part does)."""
    merged = _requests(curve, streams, replicas, seed)
    t = merged.requests.arrival_s
    # `simulated` replicas with their share of the streams: fewer than SIM_MAX_REPLICAS when the streams are too busy
    # to simulate that many (each replica must see the load it would see in the whole fleet).
    report = predict(curve, Fleet(merged.requests, merged.replicas, router))
    result = report.results[0]
    out: dict[str, SloCheck] = {}
    for index, stream in enumerate(streams):
        mine = merged.owner == index
        targets = stream.route.targets(target)
        exempt = report.ttft_exempt(targets.ttft_ms)
        check = judge(t[mine], result.ttft_s[mine], result.tpot_s[mine], result.e2e_s[mine], targets,
                      warmup_s=merged.warmup_s, ttft_exempt=None if exempt is None else exempt[mine])
        name = stream.route.name
        if name not in out or _worse(check, out[name]):
            out[name] = check
    return _Simulated(out, _hit_rate(result, merged.prefixed))


def _hit_rate(result: SimResult, prefixed: np.ndarray) -> float:
    """Cached over prompt tokens of the served requests with prefix structure (NaN: none)."""
    if result.cached_tokens is None:
        return math.nan
    served = np.isfinite(result.e2e_s) & prefixed
    prompts = float(np.sum(result.input_len[served]))
    return float(np.sum(result.cached_tokens[served])) / prompts if prompts else math.nan


def _worse(a: SloCheck, b: SloCheck) -> bool:
    return (a.ok, a.attainment) < (b.ok, b.attainment)


def smallest_fleet(curve: CurveLike, streams: Sequence[Stream], start: int, target: float,
                   seed: int = 0, router: str = DEFAULT_ROUTER) -> tuple[int | None, dict[str, float]]:
    """The fewest replicas >= start behind `router` at which every route holds its SLO by the one verdict (None if
    none up to SEARCH_CEILING_FACTOR x start), and each route's attainment there (or at the largest fleet tried)."""
    start = max(1, int(start))
    seen: dict[int, dict[str, SloCheck]] = {}

    def meets(r: int) -> bool:
        if r < start:
            return False
        if r not in seen:
            seen[r] = checks(curve, streams, r, seed, target, router)
        return all(c.ok for c in seen[r].values())

    best = bisect_replicas(meets, start, SEARCH_CEILING_FACTOR * start)
    return best, {name: c.attainment for name, c in seen[best if best is not None else max(seen)].items()}


def _service_s(curve: CurveLike, route: Route) -> float:
    """One request's end-to-end seconds on a full replica (the horizon unit), as the route-by-route check."""
    try:
        return service_time_s(curve, route.input_len, route.output_len)
    except InputError as err:
        raise InputError(f"route {route.name!r}: {err}") from None


@dataclass(frozen=True, eq=False)
class _Merged:
    """The simulated subset's requests of every stream, merged and sorted: the requests (blocks: each route's
    prefix structure in its own id range, None when no stream has any), the stream each came from, whether its
    stream carries prefix structure, the warm-up seconds and the replicas simulated."""

    requests: Requests
    owner: np.ndarray
    prefixed: np.ndarray
    warmup_s: float
    replicas: int


def _requests(curve: CurveLike, streams: Sequence[Stream], replicas: int, seed: int) -> _Merged:
    """Merged, sorted requests of every stream for the simulated subset."""
    service = max(_service_s(curve, s.route) for s in streams)
    warmup = SIM_WARMUP_SERVICE_TIMES * service
    k = min(replicas, SIM_MAX_REPLICAS)
    while True:
        keep = k / replicas
        slowest = min(s.route_rps * s.share * keep for s in streams)
        duration = max(SIM_SERVICE_TIMES * service, warmup + SIM_MIN_MEASURED / slowest,
                       *(_log_span_s(s) for s in streams))
        expected = sum(s.route_rps * s.share * keep for s in streams) * duration
        if k == 1 or expected <= SIM_MAX_REQUESTS:
            break
        k //= 2
    parts = [_stream_requests(s, keep, duration, seed + index) for index, s in enumerate(streams)]
    order = np.argsort(np.concatenate([p.arrival_s for p in parts]), kind="stable")
    t, inp, out = (np.concatenate([getattr(p, name) for p in parts])[order]
                   for name in ("arrival_s", "input_len", "output_len"))
    owner = np.concatenate([np.full(p.arrival_s.size, j) for j, p in enumerate(parts)])[order]
    prefixed = np.concatenate([np.full(p.arrival_s.size, p.blocks is not None) for p in parts])[order]
    blocks = _merged_blocks(streams, parts)
    merged = Requests(t, inp, out, "the deployment's streams", None if blocks is None else blocks.take(order))
    return _Merged(merged, owner, prefixed, warmup, k)


def _merged_blocks(streams: Sequence[Stream], parts: Sequence[Requests]) -> BlockIds | None:
    """The streams' block ids one after another, each route's moved into an id range of its own: two routes never
    share a block, and the streams of one route's log keep its ids (a route without a log: each stream its own
    range, conservative; a stream without prefix structure: every prompt its own blocks).  None when no stream
    has prefix structure."""
    if all(p.blocks is None for p in parts):
        return None
    own = [p.blocks if p.blocks is not None else BlockIds.shared(p.input_len, 0, ROUTE_BLOCK_SIZE) for p in parts]
    shifts: dict[Hashable, int] = {}
    base = 0
    for index, (stream, part) in enumerate(zip(streams, parts, strict=True)):
        key = _id_space(stream, part, index)
        if key not in shifts:
            low, high = _route_ids(stream.route) if isinstance(key, str) else own[index].id_range()
            shifts[key], base = base - low, base + high - low
    return BlockIds.joined([ids.shifted(shifts[_id_space(stream, part, index)])
                            for index, (stream, part, ids) in enumerate(zip(streams, parts, own, strict=True))],
                           ROUTE_BLOCK_SIZE)


def _id_space(stream: Stream, part: Requests, index: int) -> Hashable:
    """Whose block ids a stream's are: its route's log's (the route name), else its own (the stream index)."""
    return stream.route.name if part.blocks is not None and _log(stream.route) is not None else index


def _stream_requests(stream: Stream, keep: float, duration: float, seed: int) -> Requests:
    """The route's arrivals for `duration` s (a `keep` share of them), lengths drawn (or replayed from its log),
    only those in the bucket, with their prefix structure (route_load's: the log's block ids, or a declared
    shared prefix)."""
    gen = np.random.default_rng(seed + 1)
    logged = _log(stream.route)
    if logged is not None:
        times = logged.arrival_s * stream.route.peak_rps / stream.route_rps  # stretched in a quieter hour
        kept = gen.uniform(size=times.size) < keep
        inp, out = logged.input_len[kept], logged.output_len[kept]
        blocks = None if logged.blocks is None else logged.blocks.take(kept)
        times = times[kept]
    else:
        rate = stream.route_rps
        count = min(SIM_MAX_REQUESTS, int(duration * rate * keep * THINNING_MARGIN) + THINNING_SLACK)
        times = thinned_gamma(rate, stream.route.arrival_cv, keep, count, seed)
        times = times[times <= duration]
        inp = stream.route.input.sample(times.size, gen)
        out = stream.route.output.sample(times.size, gen)
        blocks = _declared_blocks(stream.route, inp)
    mine = stream.bucket.holds(inp, out)
    return Requests(times[mine], inp[mine], out[mine], stream.route.name,
                    None if blocks is None else blocks.take(mine))


def _declared_blocks(route: Route, input_len: np.ndarray) -> BlockIds | None:
    """A route without a log that declares shared_prefix_tokens: its prompts' blocks as route_load gives them."""
    if route.shared_prefix_tokens > 0:
        return BlockIds.shared(input_len, route.shared_prefix_tokens, ROUTE_BLOCK_SIZE)
    return None


def _route_ids(route: Route) -> tuple[int, int]:
    """The id range of the route's whole log's block ids (where its streams' ids fall)."""
    logged = _log(route)
    assert logged is not None and logged.blocks is not None
    key = (route.log, route.name, route.peak_to_mean)
    if key not in _ID_RANGES:
        _ID_RANGES[key] = logged.blocks.id_range()
    return _ID_RANGES[key]


_LOGS: dict[tuple[str, str, float], Requests | None] = {}
_ID_RANGES: dict[tuple[str, str, float], tuple[int, int]] = {}
# Route loads from logs kept at once: each holds a log's rows (the app keeps the process for every session).
LOG_MEMO_SIZE = 32


def _log(route: Route) -> Requests | None:
    """The route's one load when it has a request log (route_load: its own rows of the log, with their prefix
    structure), read once per log, route and peak; None without one."""
    if not route.log:
        return None
    key = (route.log, route.name, route.peak_to_mean)
    if key not in _LOGS:
        if len(_LOGS) >= LOG_MEMO_SIZE:
            _LOGS.clear()
            _ID_RANGES.clear()
        found, blocks = route_log_load(route) if route.traffic == "online" else (route_log_requests(route), None)
        _LOGS[key] = None if found is None or len(found[0]) < 2 else route_load(route, found, blocks)
    return _LOGS[key]


def _log_span_s(stream: Stream) -> float:
    """How long the stream's replayed log lasts at its rate (0 without a log)."""
    logged = _log(stream.route)
    return 0.0 if logged is None else float(logged.arrival_s[-1]) * stream.route.peak_rps / stream.route_rps
