"""Issue 34, item 6: robust to the next hour. Hours drawn from the load's SLO windows, judged window by window."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fleetfacts.errors import InputError
from fleetfacts.slo import judge
from planner.latency import Fleet, predict
from planner.planning.route_table import load_routes
from planner.sizing import resampled
from planner.sizing.resampled import resampled_hours
from planner.traffic.prefixes import BlockIds
from planner.traffic.workload import (
    Requests,
    joined_blocks,
    resampled_orders,
    window_blocks,
)
from tests.conftest import bundled_catalog, code_completion_load

ROUTES = Path(__file__).resolve().parents[2] / "examples" / "routes.csv"


@pytest.fixture(scope="module")
def code_load():
    """The code-completion route at its log's own rate, its load and the vLLM FP8 H200 curve."""
    return code_completion_load(peak_to_mean=1.0)


def test_window_blocks_cut_the_load_as_the_verdict_counts_windows_and_join_back():
    t = np.array([5.0, 10.0, 70.0, 200.0])
    load = Requests(t, np.array([1, 2, 3, 4]), np.array([5, 6, 7, 8]), "test")
    held, blocks = window_blocks(load, 60.0)
    assert held.tolist() == [0, 1, 3]  # the quiet window 2 is left out
    assert [b.arrival_s.tolist() for b in blocks] == [[0.0, 5.0], [5.0], [15.0]]
    joined = joined_blocks(blocks, 60.0)
    np.testing.assert_allclose(joined.arrival_s, [0.0, 5.0, 65.0, 135.0])
    np.testing.assert_array_equal(joined.input_len, [1, 2, 3, 4])
    with pytest.raises(InputError, match="window_s"):
        window_blocks(load, 0.0)


def test_windows_carry_their_block_ids_in_the_order_they_are_joined():
    """A load with prefix structure: each window keeps its requests' block ids, and windows joined in another
    order (a resampled hour) carry them in that order."""
    t = np.array([5.0, 10.0, 70.0, 200.0])
    ids = BlockIds.of([[0, k + 1] for k in range(4)], 512)
    load = Requests(t, np.array([600, 700, 800, 900]), np.array([5, 6, 7, 8]), "test", ids)
    _, blocks = window_blocks(load, 60.0)
    assert [[a.tolist() for a in b.blocks.hash_ids] for b in blocks] == [[[0, 1], [0, 2]], [[0, 3]], [[0, 4]]]
    joined = joined_blocks([blocks[2], blocks[0]], 60.0)
    assert [a.tolist() for a in joined.blocks.hash_ids] == [[0, 4], [0, 1], [0, 2]]
    assert joined_blocks([blocks[0], Requests(np.zeros(1), np.ones(1), np.ones(1), "cold")], 60.0).blocks is None


def test_resampled_orders_are_fixed_by_the_seed_and_draw_every_window():
    a, b = resampled_orders(10, 300, seed=0), resampled_orders(10, 300, seed=0)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (300, 10) and set(np.unique(a)) == set(range(10))
    assert not np.array_equal(a, resampled_orders(10, 300, seed=1))


def carried_over_load() -> Requests:
    """Two windows that each hold on an idle replica, where the second breaks behind the first: 600 short
    requests, then 28 long prompts in the first window's last second, whose prefill the next window waits for."""
    t = np.concatenate([np.linspace(0.5, 50, 600), np.linspace(59.0, 59.9, 28), 60 + np.linspace(0.2, 20, 40)])
    inputs = np.concatenate([np.full(600, 500), np.full(28, 6000), np.full(40, 500)])
    return Requests(t, inputs, np.full(t.size, 50), "two windows")


def end_to_end_holding(curve, load, replicas, targets, hours, seed) -> int:
    """How many drawn hours hold when each is simulated end to end and judged by the one verdict."""
    _, blocks = window_blocks(load, targets.window_s)
    held = 0
    for order in resampled_orders(len(blocks), hours, seed):
        hour = joined_blocks([blocks[b] for b in order], targets.window_s)
        result = predict(curve, Fleet(hour, replicas)).results[0]
        held += judge(result.arrival_s, result.ttft_s, result.tpot_s, result.e2e_s, targets,
                      origin_s=0.0).holds_every_window
    return held


@pytest.mark.parametrize("case", ["code log, 3 replicas", "code log, 5 replicas", "carried over, 1 replica"])
def test_the_shortcut_gives_the_verdict_of_whole_hours_simulated_end_to_end(code_load, case):
    """Each window judged behind the window before it only (the module's shortcut) = the drawn hour simulated
    end to end through the fleet tier and judged by the one verdict."""
    route, load, curve = code_load
    targets = route.targets(0.99)
    replicas = int(case.split(", ")[1].split()[0])
    if case.startswith("carried"):
        load = carried_over_load()
        _, alone = window_blocks(load, 60.0)[1]
        assert resampled_hours(curve, alone, replicas, targets, hours=1).holding == 1  # holds on an idle replica
    fast = resampled_hours(curve, load, replicas, targets, hours=12, seed=3)
    assert fast is not None and fast.hours == 12
    assert fast.holding == end_to_end_holding(curve, load, replicas, targets, 12, 3)
    if case.startswith("carried"):
        assert 0 < fast.holding < 12  # the hours with the long prompts right before the second window break


def test_more_replicas_hold_at_least_as_many_hours_and_the_plans_fleet_holds_them_all(code_load):
    route, load, curve = code_load
    targets = route.targets(0.99)
    held = [resampled_hours(curve, load, n, targets).holding for n in (2, 3, 6)]
    assert held[0] <= held[1] <= held[2]
    assert held[0] < resampled.RESAMPLED_HOURS  # two replicas break the busiest minutes in some hours
    assert held[2] == resampled.RESAMPLED_HOURS


def test_no_resampling_without_windows_or_latency_targets(code_load):
    route, load, curve = code_load
    whole_run = route.targets(0.99).__class__(ttft_ms=300.0, tpot_ms=30.0, window_s=0.0)
    assert resampled_hours(curve, load, 3, whole_run) is None
    assert resampled_hours(curve, load, 3, whole_run.__class__(e2e_ms=5000.0)) is None


def test_the_plan_states_the_robustness_figure_the_bursts_and_the_three_sizings_in_its_files(tmp_path):
    """Issue 34: the resampled-hours figure, the burst descriptors and the autoscaled option are plan columns, in
    the CSV and the workbook as in the CLI line."""
    import io

    import openpyxl

    from planner.planning.exports import minutes_frame, workbook_bytes
    from planner.planning.plan import make_plan
    from planner.planning.plan_files import plan_csv_text
    from planner.sizing.assumptions import Assumptions

    routes = load_routes(ROUTES)
    code = routes[routes["name"] == "code-completion"].reset_index(drop=True)
    result = make_plan(code, bundled_catalog(), Assumptions(), check_by_simulation=True)
    (row,) = result.rows
    assert row.resampled_hours == resampled.RESAMPLED_HOURS
    assert row.holds_in_resampled_hours is not None and 0 <= row.holds_in_resampled_hours <= row.resampled_hours
    assert row.load_bursts.startswith("peak 10 s ") and "dispersion at 60 s" in row.load_bursts
    assert row.autoscaled_floor is not None and row.autoscaled_floor <= (row.replicas or 0)
    line = row.window_verdict()
    assert f"in {row.holds_in_resampled_hours} of 200 hours" in line and row.load_bursts in line
    header = plan_csv_text(result).splitlines()[0].split(",")
    book = openpyxl.load_workbook(io.BytesIO(workbook_bytes(result)))
    sheet_header = [c.value for c in next(book["plan"].iter_rows(max_row=1))]
    for column in ("resampled_hours", "holds_in_resampled_hours", "load_bursts", "autoscaled_floor",
                   "autoscaled_usd_per_month", "autoscaled_windows_in_breach", "whole_log_replicas"):
        assert column in header and column in sheet_header, column
    minutes = minutes_frame(result)  # the timeline, minute by minute (plan --minutes-out, the workbook's sheet)
    mine = minutes[minutes["recommended"]]
    assert len(mine) == row.windows and int(mine["breach"].sum()) == row.windows_in_breach
    assert mine["ttft_ms"].max() == pytest.approx(row.ttft_worst_window_ms, abs=0.1)
    assert minutes["replicas"].min() <= (row.whole_log_replicas or row.replicas)
    assert book["minutes"].max_row == len(minutes) + 1
