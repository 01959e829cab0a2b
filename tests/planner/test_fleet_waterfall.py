"""$ by lever (planner.planning.fleet.lever_waterfall): route by route, engineering once, then each enabled lever
added in order, every step a make_fleet total on one route-by-route plan."""

from __future__ import annotations

import pandas as pd
import pytest

from planner.planning import fleet
from planner.planning.fleet import WATERFALL_COLUMNS, lever_steps, lever_waterfall, make_fleet
from planner.planning.fleet_units import ALL_LEVERS, NO_LEVERS, Levers
from planner.planning.plan import make_plan
from planner.planning.route_table import load_routes
from planner.sizing.assumptions import Assumptions
from tests.conftest import REPO, bundled_catalog

# Dollars: totals are rounded to cents, so two totals of one fleet agree to within a cent.
CENT = 0.01


@pytest.fixture(scope="module")
def inputs():
    """The bundled catalog and example routes without the 70b route (three routes: fast to solve)."""
    routes = load_routes(REPO / "examples" / "routes.csv")
    routes = routes[routes["model"] != "llama-3.1-70b"].reset_index(drop=True)
    catalog = bundled_catalog()
    baseline = make_plan(routes, catalog, Assumptions(), check_by_simulation=True)
    return routes, catalog, baseline


def plan_total(baseline) -> float:
    ok = baseline.plan[baseline.plan["status"] == "ok"]
    return round(float(ok["total_usd_per_month"].sum()), 2)


@pytest.mark.parametrize("levers, steps", [
    (ALL_LEVERS, ["route by route", "engineering once", "+ share", "+ mix", "+ autoscale", "+ pricing"]),
    (Levers(), ["route by route", "engineering once", "+ share", "+ pricing"]),
    (Levers(share=False, mix=False, autoscale=True, pricing=False), ["route by route", "engineering once",
                                                                     "+ autoscale"]),
    (NO_LEVERS, ["route by route", "engineering once"]),
])
def test_steps_are_in_lever_order_from_the_route_by_route_total(inputs, levers, steps):
    routes, catalog, baseline = inputs
    table = lever_waterfall(routes, catalog, Assumptions(), levers, baseline, check=False)
    assert list(table.columns) == list(WATERFALL_COLUMNS)
    assert list(table["step"]) == steps
    assert table["usd_per_month"].iloc[0] == pytest.approx(plan_total(baseline), abs=CENT)
    assert pd.isna(table["change_usd_per_month"].iloc[0])
    changes = table["usd_per_month"].diff().iloc[1:]
    assert table["change_usd_per_month"].iloc[1:].to_numpy() == pytest.approx(changes.to_numpy(), abs=CENT)


@pytest.mark.parametrize("levers", [ALL_LEVERS, Levers()])
def test_the_last_step_is_the_fleet_with_every_enabled_lever(inputs, levers):
    routes, catalog, baseline = inputs
    table = lever_waterfall(routes, catalog, Assumptions(), levers, baseline, check=False)
    alone = make_fleet(routes, catalog, Assumptions(), levers, baseline=baseline, check=False)
    assert table["usd_per_month"].iloc[-1] == pytest.approx(alone.summary["total_usd_per_month"], abs=CENT)
    first_lever = make_fleet(routes, catalog, Assumptions(), NO_LEVERS, baseline=baseline, check=False)
    assert table["usd_per_month"].iloc[1] == pytest.approx(first_lever.summary["total_usd_per_month"], abs=CENT)


def test_engineering_once_never_costs_more_than_route_by_route(inputs):
    """The route-by-route plan is one of the no-lever program's solutions, with its engineering counted once."""
    routes, catalog, baseline = inputs
    table = lever_waterfall(routes, catalog, Assumptions(), NO_LEVERS, baseline, check=True)
    assert table["usd_per_month"].iloc[1] <= table["usd_per_month"].iloc[0] + CENT


def test_the_steps_add_each_lever_to_the_ones_before():
    steps = lever_steps(Levers(share=True, mix=False, autoscale=True, pricing=True))
    assert [(name, levers) for name, levers in steps] == [
        ("engineering once", NO_LEVERS),
        ("+ share", Levers(share=True, mix=False, autoscale=False, pricing=False)),
        ("+ autoscale", Levers(share=True, mix=False, autoscale=True, pricing=False)),
        ("+ pricing", Levers(share=True, mix=False, autoscale=True, pricing=True)),
    ]


def test_without_a_baseline_the_route_by_route_plan_is_made_once(inputs, monkeypatch):
    routes, catalog, _ = inputs
    made = []

    def counted(*args, **kwargs):
        made.append(args[0])
        return make_plan(*args, **kwargs)

    monkeypatch.setattr(fleet, "make_plan", counted)
    # No pricing lever: no batch route is re-planned at spot prices, so every make_plan is a route-by-route plan.
    table = lever_waterfall(routes, catalog, Assumptions(), Levers(share=True, pricing=False), None, check=False)
    assert len(table) == 3 and len(made) == 1
