"""Multi-server queueing approximations for sizing online routes.

The fleet is modelled as `c` identical servers fed by one queue: a replica that
serves up to C sequences concurrently is C "slots", each busy for the request's
end-to-end service time, so a fleet of R replicas is c = R * C servers of rate
mu = 1 / e2e(C).  A request that finds every slot busy waits; that wait adds to
its time to first token.

Waiting times use the Allen-Cunneen approximation for G/G/c:

    Wq ~= C(c, a) / (c*mu - lambda) * (ca^2 + cs^2) / 2

with C(c, a) the Erlang C probability of waiting (a = lambda/mu offered load,
in Erlangs), ca^2 and cs^2 the squared coefficients of variation of the
inter-arrival and service times.  Its tail is taken as exponential,

    P(W > t) ~= C(c, a) * exp(-(c*mu - lambda) * t * 2 / (ca^2 + cs^2)),

exact for M/M/c (ca^2 = cs^2 = 1).  See docs/planning.md for the reasoning and
the limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.special import gammaincc

from fleetfacts.errors import FleetplanError

# Searching for replicas stops here: a route needing more is a data error, not a plan.
MAX_REPLICAS = 1_000_000
# Replica counts above the load bound tried one by one before doubling (the answer is usually within).
LINEAR_STEPS = 4


class QueueingError(FleetplanError, ValueError):
    """Queueing inputs are outside the model's domain (non-positive rates, percentile outside (0, 1))."""


def erlang_b(servers: int, offered: float) -> float:
    """Erlang B blocking probability B(c, a), computed in log space.

    B(c, a) = P(N = c) / P(N <= c) for N ~ Poisson(a), so
    log B = c*log(a) - a - lgamma(c + 1) - log(Q(c + 1, a)), with Q the
    regularised upper incomplete gamma function.  Stable for thousands of servers.
    """
    if offered <= 0:
        return 0.0
    log_pmf = servers * math.log(offered) - offered - math.lgamma(servers + 1.0)
    cdf = float(gammaincc(servers + 1.0, offered))
    if cdf <= 0.0:
        return 1.0
    return math.exp(min(log_pmf - math.log(cdf), 0.0))


def erlang_c(servers: int, offered: float) -> float:
    """Erlang C probability that an arrival waits, C(c, a); 1 where c <= a (unstable)."""
    rho = offered / servers
    if rho >= 1.0:
        return 1.0
    b = erlang_b(servers, offered)
    return min(max(b / (1.0 - rho * (1.0 - b)), 0.0), 1.0)


def mean_wait_s(servers: int, arrival_rate: float, service_rate: float, ca2: float, cs2: float) -> float:
    """Allen-Cunneen mean wait in queue, seconds (inf where unstable)."""
    headroom = servers * service_rate - arrival_rate
    if headroom <= 0:
        return math.inf
    return erlang_c(servers, arrival_rate / service_rate) / headroom * (ca2 + cs2) / 2.0


def wait_percentile_s(servers: int, arrival_rate: float, service_rate: float, ca2: float, cs2: float,
                      percentile: float) -> float:
    """Wait (s) exceeded by a share 1 - percentile of arrivals, from the exponential tail.

    t_p = max(0, ln(C / (1 - p)) * (ca^2 + cs^2) / (2 * (c*mu - lambda))); inf where unstable.
    `percentile` is a fraction in (0, 1), e.g. 0.95.
    """
    if not 0.0 < percentile < 1.0:
        raise QueueingError(f"percentile must be a fraction in (0, 1), got {percentile!r}")
    headroom = servers * service_rate - arrival_rate
    if headroom <= 0:
        return math.inf
    prob = erlang_c(servers, arrival_rate / service_rate)
    if prob <= 1.0 - percentile:
        return 0.0
    return math.log(prob / (1.0 - percentile)) * max(ca2 + cs2, 1e-12) / 2.0 / headroom


@dataclass(frozen=True)
class QueueSizing:
    """Replicas for one route and the queue they give.

    servers = replicas * slots_per_replica; utilisation = lambda / (servers * mu);
    wait_probability = Erlang C; wait_mean_s and wait_pct_s from Allen-Cunneen.
    """

    replicas: int
    servers: int
    utilisation: float
    wait_probability: float
    wait_mean_s: float
    wait_pct_s: float


def replicas_for(rate: float, service_rate_per_replica: float, ca2: float, cs2: float, wait_budget_s: float,
                 percentile: float = 0.95, slots_per_replica: int = 1, utilisation_cap: float = 1.0
                 ) -> QueueSizing:
    """Smallest replica count whose `percentile` wait is within `wait_budget_s`.

    rate: arrivals/s; service_rate_per_replica: completions/s of one busy
    replica (slots_per_replica / e2e); the replica is `slots_per_replica`
    parallel servers.  Also requires utilisation < 1 and <= utilisation_cap.
    A negative budget is treated as zero (no request may wait at that percentile).
    Raises QueueingError for non-positive rates or a cap outside (0, 1].
    """
    _check_inputs(rate, service_rate_per_replica, slots_per_replica, utilisation_cap)
    mu = service_rate_per_replica / slots_per_replica
    budget = max(wait_budget_s, 0.0)
    lower = load_bound(rate, service_rate_per_replica, utilisation_cap)

    def meets(replicas: int) -> bool:
        return wait_percentile_s(replicas * slots_per_replica, rate, mu, ca2, cs2, percentile) <= budget

    replicas = _smallest_meeting(meets, lower)
    return _describe(replicas, slots_per_replica, rate, mu, ca2, cs2, percentile)


def _check_inputs(rate: float, service_rate: float, slots: int, cap: float) -> None:
    if not (rate > 0 and math.isfinite(rate)):
        raise QueueingError(f"arrival rate must be a positive number of requests/s, got {rate!r}")
    if not (service_rate > 0 and math.isfinite(service_rate)):
        raise QueueingError(f"service rate per replica must be positive, got {service_rate!r}")
    if slots < 1:
        raise QueueingError(f"slots per replica must be >= 1, got {slots!r}")
    if not 0.0 < cap <= 1.0:
        raise QueueingError(f"utilisation cap must be in (0, 1], got {cap!r}")


def load_bound(rate: float, service_rate_per_replica: float, cap: float) -> int:
    """Fewest replicas keeping utilisation strictly below 1 and at most `cap`."""
    exact = rate / service_rate_per_replica
    by_cap = math.ceil(exact / cap - 1e-12)
    stable = math.floor(exact) + 1
    return max(1, by_cap, stable)


def _smallest_meeting(meets, lower: int) -> int:
    """Smallest n >= lower with meets(n) (monotone): a short linear scan, then doubling and bisection."""
    for n in range(lower, lower + LINEAR_STEPS):
        if meets(n):
            return n
    low, high = lower + LINEAR_STEPS - 1, 2 * (lower + LINEAR_STEPS)
    while not meets(high):
        if high >= MAX_REPLICAS:
            raise QueueingError(f"more than {MAX_REPLICAS} replicas needed: check the route's rate and SLOs")
        low, high = high, min(high * 2, MAX_REPLICAS)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if meets(mid) else (mid, high)
    return high


def _describe(replicas: int, slots: int, rate: float, mu: float, ca2: float, cs2: float,
              percentile: float) -> QueueSizing:
    servers = replicas * slots
    return QueueSizing(
        replicas=replicas,
        servers=servers,
        utilisation=rate / (servers * mu),
        wait_probability=erlang_c(servers, rate / mu),
        wait_mean_s=mean_wait_s(servers, rate, mu, ca2, cs2),
        wait_pct_s=wait_percentile_s(servers, rate, mu, ca2, cs2, percentile),
    )
