"""Seeded generators of request arrival times (seconds from the first arrival's clock start).

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

import math
from collections.abc import Sequence

import numpy as np

from fleetfacts.errors import InputError

HOURS_PER_DAY = 24
SECONDS_PER_HOUR = 3600.0
# Below this CV the gamma shape would exceed ~1e12: the gaps are treated as exactly regular.
MIN_GAMMA_CV = 1e-6

Seed = int | np.random.Generator | None


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

    multipliers: 24 numbers (hour 0..23), used as given (planner.traffic
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
