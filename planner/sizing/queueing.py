"""The utilisation floor of an online fleet: the fewest replicas that carry a rate under a cap.

Latency is not computed here: a replica count is sized on the latency door (planner.latency,
planner.sizing.sizing); this only bounds the search from below.  (Until 2026-12-03 this module held a G/G/c
queue, Allen-Cunneen waits on Erlang C, that sized replicas on a closed-loop operating point: the plan
now sizes on the open-loop simulation, whose latency is what a deployment measures.)
"""

from __future__ import annotations

import math

from fleetfacts.errors import FleetplanError


class QueueingError(FleetplanError, ValueError):
    """Inputs outside the model's domain (non-positive rates, a cap outside (0, 1])."""


def load_bound(rate: float, service_rate_per_replica: float, cap: float) -> int:
    """Fewest replicas keeping utilisation strictly below 1 and at most `cap`."""
    if not (rate > 0 and math.isfinite(rate)):
        raise QueueingError(f"arrival rate must be a positive number of requests/s, got {rate!r}")
    if not (service_rate_per_replica > 0 and math.isfinite(service_rate_per_replica)):
        raise QueueingError(f"service rate per replica must be positive, got {service_rate_per_replica!r}")
    if not 0.0 < cap <= 1.0:
        raise QueueingError(f"utilisation cap must be in (0, 1], got {cap!r}")
    exact = rate / service_rate_per_replica
    by_cap = math.ceil(exact / cap - 1e-12)
    stable = math.floor(exact) + 1
    return max(1, by_cap, stable)
