"""make_plan(check_by_simulation=True): online fleets are checked by simulating the route's traffic."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from planner.cli import main
from planner.latency import service_time_s
from planner.planning import fleet_check
from planner.planning.plan import make_plan
from planner.planning.route_table import load_routes, validate_routes
from planner.sizing.assumptions import Assumptions
from planner.sizing.options import evaluate_option
from planner.traffic.routes import Route
from planner.traffic.workload import SIM_SERVICE_TIMES, SIM_WARMUP_SERVICE_TIMES
from tests.conftest import bundled_catalog

ROUTES = Path(__file__).resolve().parents[2] / "examples" / "routes.csv"


@pytest.fixture(scope="module")
def bundled():
    return bundled_catalog(), load_routes(ROUTES)


def test_simulated_plan_meets_the_attainment_target_for_every_online_route(bundled):
    inputs, routes = bundled
    plan = make_plan(routes, inputs, Assumptions(), check_by_simulation=True).plan
    online = plan[(plan.traffic == "online") & (plan.status == "ok")]
    assert len(online) >= 2
    assert (online.sim_attainment >= 0.99).all()
    assert (online.replicas == online.sim_replicas).all()


def test_trace_route_replays_its_log_and_states_both_sizings_when_they_differ(bundled):
    inputs, routes = bundled
    analytical = make_plan(routes, inputs, Assumptions(), check_by_simulation=False).options
    simulated = make_plan(routes, inputs, Assumptions(), check_by_simulation=True).options
    code = simulated[(simulated.route == "code-completion") & simulated.sim_replicas.notna()]
    assert len(code) >= 1
    differs = code[code.sim_replicas != code.sized_replicas]
    for _, option in differs.iterrows():
        assert "the route's log (8819 requests" in option.notes
        assert f"the fleet simulation (least-outstanding) needs {int(option.sim_replicas)}" in option.notes
    before = analytical[analytical.route == "code-completion"].set_index("option").loc[code.option, "replicas"].to_numpy()
    assert (code.sized_replicas.to_numpy() == before).all()


def test_a_stricter_attainment_target_never_needs_fewer_gpus(bundled):
    inputs, routes = bundled
    loose = make_plan(routes, inputs, Assumptions(slo_attainment=0.9), check_by_simulation=True).plan
    strict = make_plan(routes, inputs, Assumptions(slo_attainment=0.999), check_by_simulation=True).plan
    assert strict.gpus.sum() >= loose.gpus.sum()


def test_batch_route_gets_a_simulated_deadline_feasible_fleet(bundled):
    inputs, routes = bundled
    plan = make_plan(routes, inputs, Assumptions(), check_by_simulation=True).plan
    batch = plan[plan.traffic == "batch"].iloc[0]
    assert batch.status == "ok" and batch.sim_replicas == batch.replicas
    hours = float(batch.notes.split("finish in ")[1].split(" h")[0])
    deadline = float(routes.set_index("name").loc[batch.route, "deadline_hours"])
    assert 0 < hours <= deadline


def test_simulate_cli_replays_the_routes_own_log_like_plan_does(tmp_path, capsys, bundled_fitted_once):
    plan = tmp_path / "plan.csv"
    assert main(["plan", "--routes", str(ROUTES), "--out", str(plan)]) == 0
    capsys.readouterr()
    assert main(["simulate", "--routes", str(ROUTES), "--plan", str(plan)]) == 0
    code = capsys.readouterr().out.split("code-completion", 1)[1]
    head, slo = code.split("\n", 2)[:2]
    assert "the route's log (8819 requests" in head and "in every 60 s window" in slo
    assert "SLO verdict: holds every 60 s window" in code.split("assistant-70b")[0]


# ---------------------------------------------------------------- issue 14 item 1: steady state, cap, scale

def _high_rate_routes(rate_rps: float) -> pd.DataFrame:
    """The issue's repro: one online llama-3.1-8b route, peak 2x, 500/250 tokens, TTFT 500 ms / TPOT 50 ms."""
    return pd.DataFrame([{"name": "hot", "model": "llama-3.1-8b", "traffic": "online", "rate_rps": rate_rps,
                          "peak_to_mean": 2.0, "input_len_mean": 500.0, "output_len_mean": 250.0,
                          "ttft_slo_ms": 500.0, "tpot_slo_ms": 50.0}])


@pytest.mark.parametrize("rate_rps", [1000.0, 1e5])
def test_a_high_rate_route_is_never_simulated_below_the_screened_count_or_above_the_cap(bundled, rate_rps):
    """At these rates the screen's count is the utilisation cap's floor, which the fleet search never goes below.
    (How long a 1e5 req/s route takes is benchmarks/plan_scale.py's to say, not a test's.)"""
    inputs, _ = bundled
    a = Assumptions()
    simulated = make_plan(_high_rate_routes(rate_rps), inputs, a, check_by_simulation=True)
    assert simulated.plan.iloc[0].status == "ok"
    checked = simulated.options[simulated.options.sim_replicas.notna() & simulated.options.feasible]
    assert len(checked) >= 1
    assert (checked.sim_replicas >= checked.sized_replicas).all()  # each option's own screened count
    assert (checked.peak_utilisation <= a.utilisation_cap + 1e-9).all()


def test_the_check_fails_an_overloaded_fleet_because_it_simulates_many_service_times(bundled):
    inputs, _ = bundled
    route = Route.from_row(validate_routes(_high_rate_routes(1000.0)).to_dict("records")[0])
    option = next(o for o in (evaluate_option(route, c, inputs.price_book, inputs.ops_book, Assumptions())
                              for c in inputs.curves.values() if c.key.model == route.model) if o.feasible)
    # Half the fleet the load needs: at 2000 req/s peak a queue grows every service time.
    overloaded = max(1, math.floor(option.replicas * option.sizing.peak_utilisation / 2))
    check = fleet_check.checks(option.curve, [fleet_check.Stream(route, route.peak_rps)], overloaded)[route.name]
    span = float(check.end_s[-1] - check.start_s[0])  # judged after the warm-up
    measured = SIM_SERVICE_TIMES - SIM_WARMUP_SERVICE_TIMES
    assert span >= measured * service_time_s(option.curve, route.input_len, route.output_len) * 0.99
    assert not check.ok and check.attainment < 0.5


def test_a_fleet_too_small_by_the_curves_own_best_rate_fails_the_check_whatever_share_is_simulated(bundled):
    """Above SIM_MAX_REPLICAS replicas the check simulates a subset fed its share; when the streams are too busy even
    for that, it halves the subset, and the requests must then be shared among the halved subset too (they were
    thinned for 8 replicas and spread over 16, so 17-20 replicas of a fleet needing 34 passed)."""
    inputs, _ = bundled
    route = Route.from_row(validate_routes(_high_rate_routes(1000.0)).to_dict("records")[0])
    curve = next(c for c in inputs.curves.values() if c.key.model == route.model)
    slots = curve.max_num_seqs
    best = slots / curve.step_time_s(slots, route.input_len + route.output_len / 2)  # every slot decoding
    needed = route.peak_rps * route.output_len / best
    for replicas in sorted({17, 20, math.floor(0.7 * needed)}):
        if replicas < needed:
            check = fleet_check.checks(curve, [fleet_check.Stream(route, route.peak_rps)], replicas)[route.name]
            assert not check.ok, (replicas, needed)
