"""Issue 34, item 5: the autoscaled option, a warm floor plus scale-up simulated on the route's one load."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetfacts.errors import InputError
from planner.cli import main
from planner.latency import Fleet, predict
from planner.latency.simulate import simulate
from planner.planning.plan import make_plan
from planner.planning.route_table import load_routes
from planner.sizing import autoscaled as scaler
from planner.sizing.assumptions import Assumptions
from planner.sizing.autoscaled import DETECT_S, SCALE_DOWN_S, SYNC_S, autoscaled, busiest_window_rps, schedule
from planner.sizing.plan_row import plan_frame
from tests.conftest import bundled_catalog, cli_fits_bundled_once, code_completion_load
from ui.answer import sizing_choices

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def code_load():
    """The example's code-completion route, its load and the vLLM FP8 H200 curve."""
    return code_completion_load()


def test_the_autoscaler_adds_replicas_after_the_scale_up_and_gives_them_back_after_the_stabilisation():
    # 1 req/s for 600 s, then 10 req/s for 120 s, then 1 req/s again until 1800 s; one replica carries 2 req/s.
    t = np.concatenate([np.arange(0, 600, 1.0), np.arange(600, 720, 0.1), np.arange(720, 1800, 1.0)])
    plan = schedule(t, floor=1, ceiling=6, replica_rps=2.0, scale_up_s=100.0)
    assert plan.active[0] == (0.0, math.inf)  # the floor is always on
    extra = plan.active[1:]
    assert 1 <= len(extra) <= 5
    first_ask = min(start for start, _ in plan.billed[1:])
    assert 600 < first_ask <= 600 + SYNC_S  # seen at the first decision after the rise
    assert all(start == pytest.approx(asked + 100.0 - DETECT_S)
               for (start, _), (asked, _) in zip(extra, plan.billed[1:], strict=True))
    assert all(until >= 720 + SCALE_DOWN_S - SYNC_S for _, until in extra)  # kept through the stabilisation
    assert all(until < math.inf for _, until in extra)  # and given back once the burst is over
    hours = plan.gpu_replica_hours(1800.0)
    assert 0.5 < hours < 6 * 0.5  # more than the floor alone, less than six replicas all along


def test_replicas_take_arrivals_only_while_they_are_active(code_load):
    _, load, curve = code_load
    t, i, o = load.arrival_s[:600], load.input_len[:600], load.output_len[:600]
    active = [(0.0, math.inf), (t[200], t[400])]
    for router in ("jsq", "round-robin"):
        result = simulate(curve, t, i, o, 2, router, active=active)
        second = result.replica == 1
        assert second.any()
        assert np.all((t[second] >= t[200]) & (t[second] < t[400]))
    with pytest.raises(InputError, match="one .from, until. per replica"):
        simulate(curve, t, i, o, 3, "jsq", active=active)


def test_the_code_route_autoscales_from_a_lower_floor_and_reports_its_own_simulation(code_load):
    route, load, curve = code_load
    targets = route.targets(0.99)
    slow = autoscaled(curve, load, 5, targets, scale_up_s=160.0)
    quick = autoscaled(curve, load, 5, targets, scale_up_s=0.0)
    assert slow is not None and quick is not None and slow.beats_steady
    assert quick.floor is not None and slow.floor is not None and quick.floor <= slow.floor < 5
    assert slow.cost_ratio < 1.0 and slow.check is not None and slow.check.ok
    plan = schedule(load.arrival_s, slow.floor, 5, busiest_window_rps(load, targets.window_s) / 5, 160.0)
    again = predict(curve, Fleet(load, len(plan.active), active=plan.active)).check(targets)
    assert again.windows_in_breach == slow.check.windows_in_breach
    assert again.attainment == pytest.approx(slow.check.attainment)
    lower = schedule(load.arrival_s, slow.floor - 1, 5, busiest_window_rps(load, targets.window_s) / 5, 160.0)
    assert slow.floor == 1 or not predict(curve, Fleet(load, len(lower.active), active=lower.active)) \
        .check(targets).ok or lower.gpu_replica_hours(load.arrival_s[-1]) >= slow.replica_hours


def test_one_replica_cannot_autoscale(code_load):
    route, load, curve = code_load
    one = autoscaled(curve, load, 1, route.targets(0.99), scale_up_s=160.0)
    assert one is not None and not one.beats_steady and "one replica" in one.describe()
    assert scaler.MIN_SAVING > 0


def test_plan_reports_the_autoscaled_option_and_takes_the_scale_up_time(tmp_path, capsys):
    routes = load_routes(EXAMPLES / "routes.csv")
    code = routes[routes["name"] == "code-completion"].assign(log=str(EXAMPLES / "traces/azure_llm_2023_code.csv"))
    routes_csv = tmp_path / "routes.csv"
    code.to_csv(routes_csv, index=False)
    rows = {}
    with cli_fits_bundled_once():
        for scale_up in ("0", "600"):
            out = tmp_path / f"plan-{scale_up}.csv"
            minutes = tmp_path / f"minutes-{scale_up}.csv"
            assert main(["plan", "--routes", str(routes_csv), "--out", str(out), "--scale-up-s", scale_up,
                         "--minutes-out", str(minutes)]) == 0
            assert set(pd.read_csv(minutes)["route"]) == {"code-completion"}
            capsys.readouterr()
            rows[scale_up] = pd.read_csv(out).iloc[0].to_dict()
            saved = json.loads(out.with_suffix(".assumptions.json").read_text())
            assert saved["assumptions"]["scale_up_s"] == float(scale_up)
        assert main(["plan", "--routes", str(routes_csv), "--out", str(tmp_path / "x.csv"), "--scale-up-s", "-1"]) == 2
    quick, slow = rows["0"], rows["600"]
    assert quick["autoscaled_floor"] <= slow["autoscaled_floor"] <= slow["replicas"]
    assert quick["autoscaled_usd_per_month"] < quick["total_usd_per_month"]
    assert "autoscaled from a floor" in quick["notes"] or "cannot beat steady" in quick["notes"]
    if slow["autoscaled_floor"] == slow["replicas"]:
        assert slow["autoscaled_usd_per_month"] == pytest.approx(slow["total_usd_per_month"])
        assert "cannot beat steady" in slow["notes"]



def test_the_app_lists_the_three_sizings_from_the_plan_row():
    routes = load_routes(EXAMPLES / "routes.csv")
    # on the H200 alone, where its autoscaled option beats steady (the H100's FP8 curve needs 4 steady replicas)
    code = routes[routes["name"] == "code-completion"].assign(gpus="h200")
    row = make_plan(code, bundled_catalog(), Assumptions(), check_by_simulation=True).rows[0]
    table = sizing_choices(plan_frame([row]), "code-completion")
    assert list(table["sizing"]) == ["steady (recommended)", "whole-log p-value", "autoscaled"]
    assert table.iloc[0]["replicas"] == str(row.replicas)
    assert table.iloc[1]["$/month"] == f"${row.whole_log_usd_per_month:,.0f}"
    assert table.iloc[2]["replicas"] == f"{row.autoscaled_floor} to {row.replicas}"
    assert table.iloc[2]["windows in breach"] == f"{row.autoscaled_windows_in_breach} of {row.windows}"
    assert sizing_choices(plan_frame([row]), "no-such-route").empty
