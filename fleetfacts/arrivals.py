"""Arrival processes shared by the load generator and the planner's latency checks.

measure's load generator sends a rate point's requests at `arrival_times(n,
rate, arrival, seed)`; a profile row records the seed (`arrival_seed`), so the
planner can replay exactly the arrivals a server was measured under.  Short
points draw noticeably off their nominal rate (0.74-1.32x on the H200 session-5
points of 20-320 requests), which a nominal-rate replay would misattribute to
the model.
"""

from __future__ import annotations

import re

import numpy as np

from fleetfacts.errors import InputError

GAMMA_RE = re.compile(r"^gamma(?::cv=(?P<cv>[0-9.]+))?$")


def arrival_cv(arrival: str) -> float:
    """Coefficient of variation of the gaps of an arrival process: 1 for poisson, X for gamma:cv=X."""
    kind = str(arrival).strip().lower()
    if kind in ("poisson", ""):
        return 1.0
    gamma = GAMMA_RE.match(kind)
    if not gamma:
        raise InputError(f"arrival {arrival!r}: expected poisson or gamma:cv=X")
    cv = float(gamma.group("cv") or 1.0)
    if cv <= 0:
        raise InputError(f"arrival {arrival!r}: cv must be > 0")
    return cv


def arrival_times(n: int, rate: float, arrival: str, seed: int) -> list[float]:
    """Send times (s, first at 0) of n requests at mean `rate`/s: poisson, or gamma:cv=X."""
    if rate <= 0:
        raise InputError(f"request rate must be > 0, got {rate}")
    kind = arrival.strip().lower()
    if kind != "poisson" and not GAMMA_RE.match(kind):
        raise InputError(f"arrival {arrival!r}: expected poisson, gamma:cv=X or replay:PATH")
    cv = arrival_cv(kind)
    rng = np.random.default_rng(seed)
    if kind == "poisson":
        gaps = rng.exponential(1.0 / rate, size=n)
    else:
        shape = 1.0 / cv**2
        gaps = rng.gamma(shape, 1.0 / (rate * shape), size=n)
    times = np.concatenate([[0.0], np.cumsum(gaps[1:])]) if n else np.array([])
    return times.tolist()
