"""Issue 47, item 4: bounded time and memory on odd request logs.

A log of 1 request, then 100 requests a year later, never finished planning: the SLO windows, the resampled
hours, the autoscaler and the front end's backlog each walked the year a minute (or 15 s, or 50 ms) at a time.
Empty stretches now cost nothing: only the windows holding requests are visited, and an idle fleet drains between
them.  How long a million-request log takes is a benchmark (benchmarks/odd_logs.py), not a test.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fleetfacts.slo import Targets, judge
from planner.engine.frontend import FrontEnd, stream_load
from planner.latency import door
from planner.planning.plan import make_plan
from planner.planning.route_table import load_routes
from planner.sizing import resampled
from planner.sizing.assumptions import Assumptions
from planner.sizing.autoscaled import schedule
from planner.sizing.resampled import resampled_hours
from planner.traffic.workload import Requests, window_blocks
from tests.conftest import bundled_catalog

YEAR_S = 365 * 86400.0  # a whole number of 60 s windows
WINDOW_S = 60.0
# Fleet simulations a plan of the one-option year-gap route may run: its screen, search, views and resampled
# hours over the handful of windows holding requests (it runs 6).  A walk over the year's half a million windows
# passes it within seconds.
MAX_SIMULATIONS = 100


def year_gap_arrivals(gap_s: float = YEAR_S) -> np.ndarray:
    """1 request, then 100 `gap_s` later: 40 in one minute, 60 in the next (the busier one)."""
    rng = np.random.default_rng(0)
    burst = np.concatenate([rng.uniform(0.0, WINDOW_S, 40), rng.uniform(WINDOW_S, 2 * WINDOW_S, 60)])
    return np.concatenate([[0.0], gap_s + WINDOW_S + np.sort(burst)])


def year_gap_requests(gap_s: float = YEAR_S) -> Requests:
    t = year_gap_arrivals(gap_s)
    rng = np.random.default_rng(1)
    return Requests(t, rng.integers(100, 2000, t.size), rng.integers(20, 300, t.size), "year gap")


def test_the_windows_of_a_year_are_only_those_holding_requests():
    """The verdict over a year cut into 1 ms windows (3e10 of them) visits the ~100 holding a request, and pools
    them as the log without its gap; resampling cuts only the held 60 s windows."""
    t = year_gap_arrivals()
    zeros = np.zeros(t.size)
    targets = Targets(ttft_ms=100.0, percentile=50.0, window_s=1e-3)
    gap, removed = (judge(x, zeros, zeros, zeros, targets) for x in (t, year_gap_arrivals(0.0)))
    assert gap.windows == removed.windows <= t.size
    np.testing.assert_array_equal(gap.requests, removed.requests)
    held, blocks = window_blocks(year_gap_requests(), WINDOW_S)
    assert held.tolist() == [0, YEAR_S / WINDOW_S + 1, YEAR_S / WINDOW_S + 2]  # 3 blocks, not 525,603
    assert [b.arrival_s.size for b in blocks] == [1, 40, 60]


def test_resampling_a_year_simulates_only_the_windows_holding_requests(monkeypatch):
    """Counted, not timed: the fleet simulations resampled_hours runs grow with the held windows (3), not the
    year's 525,603."""
    route_curve = next(c for c in bundled_catalog().curves.values()
                       if (c.key.engine, c.key.gpu, c.key.precision, c.key.model, c.key.config)
                       == ("vllm", "h200", "fp8", "llama-3.1-8b", "default"))
    runs = []
    real = resampled.predict

    def counted(*args, **kwargs):
        runs.append(1)
        if len(runs) > 20:
            raise AssertionError("resampled_hours simulated more than 20 windows of a log holding 3")
        return real(*args, **kwargs)

    monkeypatch.setattr(resampled, "predict", counted)
    targets = Targets(ttft_ms=500.0, tpot_ms=50.0, percentile=95.0, window_s=WINDOW_S)
    found = resampled_hours(route_curve, year_gap_requests(), 1, targets)
    assert found is not None and found.holding == found.hours
    assert len(runs) <= 2 * 3 + 2  # the load, each window behind the heaviest and alone, the heaviest's tail


def test_the_autoscaler_decides_only_around_arrivals_and_as_without_the_gap():
    from planner.sizing.autoscaled import decision_times

    t, removed = year_gap_arrivals(), year_gap_arrivals(0.0)
    assert decision_times(t, float(t[-1])).size < 100  # not the year's two million
    gap, near = (schedule(x, 1, 4, 0.2, 160.0) for x in (t, removed))
    # Every extra replica asked for in the burst is asked for the same time after it.
    shift = [start - YEAR_S for start, _ in gap.billed[1:]]
    assert len(shift) == len(near.billed) - 1 >= 1
    np.testing.assert_allclose(shift, [start for start, _ in near.billed[1:]])


def test_a_burst_a_year_later_meets_the_same_front_end_backlog():
    """The front end's backlog bins cover the busy stretches at 50 ms: a year of quiet is one bin, and an
    overloading burst after it queues as it would without the gap (it used to be averaged over 158 s bins)."""
    front_end = FrontEnd(0.008, 1.5e-6, 1.9e-6, 1e-4, 0.027)
    burst = np.sort(np.random.default_rng(2).uniform(0.0, 20.0, 2000))  # ~40k tokens/s, 4x what it streams
    backlogs = []
    for gap in (0.0, YEAR_S):
        arrival = np.concatenate([[0.0], 100.0 + gap + burst])
        load = stream_load(arrival, arrival + 0.05, arrival + 2.0, np.full(arrival.size, 400.0))
        assert load.bin_requests.size < 3000
        backlogs.append(front_end.backlog_s(load))
    assert backlogs[0].max() > 1.0
    np.testing.assert_allclose(backlogs[1], backlogs[0], rtol=1e-6, atol=1e-9)


def _route_file(folder, name: str, gap_s: float) -> pd.DataFrame:
    """A one-option route replaying the year-gap log (or it without its gap) at its own timestamps."""
    requests = year_gap_requests(gap_s)
    stamps = pd.to_datetime(1.7e9 + requests.arrival_s, unit="s", utc=True).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    pd.DataFrame({"timestamp": stamps, "prompt_tokens": requests.input_len,
                  "completion_tokens": requests.output_len}).to_csv(folder / f"{name}.csv", index=False)
    own_rate = (requests.arrival_s.size - 1) / float(requests.arrival_s[-1])  # replayed as recorded
    row = {"name": "odd", "model": "llama-3.1-8b", "traffic": "online", "rate_rps": own_rate,
           "peak_to_mean": 1.0, "input_len_mean": 1000, "output_len_mean": 150, "slo_percentile": 95,
           "ttft_slo_ms": 500, "tpot_slo_ms": 50, "engines": "vllm", "gpus": "h200", "precisions": "fp8",
           "tps": "1", "configs": "default", "log": f"{name}.csv"}
    pd.DataFrame([row]).to_csv(folder / f"{name}-routes.csv", index=False)
    return load_routes(folder / f"{name}-routes.csv")


@pytest.mark.timeout(120)  # a guard against the old hang, not a timing: the plan takes seconds
def test_a_year_gap_log_plans_as_the_log_without_its_gap(tmp_path, monkeypatch):
    simulations = []
    real = door.simulate

    def counted(*args, **kwargs):
        simulations.append(1)
        if len(simulations) > MAX_SIMULATIONS:
            raise AssertionError(f"more than {MAX_SIMULATIONS} simulations for a log holding 101 requests")
        return real(*args, **kwargs)

    monkeypatch.setattr(door, "simulate", counted)
    plans = {}
    for name, gap in (("gap", YEAR_S), ("removed", 0.0)):
        result = make_plan(_route_file(tmp_path, name, gap), bundled_catalog(), Assumptions(),
                           check_by_simulation=True)
        plans[name] = (result.rows[0], result.timelines["odd"])
    (row, timeline), (near, near_timeline) = plans["gap"], plans["removed"]
    assert row.ok and near.ok
    for column in ("option", "replicas", "gpus", "windows", "windows_in_breach", "resampled_hours",
                   "holds_in_resampled_hours", "autoscaled_floor", "whole_log_replicas"):
        assert getattr(row, column) == getattr(near, column), column
    for column in ("ttft_worst_window_ms", "tpot_worst_window_ms", "slo_attainment", "ttft_pred_ms"):
        assert getattr(row, column) == pytest.approx(getattr(near, column), rel=1e-6), column
    # The same busiest window: the second minute of the burst, a year later.
    assert row.busiest_window_start_s == pytest.approx(near.busiest_window_start_s + YEAR_S)
    # Window by window (the first pools the lone request with the burst's first minute, so spans the gap).
    assert len(timeline) == len(near_timeline) >= 2
    np.testing.assert_array_equal(timeline.breach, near_timeline.breach)
    np.testing.assert_allclose(timeline[["ttft_ms", "tpot_ms"]], near_timeline[["ttft_ms", "tpot_ms"]], rtol=1e-6)
    assert timeline.requests_per_min.iloc[-1] == near_timeline.requests_per_min.iloc[-1] == 60.0


def _curve():
    return next(c for c in bundled_catalog().curves.values()
                if (c.key.engine, c.key.gpu, c.key.precision, c.key.model, c.key.config)
                == ("vllm", "h200", "fp8", "llama-3.1-8b", "default"))


def test_the_screen_replays_a_long_logs_busiest_stretch_only():
    """A replica's share of a long log is screened on its busiest SHARE_MAX_REQUESTS requests (a million-request
    log was replayed whole for every option and count: minutes and a gigabyte); the fleet check keeps the whole."""
    from planner.sizing import sizing
    from planner.traffic.routes import Route

    rng = np.random.default_rng(3)
    n = sizing.SHARE_MAX_REQUESTS + 20_000
    gaps = np.where(np.arange(n) < 30_000, 0.5, 0.05)  # slow, then ten times busier: the stretch to screen on
    t = np.cumsum(gaps * rng.exponential(1.0, n))
    log = (t, (rng.integers(100, 1000, n), rng.integers(10, 100, n)))
    rate = (n - 1) / float(t[-1] - t[0])  # its own: replayed as recorded
    route = Route.from_row({"name": "long", "model": "llama-3.1-8b", "traffic": "online", "rate_rps": rate,
                            "input_len_mean": 550, "output_len_mean": 55, "slo_percentile": 95, "ttft_slo_ms": 500,
                            "tpot_slo_ms": 50, "log": "long.csv"})
    report = sizing.share_latency(_curve(), route, 1, log)
    (result,) = report.results
    assert result.n == sizing.SHARE_MAX_REQUESTS
    np.testing.assert_allclose(result.arrival_s, t[-sizing.SHARE_MAX_REQUESTS:] - t[0])  # the busy end
    assert result.arrival_s.base is None  # copied: the cached report keeps no whole-log array alive


def test_memoised_fleet_reports_hold_a_bounded_number_of_requests(monkeypatch):
    from planner.sizing import sizing
    from planner.traffic.routes import Route

    monkeypatch.setattr(sizing, "FLEET_CACHE_REQUESTS", 2_500)
    monkeypatch.setattr(sizing, "_FLEETS", {})
    load = year_gap_requests(0.0)  # 101 requests
    for k in range(30):
        route = Route.from_row({"name": f"r{k}", "model": "llama-3.1-8b", "traffic": "online", "rate_rps": 5.0,
                                "input_len_mean": 500, "output_len_mean": 50, "ttft_slo_ms": 500})
        last = sizing.fleet_latency(_curve(), route, 1, load)
    held = sum(sizing._requests_held(r) for r in sizing._FLEETS.values())
    assert held <= 2_500 and len(sizing._FLEETS) == 2_500 // 101
    assert sizing.fleet_latency(_curve(), route, 1, load) is last  # the most recent stays
