"""The replica search every sizing runs: the fewest replicas a verdict accepts, searched from a good start."""

from __future__ import annotations

from collections.abc import Callable


def bisect_replicas(meets: Callable[[int], bool], start: int, ceiling: int) -> int | None:
    """Smallest r in [1, ceiling] with meets(r), searching from `start`; None if meets(ceiling) is False.

    Steps of 1, 1, 2, 4, ... away from `start`, then bisection: a start near the answer (the usual case: a
    screened count) costs few calls, and calls beyond the answer, which nothing else uses, stay rare.
    """
    step = 1
    if meets(start):
        low, high = 0, start  # meets(high); low fails (0 replicas always fails)
        while high - step >= 1 and meets(high - step):
            high -= step
            step *= 2
        low = max(low, high - step)
    else:
        low, high = start, min(start + 1, ceiling)
        while not meets(high):
            if high >= ceiling:
                return None
            low, high = high, min(high + step, ceiling)
            step *= 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if meets(mid) else (mid, high)
    return high
