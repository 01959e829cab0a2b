"""The autoscaled option (issue 34, item 5): a warm floor of replicas plus scale-up, on the route's one load.

The autoscaler is simulated on the same arrivals the steady fleet was sized on (planner.traffic.workload.
route_requests), the way a Kubernetes HPA or KEDA scaler on the request rate acts:

- every SYNC_S seconds it reads the arrival rate over the last DETECT_S seconds and wants
  ceil(rate / per-replica rate) replicas, between the floor and the steady fleet's count; the per-replica rate
  is what each steady replica carries in the load's busiest SLO window (what the plan showed it holds);
- a replica it asks for takes arrivals `scale_up_s - DETECT_S` seconds later (the engine's start: `vllm serve` of
  vLLM 0.26 on the H200 took 82, 98 and 116 s to ready in the recorded runs, benchmarks/roundtrip and
  benchmarks/busiest-minute; 130 s is the planning figure RUNS.md uses, above every one of them), and is billed from the
  moment it is asked for;
- it gives replicas back only when it has wanted fewer for SCALE_DOWN_S (the HPA's default stabilisation window);
  a replica given back takes no more arrivals and finishes what it holds.

The floor is the fewest always-on replicas whose autoscaled fleet the one verdict passes (fleetfacts.slo); its
GPU-hours are the replicas' billed time over the load, against the steady fleet's.  Within one busiest hour the
question is whether scale-up is quick enough for the bursts; across the day, the fleet optimiser's hourly
autoscaling (planner.planning.fleet) answers the slower swings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetfacts.slo import SloCheck, Targets
from planner.engine.curves import CurveLike
from planner.latency import DEFAULT_ROUTER, Fleet, predict
from planner.traffic.workload import SIM_MAX_REPLICAS, Requests

# How often the autoscaler decides, and over how many seconds it reads the arrival rate (HPA sync period 15 s;
# a 30 s rate window).
SYNC_S = 15.0
DETECT_S = 30.0
# How long it must want fewer replicas before giving them back (the HPA's default scale-down stabilisation).
SCALE_DOWN_S = 300.0
# Default reaction time: the 30 s detection plus a 130 s vLLM start (recorded H200 starts: 82-116 s).
DEFAULT_SCALE_UP_S = DETECT_S + 130.0
# Autoscaling beats steady only when it saves at least this share of the steady fleet's GPU-hours.
MIN_SAVING = 0.01


@dataclass(frozen=True)
class Schedule:
    """An autoscaled fleet's replicas: when each takes arrivals, and when it is billed from and until."""

    active: tuple[tuple[float, float], ...]
    billed: tuple[tuple[float, float], ...]

    def gpu_replica_hours(self, end_s: float) -> float:
        """Replica-hours billed from 0 to `end_s`."""
        return sum(max(0.0, min(until, end_s) - max(start, 0.0)) for start, until in self.billed) / 3600.0


@dataclass(frozen=True)
class Autoscaled:
    """The cheapest floor that holds (None: none below the steady count does), its fleet's verdict and cost."""

    floor: int | None
    ceiling: int
    scale_up_s: float
    replica_hours: float
    steady_replica_hours: float
    check: SloCheck | None

    @property
    def beats_steady(self) -> bool:
        return self.floor is not None and self.replica_hours <= (1.0 - MIN_SAVING) * self.steady_replica_hours

    @property
    def cost_ratio(self) -> float:
        """Billed replica-hours over the steady fleet's (1 when autoscaling cannot beat steady)."""
        return self.replica_hours / self.steady_replica_hours if self.beats_steady else 1.0

    def describe(self) -> str:
        if self.beats_steady:
            assert self.check is not None
            return (f"autoscaled from a floor of {self.floor} to {self.ceiling} replicas ({self.scale_up_s:g} s "
                    f"scale-up): {self.cost_ratio:.0%} of the steady fleet's GPU-hours, "
                    f"{self.check.windows_in_breach} of {self.check.windows} windows in breach")
        if self.ceiling < 2:
            return "autoscaling cannot beat steady here: one replica, nothing to scale down to"
        why = (f"no floor below {self.ceiling} replicas holds every window" if self.floor is None else
               f"a floor of {self.floor} holds but saves under {MIN_SAVING:.0%} of the GPU-hours (the load keeps "
               f"{self.ceiling} replicas busy most of the time)")
        return f"autoscaling cannot beat steady here with a {self.scale_up_s:g} s scale-up: {why}"


def schedule(arrival_s: np.ndarray, floor: int, ceiling: int, replica_rps: float, scale_up_s: float) -> Schedule:
    """The rate autoscaler of the module doc on these arrivals: `floor` replicas always on, up to `ceiling`."""
    t = np.sort(np.asarray(arrival_s, dtype=float))
    end = float(t[-1]) if t.size else 0.0
    start_delay = max(0.0, scale_up_s - DETECT_S)
    on: list[list[float]] = []  # extra replicas: [asked at, takes arrivals from, given back at]
    wanted_since: list[tuple[float, int]] = []  # (decision time, wanted) over the last SCALE_DOWN_S
    for now in decision_times(t, end):
        rate = (np.searchsorted(t, now, side="right") - np.searchsorted(t, now - DETECT_S, side="right")) / DETECT_S
        wanted = min(ceiling, max(floor, math.ceil(rate / replica_rps - 1e-9)))
        wanted_since = [(d, w) for d, w in wanted_since if d > now - SCALE_DOWN_S] + [(now, wanted)]
        extra = [r for r in on if r[2] == math.inf]
        if wanted - floor > len(extra):
            on += [[now, now + start_delay, math.inf] for _ in range(wanted - floor - len(extra))]
        keep = max(w for _, w in wanted_since) - floor
        for r in sorted(extra, key=lambda r: -r[0])[:max(0, len(extra) - keep)]:
            r[2] = now  # the latest asked for goes back first
    always = [(0.0, math.inf)] * floor
    return Schedule(tuple(always + [(r[1], r[2]) for r in on]), tuple(always + [(r[0], r[2]) for r in on]))


def decision_times(arrival_s: np.ndarray, end_s: float) -> np.ndarray:
    """The autoscaler's decision times (every SYNC_S from SYNC_S to end_s, as np.arange gives them) at which it may
    change anything: those up to DETECT_S + SCALE_DOWN_S after an arrival, and the first after that, which gives
    back what the burst asked for.  Between them it wants its floor and holds nothing more, so a quiet stretch costs
    nothing however long (a year between two bursts is a few hundred decisions, not two million)."""
    t = np.asarray(arrival_s, dtype=float)
    count = math.ceil(((end_s + SYNC_S) - SYNC_S) / SYNC_S)
    if not t.size or count < 1:
        return np.zeros(0)
    # Decision k is at SYNC_S + k SYNC_S; each arrival matters from (a step before) it to the first quiet decision.
    lo = np.floor((t - SYNC_S) / SYNC_S).astype(np.int64)
    hi = np.floor((t + DETECT_S + SCALE_DOWN_S) / SYNC_S).astype(np.int64) + 1
    apart = lo[1:] > hi[:-1] + 1  # arrivals sorted: lo and hi never decrease
    starts, ends = lo[np.concatenate([[True], apart])], hi[np.concatenate([apart, [True]])]
    k = np.concatenate([np.arange(max(a, 0), min(b, count - 1) + 1) for a, b in zip(starts, ends, strict=True)])
    return SYNC_S + k * SYNC_S


def busiest_window_rps(requests: Requests, window_s: float) -> float:
    """Arrivals per second in the load's busiest window of `window_s` (the whole load when 0)."""
    t = requests.arrival_s
    if not t.size:
        return 0.0
    span = window_s if window_s > 0 else max(float(t[-1] - t[0]), 1.0)
    ends = np.searchsorted(t, t + span, side="left")
    return float(np.max(ends - np.arange(t.size))) / span


def autoscaled(curve: CurveLike, requests: Requests, steady: int, targets: Targets, scale_up_s: float,
               router: str = DEFAULT_ROUTER) -> Autoscaled | None:
    """The cheapest floor below `steady` whose autoscaled fleet holds the SLO, or None when it cannot be simulated
    (no load, or more replicas than the simulator takes whole)."""
    t = requests.arrival_s
    if not t.size or steady > SIM_MAX_REPLICAS or not scale_up_s >= 0:
        return None
    end = float(t[-1])
    replica_rps = busiest_window_rps(requests, targets.window_s) / steady
    steady_hours = steady * end / 3600.0
    best: Autoscaled = Autoscaled(None, steady, scale_up_s, steady_hours, steady_hours, None)
    for floor in range(steady - 1, 0, -1):  # a lower floor holds less: stop at the first that breaks
        plan = schedule(t, floor, steady, replica_rps, scale_up_s)
        hours = plan.gpu_replica_hours(end)
        if hours >= steady_hours:
            continue
        report = predict(curve, Fleet(requests, len(plan.active), router, active=plan.active),
                         percentiles=(targets.percentile,))
        check = report.check(targets)
        if not check.ok:
            break
        if hours < best.replica_hours or best.floor is None:
            best = Autoscaled(floor, steady, scale_up_s, hours, steady_hours, check)
    return best
