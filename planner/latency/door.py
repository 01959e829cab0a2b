"""The one answer to "what latency will this replica see under this load": `predict(curve, load, lengths)`.

A load is one of
- `OpenLoop(rate_rps, arrival_cv)`: gamma arrivals (Poisson at CV 1) at a replica's share of a route's rate;
- `Replay(arrival_s, input_len, output_len)`: given requests (a request log, `Replay.of_log` stretched to a rate);
- `Closed(concurrency)`: a fixed number of requests in flight (benchmark clients), steady state;
- `Fleet(requests, replicas, router)`: a whole fleet behind its router serving a route's one load
  (planner.traffic.workload.route_requests): the tier that sizes online routes and is judged per SLO window
  (`LatencyReport.check`, fleetfacts.slo);
- `Job(input_len, output_len, replicas, total_requests)`: a batch job, every request submitted at once and split
  round robin: the report's `makespan_s` (when its last request ends) sizes batch routes.

Open-loop and replayed loads run the event simulation (planner.latency.simulate: chunked prefill, KV admission, the
fitted server front end) on one replica and report percentiles of the simulated requests; the tier says which
(`simulated`, `replayed log`).  A closed loop is answered by the curve's analytic steady state (`analytic`):
means, not percentiles, so its percentile fields hold the mean.  Every figure has a 90% interval: the spread
over seeds (open loop) and the curve's and front end's fit error.

`predict`, `plan`, `fleet`, `simulate`'s sizing, the app and `measure verify` (through the plan's columns) all
report what this returns; sizing asks it whether a replica count meets a route's SLOs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetfacts.errors import InputError
from fleetfacts.slo import SloCheck, Targets, judge
from planner.engine.curves import CurveLike
from planner.latency.analytic import TIER_ANALYTIC, Steady, analytic
from planner.latency.idle import idle_ttft_infeasible
from planner.latency.simulate import HostTier, SimResult, simulate
from planner.traffic.prefixes import BlockIds
from planner.traffic.routes import LengthDistribution, Route
from planner.traffic.workload import SIM_MAX_REPLICAS, Numbers, Requests, gamma, thin_requests

METRICS = ("ttft", "tpot", "itl", "e2e")
PERCENTILES = (50, 90, 95, 99)
# Open-loop predictions simulate this many requests per seed, over this many seeds (common random numbers:
# seed k is the same draw for every rate, so latency against load is smooth and a search over it monotone).
PREDICT_REQUESTS = 2000
PREDICT_SEEDS = 3
# z for the two-sided 90% interval given with each prediction.
Z90 = 1.645
TIER_SIMULATED, TIER_REPLAYED = "simulated", "replayed log"
TIER_FLEET = "fleet simulated"
TIER_JOB = "simulated job"
# The load balancers a fleet can be planned behind, and the simulator's name for each (prefix-affinity: to the
# replica caching the longest prefix of the request, unless it is much busier; planner.latency.simulate).
ROUTERS = {"least-outstanding": "jsq", "round-robin": "round-robin", "prefix-affinity": "prefix-affinity"}
DEFAULT_ROUTER = "least-outstanding"


# ---------------------------------------------------------------- loads and lengths

@dataclass(frozen=True)
class OpenLoop:
    """Requests arriving at rate_rps (requests/s) with gamma gaps of coefficient of variation arrival_cv."""

    rate_rps: float
    arrival_cv: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_rps) and self.rate_rps > 0):
            raise InputError(f"request rate: expected a number > 0, got {self.rate_rps!r}")
        if not (math.isfinite(self.arrival_cv) and self.arrival_cv >= 0):
            raise InputError(f"arrival CV: expected a number >= 0, got {self.arrival_cv!r}")

    def describe(self) -> str:
        return f"open loop {self.rate_rps:.4g} req/s, arrival CV {self.arrival_cv:.3g}"

    def share(self, replicas: int) -> OpenLoop:
        """What one of `replicas` replicas receives when a load balancer splits this stream at random: 1/replicas
        of the rate, and bursts split too (CV^2 = 1 + (CV^2 - 1) / replicas; Poisson stays Poisson).  A
        least-loaded balancer spreads bursts more evenly still, so this errs on the safe side."""
        cv2 = 1.0 + (self.arrival_cv**2 - 1.0) / replicas
        return OpenLoop(self.rate_rps / replicas, math.sqrt(max(cv2, 0.0)))


@dataclass(frozen=True, eq=False)
class Replay:
    """Given requests: sorted arrival times (s) and their prompt and output tokens; blocks: their prompts' block
    ids (prefix structure: the replica then keeps a prefix cache, and the report its hit rate)."""

    arrival_s: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    source: str = "replayed requests"
    blocks: BlockIds | None = None
    host: HostTier | None = None  # a host-memory KV tier behind each replica's prefix cache (with `blocks`)

    @classmethod
    def of_log(cls, arrival_s: np.ndarray, lengths: tuple[Numbers, Numbers], rate_rps: float,
               replicas: int = 1, source: str = "the route's log", blocks: BlockIds | None = None) -> Replay:
        """A log's requests with their times scaled so their mean rate is rate_rps (the whole route's), then
        one replica's share of `replicas`: every replicas-th request, as a round-robin balancer sends them
        (a burst is split between the replicas).  blocks: the log's prefix structure, if any."""
        t = np.asarray(arrival_s, dtype=float)
        t = t - t[0]
        own = (t.size - 1) / t[-1] if t.size > 1 and t[-1] > 0 else rate_rps
        inputs, outputs = (np.maximum(1, np.asarray(v, dtype=np.int64)) for v in lengths)
        pick = slice(None, None, max(1, int(replicas)))
        share = f", 1 of {replicas} replicas (round robin)" if replicas > 1 else ""
        return cls((t * own / rate_rps)[pick], inputs[pick], outputs[pick],
                   f"{source} at {rate_rps:.4g} req/s{share}", None if blocks is None else blocks.take(pick))

    def busiest(self, most: int) -> Replay:
        """At most `most` of the requests: all of them, or the `most` consecutive ones over the shortest span
        (the busiest stretch; the earliest on a tie), copied (a report that keeps them keeps no more)."""
        t = self.arrival_s
        if t.size <= most:
            return self
        start = int(np.argmin(t[most - 1:] - t[: t.size - most + 1]))
        pick = slice(start, start + most)
        return Replay(t[pick].copy(), self.input_len[pick].copy(), self.output_len[pick].copy(),
                      f"{self.source}, its busiest {most} requests")

    @property
    def rate_rps(self) -> float:
        t = self.arrival_s
        return (t.size - 1) / float(t[-1] - t[0]) if t.size > 1 and t[-1] > t[0] else math.nan

    def describe(self) -> str:
        return f"{self.source} ({len(self.arrival_s)} requests)"


@dataclass(frozen=True)
class Closed:
    """concurrency requests always in flight (a finished one is replaced at once), steady state."""

    concurrency: int

    def describe(self) -> str:
        return f"closed loop, {self.concurrency} in flight"


@dataclass(frozen=True, eq=False)
class Fleet:
    """`replicas` replicas behind `router` (least-outstanding or round-robin) serving `requests` together.

    A fleet of more than SIM_MAX_REPLICAS replicas is simulated as that many with their random share of the
    requests (each request kept with probability SIM_MAX_REPLICAS / replicas, fixed seed)."""

    requests: Requests
    replicas: int
    router: str = DEFAULT_ROUTER
    # An autoscaled fleet: per replica, when it takes arrivals (planner.latency.simulate.simulate's `active`);
    # simulated whole (no share), so at most SIM_MAX_REPLICAS replicas.
    active: tuple[tuple[float, float], ...] | None = None
    # The first `prefix` requests also start other loads predicted on this fleet: simulated once (a hint, the
    # report is the same; planner.latency.simulate.simulate's `prefix`).
    prefix: int = 0
    host: HostTier | None = None  # a host-memory KV tier behind each replica's prefix cache (with block ids)

    def __post_init__(self) -> None:
        if self.router not in ROUTERS:
            raise InputError(f"router: expected one of {', '.join(ROUTERS)}, got {self.router!r}")
        if int(self.replicas) != self.replicas or self.replicas < 1:
            raise InputError(f"replicas: expected a whole number >= 1, got {self.replicas!r}")
        if self.active is not None and not len(self.active) == self.replicas <= SIM_MAX_REPLICAS:
            raise InputError(f"an autoscaled fleet needs one (from, until) per replica and at most "
                             f"{SIM_MAX_REPLICAS} replicas, got {len(self.active)} for {self.replicas}")

    @property
    def simulated(self) -> int:
        return min(int(self.replicas), SIM_MAX_REPLICAS)

    def describe(self) -> str:
        subset = (f", {self.simulated} of them simulated with their share"
                  if self.simulated < self.replicas else "")
        if self.active is not None:
            always = sum(1 for start, until in self.active if start <= 0 and until == math.inf)
            return (f"{always} to {self.replicas} replicas, autoscaled ({self.router}) serving "
                    f"{self.requests.source}")
        return f"{self.replicas} replicas ({self.router}{subset}) serving {self.requests.source}"


@dataclass(frozen=True, eq=False)
class Job:
    """A batch job: total_requests requests (default: as many as given) submitted at t = 0 to `replicas` replicas,
    round robin; input_len / output_len are its requests, or a sample of them when total_requests is larger.

    Round-robin replicas are independent, so a fleet over SIM_MAX_REPLICAS is simulated as that many replicas with
    their exact share of the requests; when even that share exceeds the sample, the makespan is scaled by
    share / sample (throughput-bound: conservative when the sample is under a wave).  Memory stays bounded for any
    job and fleet."""

    input_len: np.ndarray
    output_len: np.ndarray
    replicas: int
    total_requests: int | None = None

    def describe(self) -> str:
        total = len(self.input_len) if self.total_requests is None else self.total_requests
        return f"a batch job of {total} requests on {self.replicas} replicas (round robin)"


Load = OpenLoop | Replay | Closed | Fleet | Job


@dataclass(frozen=True)
class Lengths:
    """Prompt and output tokens of the requests: drawn from distributions (a route's), or fixed."""

    input: LengthDistribution
    output: LengthDistribution

    @classmethod
    def fixed(cls, input_len: float, output_len: float) -> Lengths:
        return cls(LengthDistribution(float(input_len)), LengthDistribution(float(output_len)))

    @classmethod
    def of_route(cls, route: Route) -> Lengths:
        return cls(route.input, route.output)

    def draw(self, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        gen = np.random.default_rng(seed)
        return self.input.sample(n, gen), self.output.sample(n, gen)


# ---------------------------------------------------------------- the report

@dataclass(frozen=True)
class LatencyReport:
    """Percentiles (ms) of TTFT, TPOT, ITL and e2e with 90% intervals, throughput, and where they come from.

    metrics / low / high: keyed like `ttft_p95_ms`.  tier: simulated, replayed log or analytic.  basis: what
    the latency rests on (the curve's latency_basis: measured, transferred, unverified).  in_flight_p99:
    requests in flight at the 99th percentile of arrivals (simulated tiers; the analytic tier's concurrency).
    prefix_hit_rate: prompt tokens found in the replicas' prefix caches over all prompt tokens (a replayed load
    with prefix structure; else NaN).
    """

    load: str
    rate_rps: float
    tier: str
    basis: str
    output_tok_per_s: float
    metrics: dict[str, float]
    low: dict[str, float]
    high: dict[str, float]
    in_flight_p99: float = math.nan
    results: tuple[SimResult, ...] = field(default=(), compare=False, repr=False)
    makespan_s: float = math.nan  # a Job: seconds until its last request ends
    prefix_hit_rate: float = math.nan
    # The curve the requests ran on: which of them no replica brings within a TTFT target (planner.latency.idle).
    curve: CurveLike | None = field(default=None, compare=False, repr=False)

    def value(self, metric: str, pct: float) -> float:
        """The metric (ttft, tpot, itl, e2e) at percentile pct, ms: a reported one, else from the requests."""
        return self._at(self.metrics, metric, pct)

    def interval(self, metric: str, pct: float) -> tuple[float, float]:
        """(low, high) of value(metric, pct): the reported interval's relative width around it."""
        value = self.value(metric, pct)
        low, high, mid = (self._at(d, metric, pct, exact=True) for d in (self.low, self.high, self.metrics))
        if math.isnan(low) or not (mid and math.isfinite(mid)):
            nearest = min(PERCENTILES, key=lambda p: abs(p - pct))
            low, high, mid = (d[f"{metric}_p{nearest}_ms"] for d in (self.low, self.high, self.metrics))
        if not (mid and math.isfinite(mid) and math.isfinite(value)):
            return value, value
        return value * low / mid, value * high / mid

    def _at(self, table: dict[str, float], metric: str, pct: float, exact: bool = False) -> float:
        key = f"{metric}_p{pct:g}_ms"
        if key in table:
            return table[key]
        if exact or not self.results:
            return math.nan
        column = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "tpot_s", "e2e": "e2e_s"}[metric]
        return pct_ms(np.concatenate([getattr(r, column) for r in self.results]), pct)

    def meets(self, route: Route) -> bool:
        """Every SLO of the route at its percentile."""
        return not self.misses(route)

    def misses(self, route: Route) -> list[tuple[float, str]]:
        """(predicted / target - 1, description) of each SLO missed at the route's percentile.  TPOT is judged
        only where a request has a second token: requests of 0 or 1 output tokens have none (fleetfacts.slo)."""
        pct, out = route.slo_percentile, []
        tpot_target = route.slo.tpot_ms if self.has_tpot else None
        for metric, name, target in (("ttft", "TTFT", route.slo.ttft_ms), ("tpot", "TPOT", tpot_target),
                                     ("e2e", "end-to-end latency", route.slo.e2e_ms)):
            predicted = self._judged_ttft_ms(pct, target) if metric == "ttft" else self.value(metric, pct)
            if predicted is None:
                continue  # every request exempt from the TTFT target (planner.latency.idle)
            if target is not None and not predicted <= target:
                ratio = predicted / target - 1.0 if math.isfinite(predicted) else math.inf
                out.append((ratio, f"p{pct:g} {name} {_ms(predicted)} ms > SLO {target:g} ms at {self.load}"))
        return out

    @property
    def has_tpot(self) -> bool:
        """Whether any simulated request has a second token (a TPOT); True for a report of no requests (the
        analytic tier predicts TPOT at its lengths)."""
        return not self.results or any(bool(np.any(r.output_len > 1)) for r in self.results)

    def _judged_ttft_ms(self, pct: float, target: float | None) -> float | None:
        """TTFT at percentile pct (ms) of the requests judged on TTFT against `target`: all of them, or those
        an idle replica brings within it (planner.latency.idle); None when there are none such."""
        exempt = self.ttft_exempt(target)
        if exempt is None:
            return self.value("ttft", pct)
        if exempt.all():
            return None
        return pct_ms(np.concatenate([r.ttft_s for r in self.results])[~exempt], pct)

    def ttft_exempt(self, ttft_ms: float | None) -> np.ndarray | None:
        """Per simulated request (the results in order): True where its prompt cannot meet `ttft_ms` even alone
        on an idle replica of the report's curve (planner.latency.idle); None when no request is so (or there is
        no target, no curve or no request)."""
        if ttft_ms is None or self.curve is None or not self.results:
            return None
        exempt = idle_ttft_infeasible(self.curve, np.concatenate([r.input_len for r in self.results]), ttft_ms)
        return exempt if exempt.any() else None

    def check(self, targets: Targets) -> SloCheck:
        """The one SLO verdict (fleetfacts.slo) on the simulated requests (every window, attainment); requests no
        replica brings within the TTFT target are judged on the other targets only (`ttft_exempt`)."""
        if not self.results:
            raise InputError(f"{self.load}: an {self.tier} report has no requests to judge per window")
        t, ttft, tpot, e2e = (np.concatenate([getattr(r, name) for r in self.results])
                              for name in ("arrival_s", "ttft_s", "tpot_s", "e2e_s"))
        return judge(t, ttft, tpot, e2e, targets, ttft_exempt=self.ttft_exempt(targets.ttft_ms))

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"load": self.load, "request_rate": self.rate_rps, "tier": self.tier,
                                  "latency_basis": self.basis, "output_tok_per_s": self.output_tok_per_s}
        for name, value in self.metrics.items():
            record[name] = value
            record[f"{name}_low"] = self.low[name]
            record[f"{name}_high"] = self.high[name]
        if not math.isnan(self.prefix_hit_rate):
            record["prefix_hit_rate"] = self.prefix_hit_rate
        return record


def _ms(value: float) -> str:
    if not math.isfinite(value):
        return "unbounded"
    return f"{value:.1f}" if abs(value) < 10 else f"{value:.0f}"


# ---------------------------------------------------------------- the door

def predict(curve: CurveLike, load: Load, lengths: Lengths | None = None, percentiles: Sequence[float] = PERCENTILES,
            requests: int = PREDICT_REQUESTS, seeds: int = PREDICT_SEEDS) -> LatencyReport:
    """Latency of one replica of `curve` under `load` (see the module doc).

    lengths: required for OpenLoop and Closed (Closed uses their means); a Replay carries its own.
    """
    if isinstance(load, Replay):
        return _replayed(curve, load, percentiles)
    if isinstance(load, Fleet):
        return _fleet(curve, load, percentiles)
    if isinstance(load, Job):
        return _job(curve, load, percentiles)
    if lengths is None:
        raise InputError(f"{load.describe()}: lengths are needed")
    if isinstance(load, Closed):
        return _closed(curve, load, lengths)
    return _open_loop(curve, load, lengths, percentiles, requests, seeds)


def _open_loop(curve: CurveLike, load: OpenLoop, lengths: Lengths, percentiles: Sequence[float], requests: int,
               seeds: int) -> LatencyReport:
    runs = []
    for seed in range(seeds):
        inputs, outputs = lengths.draw(requests, seed)
        runs.append(simulate(curve, gamma(load.rate_rps, load.arrival_cv, requests, seed), inputs, outputs))
    per_seed = [_percentiles(r, percentiles) for r in runs]
    metrics = {k: float(np.mean([m[k] for m in per_seed])) for k in per_seed[0]}
    low, high = _intervals(curve, metrics, per_seed)
    tok_s = float(np.mean([float(np.sum(r.output_len)) / r.makespan_s for r in runs]))
    in_flight = float(np.mean([_in_flight_p99(r) for r in runs]))
    return LatencyReport(load.describe(), load.rate_rps, TIER_SIMULATED, latency_basis(curve), tok_s, metrics, low, high,
                         in_flight, tuple(runs), curve=curve)


def _replayed(curve: CurveLike, load: Replay, percentiles: Sequence[float]) -> LatencyReport:
    result = simulate(curve, load.arrival_s, load.input_len, load.output_len, blocks=load.blocks, host=load.host)
    metrics = _percentiles(result, percentiles)
    low, high = _intervals(curve, metrics, [metrics])
    tok_s = float(np.sum(result.output_len)) / result.makespan_s
    return LatencyReport(load.describe(), load.rate_rps, TIER_REPLAYED, latency_basis(curve), tok_s, metrics, low, high,
                         _in_flight_p99(result), (result,), prefix_hit_rate=result.prefix_hit_rate, curve=curve)


def _fleet(curve: CurveLike, load: Fleet, percentiles: Sequence[float]) -> LatencyReport:
    k = load.simulated
    requests = thin_requests(load.requests, k / load.replicas, seed=0)
    result = simulate(curve, requests.arrival_s, requests.input_len, requests.output_len, k, ROUTERS[load.router],
                      active=load.active, prefix=load.prefix if k == load.replicas else 0, blocks=requests.blocks,
                      host=load.host)
    metrics = _percentiles(result, percentiles)
    low, high = _intervals(curve, metrics, [metrics])
    tok_s = float(np.sum(result.output_len)) / result.makespan_s / k if result.makespan_s > 0 else math.nan
    in_flight = max((_in_flight_p99(result, result.replica == r) for r in range(k)), default=math.nan)
    rate = Replay(load.requests.arrival_s, load.requests.input_len, load.requests.output_len).rate_rps
    return LatencyReport(load.describe(), rate, TIER_FLEET, latency_basis(curve), tok_s, metrics, low, high,
                         in_flight, (result,), prefix_hit_rate=result.prefix_hit_rate, curve=curve)


def _job(curve: CurveLike, load: Job, percentiles: Sequence[float]) -> LatencyReport:
    inp, out = np.asarray(load.input_len), np.asarray(load.output_len)
    total = len(inp) if load.total_requests is None else int(load.total_requests)
    simulated = min(int(load.replicas), SIM_MAX_REPLICAS)
    share = total * simulated / load.replicas
    n = max(1, min(len(inp), math.ceil(share)))
    result = simulate(curve, np.zeros(n), inp[:n], out[:n], simulated, ROUTERS["round-robin"])
    makespan = result.makespan_s * max(1.0, share / n)
    metrics = _percentiles(result, percentiles)
    low, high = _intervals(curve, metrics, [metrics])
    tok_s = float(np.sum(result.output_len)) / result.makespan_s / simulated if result.makespan_s > 0 else math.nan
    return LatencyReport(load.describe(), math.nan, TIER_JOB, latency_basis(curve), tok_s, metrics, low, high,
                         math.nan, (result,), makespan, curve=curve)


def _closed(curve: CurveLike, load: Closed, lengths: Lengths) -> LatencyReport:
    pred = analytic(curve, Steady(lengths.input.mean, lengths.output.mean, load.concurrency)).prediction
    means = {"ttft": pred.ttft_ms, "tpot": pred.tpot_ms, "itl": pred.tpot_ms, "e2e": pred.e2e_ms}
    metrics = {f"{m}_p{p:g}_ms": float(v) for m, v in means.items() for p in PERCENTILES}  # the mean at each
    ratio = pred.low / pred.output_tok_per_s if pred.output_tok_per_s > 0 else 1.0
    low = {k: v * ratio for k, v in metrics.items()}
    high = {k: v / ratio if ratio > 0 else math.inf for k, v in metrics.items()}
    rate = load.concurrency / (pred.e2e_ms / 1000) if pred.e2e_ms > 0 else math.nan
    return LatencyReport(load.describe() + " (means)", rate, TIER_ANALYTIC, latency_basis(curve), pred.output_tok_per_s,
                         metrics, low, high, float(load.concurrency))


# ---------------------------------------------------------------- helpers

def latency_basis(curve: CurveLike) -> str:
    """What a curve's latency rests on: measured, transferred (a borrowed front end) or unverified."""
    basis = getattr(curve, "latency_basis", None)
    return basis if isinstance(basis, str) else ("measured" if curve.has_latency else "unverified")


def pct_ms(values_s: np.ndarray, pct: float) -> float:
    """Percentile in ms of the served requests (NaN: none served); inf when the tail is unbounded (saturated)."""
    return pcts_ms(values_s, (pct,))[0]


def pcts_ms(values_s: np.ndarray, pcts: Sequence[float]) -> tuple[float, ...]:
    """pct_ms at several percentiles, with one sort of the values."""
    served = values_s[~np.isnan(values_s)]
    if not served.size:
        return tuple(math.nan for _ in pcts)
    with np.errstate(invalid="ignore"):  # inf - inf while interpolating a saturated tail
        values = np.percentile(served, list(pcts)) * 1000
    return tuple(math.inf if math.isnan(v) else float(v) for v in values)


def _percentiles(result: SimResult, percentiles: Sequence[float]) -> dict[str, float]:
    """ITL equals TPOT here: the simulator emits one token per iteration (no streaming chunks).  One sort per
    metric for all the percentiles."""
    by_metric = {"ttft": pcts_ms(result.ttft_s, percentiles), "tpot": pcts_ms(result.tpot_s, percentiles),
                 "e2e": pcts_ms(result.e2e_s, percentiles)}
    by_metric["itl"] = by_metric["tpot"]
    return {f"{m}_p{p:g}_ms": by_metric[m][k] for m in METRICS for k, p in enumerate(percentiles)}


def _intervals(curve: CurveLike, metrics: dict[str, float], per_seed: list[dict[str, float]]
               ) -> tuple[dict[str, float], dict[str, float]]:
    """90% intervals: the spread over seeds and the fit's relative error, on a log scale."""
    low, high = {}, {}
    for name, value in metrics.items():
        finite = bool(value) and math.isfinite(value)
        spread = float(np.std([m.get(name, value) for m in per_seed])) / value if finite else 0.0
        sd = math.hypot(relative_error(curve, name), spread)
        low[name], high[name] = value * math.exp(-Z90 * sd), value * math.exp(Z90 * sd)
    return low, high


def relative_error(curve: CurveLike, metric: str) -> float:
    """1-sigma relative error of a metric: the curve's residual scale, and the front end's fit for TTFT/e2e."""
    front_end = getattr(curve, "front_end", None)
    front = front_end.rel_error if front_end is not None and not metric.startswith(("tpot", "itl")) else 0.0
    fit = getattr(curve, "fit", None)
    return max(front, float(fit.sigma) if fit is not None else 0.0)


def _in_flight_p99(result: SimResult, mine: np.ndarray | None = None) -> float:
    """Requests in flight just after each arrival, 99th percentile (what a replica's batch must hold); `mine`:
    only these requests (one replica's)."""
    pick = slice(None) if mine is None else mine
    t = np.asarray(result.arrival_s, dtype=float)[pick]
    if not t.size:
        return math.nan
    end = t + np.nan_to_num(result.e2e_s[pick], nan=np.inf)
    order = np.argsort(t, kind="stable")
    t, end = t[order], end[order]
    started = np.arange(1, t.size + 1)
    finished = np.searchsorted(np.sort(end), t, side="right")
    return float(np.percentile(started - finished, 99))
