"""make_plan(check_by_simulation=True): online fleets are checked by simulating the route's traffic."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.assumptions import Assumptions
from planner.plan import load_inputs, load_routes, make_plan

ROUTES = Path(__file__).resolve().parents[2] / "examples" / "routes.csv"


@pytest.fixture(scope="module")
def bundled():
    return load_inputs(), load_routes(ROUTES)


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
    differs = code[code.sim_replicas != code.analytical_replicas]
    for _, option in differs.iterrows():
        assert "replayed arrivals" in option.notes and f"simulation {int(option.sim_replicas)}" in option.notes
    before = analytical[analytical.route == "code-completion"].set_index("option").loc[code.option, "replicas"].to_numpy()
    assert (code.analytical_replicas.to_numpy() == before).all()


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


def test_simulate_cli_replays_the_routes_own_log_like_plan_does(tmp_path):
    import subprocess
    import sys

    plan = tmp_path / "plan.csv"
    root = ROUTES.parents[1]
    run = lambda *a: subprocess.run([sys.executable, "-m", "planner", *a], cwd=root, capture_output=True,  # noqa: E731
                                    text=True, timeout=300)
    assert run("plan", "--routes", str(ROUTES), "--out", str(plan)).returncode == 0
    out = run("simulate", "--routes", str(ROUTES), "--plan", str(plan))
    assert out.returncode == 0, out.stderr
    code = out.stdout.split("code-completion", 1)[1].split("\n", 2)
    assert "replayed 8819 requests" in code[0] and "attainment 99" in code[1]
