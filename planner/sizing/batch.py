"""A batch job's cheapest fleet: the fewest replicas whose simulated makespan (the latency door's `Job`) meets
the deadline, priced."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetfacts.errors import InputError
from planner.engine.curves import CurveLike
from planner.latency import Job, predict
from planner.sizing.search import bisect_replicas

# assumption: spot capacity is preempted and work redone often enough to add this share of wall time.
DEFAULT_PREEMPTION_OVERHEAD = 0.10


@dataclass(frozen=True)
class BatchFleet:
    """The fleet a batch job needs: replicas, simulated makespan, time with spot overhead, and cost per job."""

    feasible: bool
    replicas: int
    makespan_s: float
    wall_s: float
    deadline_s: float
    usd_per_job: float
    spot: bool
    preemption_overhead: float
    reason: str = ""


def cheapest_batch_fleet(curve: CurveLike, lengths: tuple[np.ndarray, np.ndarray], deadline_s: float,
                         usd_per_gpu_hour: float, tp: int = 1, spot: bool = False,
                         preemption_overhead: float = DEFAULT_PREEMPTION_OVERHEAD,
                         billing_granularity_hours: float = 0.0, max_replicas: int = 4096,
                         total_requests: int | None = None) -> BatchFleet:
    """Fewest replicas whose simulated makespan (x (1 + preemption_overhead) on spot) meets the deadline.

    GPU cost grows with replicas x makespan, which the last, partly filled wave
    only makes larger as replicas are added, so the fewest replicas meeting the
    deadline is the cheapest fleet.  usd_per_job bills replicas x tp GPUs for
    the wall time, rounded up to billing_granularity_hours (0 = exact).
    """
    if not (deadline_s > 0 and usd_per_gpu_hour >= 0 and preemption_overhead >= 0):
        raise InputError("deadline_s must be > 0, usd_per_gpu_hour and preemption_overhead >= 0")
    factor = 1.0 + (preemption_overhead if spot else 0.0)
    count = len(lengths[0]) if total_requests is None else int(total_requests)
    ceiling = max(1, min(max_replicas, count))
    walls: dict[int, float] = {}

    def meets(r: int) -> bool:
        if r not in walls:
            walls[r] = predict(curve, Job(lengths[0], lengths[1], r, count)).makespan_s * factor
        return walls[r] <= deadline_s

    best = bisect_replicas(meets, 1, ceiling)
    r = best if best is not None else ceiling
    wall = walls[r]
    hours = wall / 3600.0
    if billing_granularity_hours > 0:
        hours = math.ceil(hours / billing_granularity_hours) * billing_granularity_hours
    reason = "" if best is not None else (f"even {r} replicas take {wall / 3600:.2f} h, over the "
                                          f"{deadline_s / 3600:.2f} h deadline")
    return BatchFleet(best is not None, r, wall / factor, wall, deadline_s, r * tp * hours * usd_per_gpu_hour,
                      spot, preemption_overhead if spot else 0.0, reason)
