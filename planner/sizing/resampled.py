"""Robust to the next hour (issue 34, item 6): does a fleet hold every SLO window in hours it has not seen?

The route's one load (planner.traffic.workload.route_requests) is cut into its SLO windows and RESAMPLED_HOURS
hours are drawn from those holding requests with replacement, fixed seed (planner.traffic.workload.
resampled_orders): the same minutes in another order, a heavy one after another heavy one included.  An empty
window always holds and leaves an idle fleet, so it is left out of the draw (an hour of busy windows only is at
least as hard), and a log with a year between bursts costs its few busy windows.  An hour holds when every window
in it holds by the one verdict (fleetfacts.slo, part (a); attainment is judged on the load itself).

Simulating 200 hours through the fleet tier would cost 200 sizings, so each window is simulated behind the window
before it only: what a fleet that holds still carries from earlier windows is what the last one left.  A window
that breaks on an idle fleet breaks in every hour; one that holds behind the load's heaviest window (the most work
left unfinished at its end) holds in every hour; the rest are simulated behind the predecessor each drawn hour
gives them, memoised per pair.  The heaviest window is simulated once: each window behind it starts from a copy
of the fleet it left (the simulator's `prefix`, the same result as simulating the pair whole).
tests/planner/test_resampled_hours.py checks this against drawn hours simulated end to end.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from fleetfacts.slo import Targets, judge, min_window_requests
from planner.engine.curves import CurveLike
from planner.latency import DEFAULT_ROUTER, Fleet, LatencyReport, predict
from planner.traffic.workload import (
    RESAMPLE_SEED,
    RESAMPLED_HOURS,
    Requests,
    joined_blocks,
    resampled_orders,
    window_blocks,
)


@dataclass(frozen=True)
class Resampled:
    """In how many of `hours` resampled hours a fleet holds every SLO window of `window_s` seconds."""

    hours: int
    holding: int
    window_s: float

    def describe(self) -> str:
        return (f"holds every {self.window_s:g} s window in {self.holding} of {self.hours} resampled hours "
                "(the load's windows drawn at random)")


def resampled_hours(curve: CurveLike, requests: Requests, replicas: int, targets: Targets,
                    router: str = DEFAULT_ROUTER, hours: int = RESAMPLED_HOURS, seed: int = RESAMPLE_SEED,
                    own: LatencyReport | None = None) -> Resampled | None:
    """How `replicas` replicas of `curve` behind `router` fare in `hours` hours drawn from the load's windows;
    None when the SLO is not judged per window (window_s 0, no latency target) or there is no load.  own: the
    fleet tier's report on the load in its own order (simulated here when not given)."""
    if not targets.window_s > 0 or (targets.ttft_ms is None and targets.tpot_ms is None) \
            or not requests.arrival_s.size:
        return None
    held, blocks = window_blocks(requests, targets.window_s)
    pairs = _PairJudge(curve, blocks, replicas, router, targets)
    n = len(blocks)
    own = own or predict(curve, Fleet(requests, replicas, router), percentiles=(targets.percentile,))
    in_order, leftover = pairs.judge(own, float(requests.arrival_s[0]), held)
    # A window that holds behind its own predecessor holds on an idle fleet (less work carried in).
    idle = [in_order[b] or pairs.holds(None, b) for b in range(n)]
    behind_heaviest = pairs.run_behind(pairs.idle_tail(int(np.argmax(leftover))))
    safe = [idle[b] and behind_heaviest[b] for b in range(n)]
    holding = sum(_hour_holds(order, idle, safe, pairs) for order in resampled_orders(n, hours, seed))
    return Resampled(hours, holding, targets.window_s)


def _hour_holds(order: np.ndarray, idle: list[bool], safe: list[bool], pairs: _PairJudge) -> bool:
    for j, block in enumerate(order):
        if safe[block]:
            continue
        if not idle[block] or (j > 0 and not pairs.holds(int(order[j - 1]), int(block))):
            return False
    return True


class _PairJudge:
    """Simulates sequences of the load's windows on the fleet and judges the windows in them: every window behind
    one given window, one window behind another or on an idle fleet (memoised)."""

    def __init__(self, curve: CurveLike, blocks: list[Requests], replicas: int, router: str,
                 targets: Targets) -> None:
        self.curve, self.blocks, self.replicas, self.router = curve, blocks, replicas, router
        self.targets = dataclasses.replace(targets, window_s=0.0)
        self.window_s = targets.window_s
        self._memo: dict[tuple[int | None, int], bool] = {}

    def idle_tail(self, block: int) -> Requests:
        """Window `block`'s requests from the last moment its run on an idle fleet had nothing in flight: the same
        fleet state at the window's end for a fraction of the simulation (the run before that moment is over)."""
        window = self.blocks[block]
        report = predict(self.curve, Fleet(window, self.replicas, self.router),
                         percentiles=(self.targets.percentile,)) if window.arrival_s.size else None
        if report is None or len(report.results) != 1 or report.results[0].n != window.arrival_s.size:
            return window  # a thinned fleet simulates a share: keep the whole window
        r = report.results[0]
        order = np.argsort(r.arrival_s, kind="stable")
        finish = np.maximum.accumulate(np.nan_to_num(r.arrival_s[order] + r.e2e_s[order], nan=np.inf))
        empty = np.flatnonzero(finish[:-1] <= r.arrival_s[order][1:])  # nothing in flight before the next arrival
        if not empty.size:
            return window
        start = float(r.arrival_s[order][empty[-1] + 1])
        keep = window.arrival_s >= start
        return Requests(window.arrival_s[keep], window.input_len[keep], window.output_len[keep], window.source,
                        None if window.blocks is None else window.blocks.take(keep))

    def run_behind(self, before: Requests) -> list[bool]:
        """Each window right behind `before` (a window's requests, behind an idle fleet): does it hold?  (`before`
        is simulated once for all of them.)"""
        return [self._run([before, b], prefix=before.arrival_s.size)[0][-1] for b in self.blocks]

    def holds(self, before: int | None, block: int) -> bool:
        """Does window `block` hold behind window `before` (None: on an idle fleet)?"""
        key = (before, block)
        if key not in self._memo:
            parts = [self.blocks[block]] if before is None else [self.blocks[before], self.blocks[block]]
            self._memo[key] = self._run(list(parts))[0][-1]
        return self._memo[key]

    def _run(self, sequence: list[Requests], prefix: int = 0) -> tuple[list[bool], np.ndarray]:
        """Per window of `sequence` laid end to end on an idle fleet: does it hold, and the seconds of work its
        requests leave past its end (prefix: the first requests shared with other runs, a hint)."""
        load = joined_blocks(sequence, self.window_s)
        if not load.arrival_s.size:
            return [True] * len(sequence), np.zeros(len(sequence))
        report = predict(self.curve, Fleet(load, self.replicas, self.router, prefix=prefix),
                         percentiles=(self.targets.percentile,))
        return self.judge(report, 0.0, np.arange(len(sequence)))

    def judge(self, report: LatencyReport, origin: float, windows: np.ndarray) -> tuple[list[bool], np.ndarray]:
        """Per window of `window_s` from `origin` of a fleet report, at the given window indices: does it hold,
        and the seconds of work its requests leave past its end.  Too few requests for a percentile: judged with
        the window before, as the verdict pools small windows.  Each window's requests are found by bisection (the
        report's arrivals are sorted), so the cost grows with the requests and the windows given, not the span."""
        w = self.window_s
        t, ttft, tpot, e2e = (np.concatenate([getattr(r, name) for r in report.results])
                              for name in ("arrival_s", "ttft_s", "tpot_s", "e2e_s"))
        exempt = report.ttft_exempt(self.targets.ttft_ms)
        position = np.floor((t - origin) / w).astype(np.int64)  # non-decreasing: the arrivals are sorted
        verdicts, leftover = [True] * len(windows), np.zeros(len(windows))
        need = min_window_requests(self.targets.percentile)
        for j, k in enumerate(int(k) for k in windows):
            lo, hi = np.searchsorted(position, (k, k + 1))
            if lo == hi:
                continue
            finish = t[lo:hi] + e2e[lo:hi]
            leftover[j] = float(np.sum(np.maximum(finish[np.isfinite(finish)] - origin - (k + 1) * w, 0.0)))
            if hi - lo < need and k > 0:
                lo = np.searchsorted(position, k - 1)
            verdicts[j] = judge(t[lo:hi], ttft[lo:hi], tpot[lo:hi], e2e[lo:hi], self.targets,
                                ttft_exempt=None if exempt is None else exempt[lo:hi]).holds_every_window
        return verdicts, leftover
