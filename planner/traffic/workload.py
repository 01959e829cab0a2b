"""The workload a fleet serves: arrival times, and the requests (arrivals + token lengths) a simulation runs.

Requests: `synthetic_requests(route)` (arrivals at the route's peak rate with
its burstiness, lengths drawn from its LengthDistributions), or replayed from a
request log: `replay_requests(log, routes)` per route name, and
`route_log_requests(route)` for a route's own `log` column (only its rows of a log of several routes).

Seeded generators of request arrival times (seconds from the first arrival's clock start):

- `poisson(rate, n)`: exponential gaps, CV 1.
- `gamma(rate, cv, n)`: a renewal process with gamma gaps of the given CV
  (shape 1/cv^2; cv > 1 is bursty, cv < 1 more regular, cv = 0 evenly spaced).
- `diurnal(rate, multipliers, duration_s)`: a non-homogeneous Poisson process
  whose rate in hour h of the day is rate * multipliers[h], drawn by thinning
  (Lewis & Shedler): candidates at the peak rate, each kept with probability
  rate(t) / peak rate.
- `replay(times)`: recorded arrival times, sorted and shifted to start at 0.

Every generator takes a `seed` (or a numpy Generator) so runs are repeatable,
and returns a sorted float64 numpy array.  Bad arguments raise InputError.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fleetfacts.errors import InputError
from fleetfacts.slo import occupied_windows
from planner.traffic.logs import DEFAULT_BLOCK_SIZE, TrafficLog, log_blocks, read_log
from planner.traffic.prefixes import BlockIds
from planner.traffic.routes import Route

HOURS_PER_DAY = 24
SECONDS_PER_HOUR = 3600.0
# Route names of a log shown when a route is not among them (a gateway's log may hold thousands).
MAX_ROUTES_SHOWN = 10
# Below this CV the gamma shape would exceed ~1e12: the gaps are treated as exactly regular.
MIN_GAMMA_CV = 1e-6

Seed = int | np.random.Generator | None
# Arrival times or token counts: a sequence or a 1-D numpy array.
Numbers = Sequence[float] | np.ndarray


def rng(seed: Seed) -> np.random.Generator:
    """A numpy Generator from a seed (or the Generator itself)."""
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _check_rate(rate_rps: float) -> float:
    if not (isinstance(rate_rps, (int, float)) and math.isfinite(rate_rps) and rate_rps > 0):
        raise InputError(f"arrival rate: expected a number of requests/s > 0, got {rate_rps!r}")
    return float(rate_rps)


def _check_count(n: int) -> int:
    if int(n) != n or n < 0:
        raise InputError(f"number of arrivals: expected a whole number >= 0, got {n!r}")
    return int(n)


def poisson(rate_rps: float, n: int, seed: Seed = 0) -> np.ndarray:
    """`n` arrival times of a Poisson process of `rate_rps` requests/s; the first gap starts at 0."""
    return gamma(rate_rps, 1.0, n, seed)


def gamma(rate_rps: float, cv: float, n: int, seed: Seed = 0) -> np.ndarray:
    """`n` arrival times of a renewal process whose gaps are gamma with mean 1/rate and CV `cv`."""
    rate = _check_rate(rate_rps)
    n = _check_count(n)
    if not (math.isfinite(cv) and cv >= 0):
        raise InputError(f"arrival CV: expected a number >= 0, got {cv!r}")
    if cv < MIN_GAMMA_CV:
        gaps = np.full(n, 1.0 / rate)
    else:
        shape = 1.0 / cv**2
        gaps = rng(seed).gamma(shape, 1.0 / (rate * shape), size=n)
    return np.cumsum(gaps)


def _check_multipliers(multipliers: Sequence[float]) -> np.ndarray:
    m = np.asarray(multipliers, dtype=float)
    if m.shape != (HOURS_PER_DAY,) or not np.all(np.isfinite(m)) or np.any(m < 0) or not np.any(m > 0):
        raise InputError(f"diurnal multipliers: expected {HOURS_PER_DAY} finite numbers >= 0, not all zero; "
                         f"got shape {m.shape}")
    return m


def diurnal(rate_rps: float, multipliers: Sequence[float], duration_s: float, seed: Seed = 0,
            start_hour: float = 0.0) -> np.ndarray:
    """Arrivals over `duration_s` seconds at rate_rps * multipliers[hour of day] (thinning).

    multipliers: 24 numbers (hour 0..23), used as given (planner.traffic.logs
    derives them normalised to mean 1, so rate_rps is then the daily mean).
    start_hour: hour of day at t = 0 (may be fractional).
    """
    rate = _check_rate(rate_rps)
    m = _check_multipliers(multipliers)
    if not (math.isfinite(duration_s) and duration_s > 0):
        raise InputError(f"duration: expected seconds > 0, got {duration_s!r}")
    peak = rate * float(m.max())
    gen = rng(seed)
    # Draw the candidate count first, then uniform positions: same law as cumulative exponential gaps.
    count = gen.poisson(peak * duration_s)
    candidates = np.sort(gen.uniform(0.0, duration_s, size=count))
    hours = ((candidates / SECONDS_PER_HOUR + start_hour) % HOURS_PER_DAY).astype(int)
    keep = gen.uniform(0.0, 1.0, size=count) < m[hours] / m.max()
    return candidates[keep]


def replay(times: Sequence[float]) -> np.ndarray:
    """Recorded arrival times (seconds), sorted and shifted so the first is at 0."""
    t = np.sort(np.asarray(times, dtype=float))
    if t.size and not np.all(np.isfinite(t)):
        raise InputError("replayed arrival times must be finite numbers of seconds")
    return t - t[0] if t.size else t


def for_route(rate_rps: float, arrival_cv: float, n: int, seed: Seed = 0) -> np.ndarray:
    """Synthetic arrivals for a route: Poisson when its CV is 1, else gamma with its CV."""
    if math.isclose(arrival_cv, 1.0):
        return poisson(rate_rps, n, seed)
    return gamma(rate_rps, arrival_cv, n, seed)


def rate_and_cv(times: np.ndarray) -> tuple[float, float]:
    """(mean rate = (n-1)/span, CV of the gaps) of sorted arrival times; needs >= 3 distinct times."""
    gaps = np.diff(np.asarray(times, dtype=float))
    if gaps.size < 2 or gaps.sum() <= 0:
        raise InputError(f"need at least 3 arrivals spread over time to estimate a rate and CV, got {gaps.size + 1}")
    return gaps.size / float(gaps.sum()), float(gaps.std() / gaps.mean())


# ---------------------------------------------------------------- requests

# Synthetic requests of a fixed-count simulation (planner.planning.plan_check, tests): p99 rests on ~100 requests.
DEFAULT_SIM_REQUESTS = 10_000

# The fleet check (planner.planning.fleet_check) simulates a horizon, not a request count:
# Horizon: this many service times (one request's end-to-end time at the operating point): a fleet
# over capacity builds a queue that grows every service time, so it fails well inside the horizon.
SIM_SERVICE_TIMES = 30.0
# Requests arriving in the first service times find an empty fleet (optimistic): not measured.
SIM_WARMUP_SERVICE_TIMES = 5.0
# At least this many measured requests (p99 on ~100 requests): a low-rate route simulates longer.
SIM_MIN_MEASURED = DEFAULT_SIM_REQUESTS
# A larger fleet is represented by this many replicas fed their share of the traffic (join-shortest-queue
# pooling over 16 replicas of tens of slots each is close to its limit; fewer would be conservative).
SIM_MAX_REPLICAS = 16
# Requests per simulation at most (~1 s each with the affine step model): the subset shrinks to fit.
SIM_MAX_REQUESTS = 200_000
# Requests sampled for a batch job's simulation at most: ~1,250 per simulated replica, several waves of
# a full batch; a larger job's makespan is scaled from it (the latency door's Job: planner.latency.door.Job).
SIM_BATCH_SAMPLE = 20_000


@dataclass(frozen=True, eq=False)
class Requests:
    """Arrival times (s, sorted) and token lengths of the requests a check simulates, and where they came from."""

    arrival_s: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    source: str
    # The prompts' block ids (a log with prefix structure): the simulation then keeps a prefix cache per replica.
    blocks: BlockIds | None = None


def synthetic_requests(route: Route, n: int = DEFAULT_SIM_REQUESTS, seed: int = 0,
                       arrival_s: np.ndarray | None = None,
                       lengths: tuple[Numbers, Numbers] | None = None) -> Requests:
    """Requests for a route: given arrivals / lengths, else synthetic ones.

    Synthetic arrivals: the route's peak rate (rate_rps x peak_to_mean, as the
    the sizing uses) with gamma gaps of its arrival_cv (Poisson at 1).
    Synthetic lengths: drawn from the route's LengthDistributions.
    Given lengths are resampled (bootstrap) to the number of arrivals when the counts differ.
    """
    gen = np.random.default_rng(seed)
    parts = []
    if arrival_s is None:
        rate, cv = route.peak_rps, route.arrival_cv
        arrival_s = for_route(rate, cv, n, gen)
        parts.append(f"synthetic arrivals ({rate:.4g} req/s peak, CV {cv:.3g})")
    else:
        parts.append("replayed arrivals")
    count = len(arrival_s)
    if lengths is None:
        inp = route.input.sample(count, gen)
        out = route.output.sample(count, gen)
        parts.append("lengths sampled from the route's quantiles")
    else:
        inp, out = (np.maximum(1, np.asarray(v, dtype=np.int64)) for v in lengths)
        if len(inp) != count:
            pick = gen.integers(0, len(inp), size=count)
            inp, out = inp[pick], out[pick]
            parts.append("lengths resampled from the given ones")
        else:
            parts.append("given lengths")
    return Requests(np.asarray(arrival_s, dtype=float), inp, out, ", ".join(parts))


def route_log(route: Route, block_size: int | None = None) -> TrafficLog | None:
    """The route's own request log (`log`), None without one: a log of one route (or without a route column)
    whole, a log of several routes only the route's rows (own_rows; times still from the log's first arrival).
    block_size: read its prefix structure in blocks of that many tokens (None: ignore it; read_log).

    Raises InputError when the log cannot be read or holds no rows of the route."""
    if not route.log:
        return None
    traffic = read_log(route.log, route=route.name, block_size=block_size)
    return dataclasses.replace(traffic, requests=own_rows(traffic.requests, route.name, traffic.source))


def own_rows(requests: pd.DataFrame, name: str, source: str) -> pd.DataFrame:
    """The rows of route `name` in a log's requests: all of them when the log holds one route; else those whose
    route is `name`, or failing that the one route that is `name` ignoring case (`Chat` replays `chat`).

    Raises InputError naming the log's routes when none, or two spellings, match: a route is never sized on
    another route's traffic."""
    routes = sorted(set(requests["route"]))
    if len(routes) == 1:
        return requests
    matches = [name] if name in routes else [r for r in routes if r.casefold() == name.casefold()]
    if len(matches) == 1:
        return requests[requests["route"] == matches[0]]
    if matches:
        raise InputError(f"{source}: route {name!r} matches {', '.join(matches)} of this log ignoring case; "
                         "name the route exactly as the log does")
    shown = ", ".join(routes[:MAX_ROUTES_SHOWN]) + (f", ... {len(routes) - MAX_ROUTES_SHOWN} more"
                                                   if len(routes) > MAX_ROUTES_SHOWN else "")
    raise InputError(f"{source}: route {name!r} is not in this log of {len(routes)} routes ({shown}); name the "
                     "route as the log does (case aside), or give it a log of its own")


def route_log_requests(route: Route) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]] | None:
    """(arrival times, (input lengths, output lengths)) of the route's own request log (route_log), or None."""
    traffic = route_log(route)
    if traffic is None:
        return None
    return _log_requests(traffic)


def _log_requests(traffic: TrafficLog) -> LogRequests:
    requests = traffic.requests
    return (requests["t_s"].to_numpy(float),
            (requests["input_len"].to_numpy(), requests["output_len"].to_numpy()))


def replay_requests(path: str | Path, routes: pd.DataFrame, fmt: str | None = None, route: str | None = None
                    ) -> dict[str, Requests]:
    """Requests of a log, per route name of `routes`, for planner.latency.simulate (replay).

    A log without a route column feeds `route`, or the only online route.
    Raises InputError when a log route matches no route of `routes`.
    """
    online = [str(n) for n, t in zip(routes["name"], routes["traffic"], strict=True) if t == "online"]
    if route is None and len(online) == 1:
        route = online[0]
    traffic = read_log(path, fmt, route)
    out = {}
    for name, group in traffic.requests.groupby("route", sort=True):
        if str(name) not in set(routes["name"].astype(str)):
            raise InputError(f"{path}: log route {name!r} is not in the routes file (routes: {', '.join(online)}); "
                             f"name it with --route")
        t = group["t_s"].to_numpy(dtype=float)
        out[str(name)] = Requests(t - t[0], np.maximum(1, group["input_len"].to_numpy()),
                                  np.maximum(1, group["output_len"].to_numpy()),
                                  f"replayed {len(group)} requests from {Path(path).name}")
    return out


# ---------------------------------------------------------------- thinned arrivals (planner.planning.fleet_check)

# Arrivals drawn for a horizon: its expected count times this, plus a few (a Poisson count rarely
# exceeds its mean by 10% + 100); a short draw only ends the horizon a little early.
THINNING_MARGIN = 1.1
THINNING_SLACK = 100


def thinned_gamma(rate_rps: float, cv: float, keep: float, n: int, seed: Seed = 0) -> np.ndarray:
    """`n` arrival times of a random `keep` share of a gamma renewal process (rate, CV `cv`).

    Each kept gap sums a geometric number N of the process's gaps: gamma with
    shape N / cv^2 (regular gaps, cv ~ 0: N / rate).
    """
    rate = _check_rate(rate_rps)
    gen = rng(seed)
    counts = gen.geometric(keep, size=_check_count(n)) if keep < 1.0 else np.ones(n, dtype=np.int64)
    if cv < MIN_GAMMA_CV:
        return np.cumsum(counts / rate)
    shape = 1.0 / cv**2
    return np.cumsum(gen.gamma(counts * shape, 1.0 / (rate * shape)))


def thin_requests(requests: Requests, keep: float, seed: int = 0) -> Requests:
    """Each request kept with probability `keep` (a replayed log's share for a subset of replicas)."""
    if keep >= 1.0:
        return requests
    mask = np.random.default_rng(seed).uniform(size=requests.arrival_s.size) < keep
    t = requests.arrival_s[mask]
    blocks = None if requests.blocks is None else requests.blocks.take(mask)
    return Requests(t, requests.input_len[mask], requests.output_len[mask],
                    f"{requests.source}, thinned to {keep:.3g} of the requests", blocks)


# ---------------------------------------------------------------- the one load of a route

# A route without a log is planned on this long a stretch of its peak traffic (its busiest hour), at most
# LOAD_MAX_REQUESTS requests (a very busy route: a shorter stretch, which still holds many SLO windows).
LOAD_HORIZON_S = SECONDS_PER_HOUR
LOAD_MAX_REQUESTS = 40_000
LOAD_SEED = 0


# ---------------------------------------------------------------- the next hour: the load's windows drawn at random

# How many hours are drawn, and from which seed (issue 34, item 6: >= 200, fixed).
RESAMPLED_HOURS = 200
RESAMPLE_SEED = 0


def window_blocks(requests: Requests, window_s: float) -> tuple[np.ndarray, list[Requests]]:
    """The load cut into consecutive windows of `window_s` seconds counted from its first arrival, as
    fleetfacts.slo counts SLO windows: the indices of the windows holding requests, and their requests (each
    block's arrivals in seconds from its window's start).  Empty windows are left out and cost nothing (a year
    between two bursts is a few blocks, not half a million): a fleet only drains in them."""
    if not window_s > 0:
        raise InputError(f"window_s: expected a number of seconds > 0, got {window_s!r}")
    t = requests.arrival_s
    if not t.size:
        return np.zeros(0, dtype=np.int64), []
    origin = float(t[0])
    held, first, end, _ = occupied_windows(t, window_s, origin)
    starts = origin + window_s * held
    blocks = requests.blocks
    return held, [Requests(t[a:b] - starts[j], requests.input_len[a:b], requests.output_len[a:b],
                           f"{requests.source}, window {held[j]}", None if blocks is None else blocks.take(slice(a, b)))
                  for j, (a, b) in enumerate(zip(first, end, strict=True))]


def resampled_orders(blocks: int, hours: int = RESAMPLED_HOURS, seed: int = RESAMPLE_SEED) -> np.ndarray:
    """`hours` rows of `blocks` block indices drawn with replacement: each row is one hour as long as the load,
    made of its windows in random order (a block bootstrap with blocks one SLO window long)."""
    if blocks < 1 or hours < 1:
        raise InputError(f"resampling needs at least one block and one hour, got {blocks} and {hours}")
    return np.random.default_rng(seed).integers(0, blocks, size=(hours, blocks))


def joined_blocks(blocks: Sequence[Requests], window_s: float) -> Requests:
    """Blocks laid end to end, each `window_s` seconds after the one before: one load, with their prefix structure
    in the same order when every block has one (windows of one load: their ids are the load's)."""
    shift = [b.arrival_s + k * window_s for k, b in enumerate(blocks)]
    ids = [b.blocks for b in blocks if b.blocks is not None]
    prefixes = BlockIds.joined(ids, ids[0].block_size) if ids and len(ids) == len(blocks) else None
    return Requests(np.concatenate(shift) if shift else np.empty(0),
                    np.concatenate([b.input_len for b in blocks]) if blocks else np.empty(0, dtype=np.int64),
                    np.concatenate([b.output_len for b in blocks]) if blocks else np.empty(0, dtype=np.int64),
                    f"{len(blocks)} windows of {window_s:g} s laid end to end", prefixes)


LogRequests = tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]


def route_requests(route: Route, log: LogRequests | None = None, blocks: BlockIds | None = None) -> Requests:
    """The arrivals every path replays for an online route: sizing, the checks, `simulate`, `fleet`, the app.

    A route with a request log replays the log's own timestamps (its bursts are in them), its busiest hour
    `peak_to_mean` times as busy as the log (1: the log as recorded); `blocks`: the log's prefix structure (its
    requests' block ids, in the log's order), carried along.  A route without one: gamma arrivals at
    rate_rps x peak_to_mean with its arrival_cv over LOAD_HORIZON_S, lengths drawn from its quantiles, fixed seeds.
    """
    if log is not None:
        times, (inputs, outputs) = log
        t = np.asarray(times, dtype=float)
        order = np.argsort(t, kind="stable")
        t = (t[order] - t[order][0]) / route.peak_to_mean if t.size else t
        scale = f" compressed {route.peak_to_mean:g}x (peak_to_mean)" if route.peak_to_mean != 1 else \
            " at its own rate"
        span = float(t[-1]) if t.size else 0.0
        return Requests(t, np.maximum(1, np.asarray(inputs, dtype=np.int64)[order]),
                        np.maximum(1, np.asarray(outputs, dtype=np.int64)[order]),
                        f"the route's log ({t.size} requests over {span:.0f} s){scale}",
                        None if blocks is None else blocks.take(order))
    rate = route.peak_rps
    n = max(1, min(LOAD_MAX_REQUESTS, math.ceil(rate * LOAD_HORIZON_S)))
    return synthetic_requests(route, n, LOAD_SEED)


# ---------------------------------------------------------------- the one load of a route, with its prefixes

# Tokens per block of a route's prefix structure: a route's log is read in blocks of this size (a Mooncake trace's
# hash ids stand for 512 tokens each, and `planner traffic` reads logs so), and a route declaring
# shared_prefix_tokens gets blocks of the same size.  Coarser than vLLM's 16-token blocks: up to one block less of a
# shared prefix counts as cached (conservative), and the per-replica cache simulation stays cheap.
ROUTE_BLOCK_SIZE = DEFAULT_BLOCK_SIZE

RouteLog = tuple[LogRequests | None, BlockIds | None]


def route_log_load(route: Route) -> RouteLog:
    """The online route's own request log (route_log_requests) and its prefix structure (its requests' block ids,
    in the log's order, read in ROUTE_BLOCK_SIZE-token blocks; None when the log has no `hash_ids` nor
    `session_id`); (None, None) without a log.  Raises InputError as route_log does."""
    traffic = route_log(route, ROUTE_BLOCK_SIZE) if route.traffic == "online" else None
    if traffic is None:
        return None, None
    return _log_requests(traffic), log_blocks(traffic)


def route_load(route: Route, log: LogRequests | None = None, blocks: BlockIds | None = None) -> Requests:
    """The route's one load (route_requests) with its prefix structure, as every view of a plan replays it:
    `blocks`, the log's (route_log_load), carried with its requests; a route without a log that declares
    shared_prefix_tokens: every prompt's first floor(shared / ROUTE_BLOCK_SIZE) blocks shared, the rest its own
    (BlockIds.shared).  Neither: no blocks, every prompt prefilled cold (the load route_requests gives)."""
    requests = route_requests(route, log, blocks)
    if log is None and route.shared_prefix_tokens > 0:
        shared = BlockIds.shared(requests.input_len, route.shared_prefix_tokens, ROUTE_BLOCK_SIZE)
        requests = dataclasses.replace(requests, blocks=shared)
    return requests
