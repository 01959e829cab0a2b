"""The fleet CSV is formula-safe like the plan CSV; the fleet check reuses a simulation it already ran."""

from __future__ import annotations

import csv
import io
from collections import OrderedDict

import pandas as pd
import pytest

from fleetfacts.schema import unescape_formula
from planner.planning import fleet_check
from planner.planning.catalog import load_inputs
from planner.planning.fleet import fleet_csv_text, make_fleet
from planner.planning.fleet_check import Stream, attainment
from planner.planning.fleet_units import NO_LEVERS
from planner.planning.route_table import validate_routes
from planner.sizing.assumptions import Assumptions
from planner.traffic.routes import Route
from tests.conftest import is_number
from tests.planner.fakes import online_route, write_synthetic_inputs
from tests.planner.sim_fakes import SimCurve

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def test_the_fleet_csv_neutralises_a_route_name_that_starts_a_formula(tmp_path):
    files = write_synthetic_inputs(tmp_path)
    catalog = load_inputs(files["profiles"], files["prices"], files["ops"])
    name = '=HYPERLINK("http://example.com","x")'
    result = make_fleet(pd.DataFrame([online_route(name)]), catalog, Assumptions(), NO_LEVERS, check=False)
    rows = list(csv.DictReader(io.StringIO(fleet_csv_text(result))))
    assert rows, "the fleet has no deployment"
    for cell in (c for row in rows for c in row.values()):
        assert not cell.startswith(FORMULA_STARTS) or is_number(cell), cell
    assert unescape_formula(rows[0]["routes"]).startswith(name)


def _route(**values) -> Route:
    return Route.from_row(validate_routes(pd.DataFrame([online_route(rate_rps=5.0, **values)])).iloc[0].to_dict())


REAL_SIMULATION = fleet_check._simulated_checks


@pytest.fixture
def runs(monkeypatch):
    """The simulations actually run (not reused), with an empty memo."""
    ran: list[tuple] = []
    simulate = REAL_SIMULATION

    def counted(*args):
        ran.append(args)
        return simulate(*args)

    monkeypatch.setattr(fleet_check, "_ATTAINED", OrderedDict())
    monkeypatch.setattr(fleet_check, "_simulated_checks", counted)
    return ran


def test_a_repeated_simulation_is_reused_and_equals_a_fresh_one(runs):
    curve, streams = SimCurve(), [Stream(_route(), 5.0)]
    first = attainment(curve, streams, 2)
    first["chat"] = -1.0  # a caller changing its copy does not change the memo
    again = attainment(curve, [Stream(streams[0].route, 5.0)], 2)
    assert len(runs) == 1
    fresh = {name: c.attainment for name, c in REAL_SIMULATION(curve, streams, 2, 0, 0.99).checks.items()}
    assert again == fresh and 0.0 <= again["chat"] <= 1.0


@pytest.mark.parametrize("change", ["replicas", "seed", "curve", "rate"])
def test_a_different_simulation_runs_again(runs, change):
    curve, route = SimCurve(), _route()
    attainment(curve, [Stream(route, 5.0)], 2, 0)
    other = {"replicas": (curve, [Stream(route, 5.0)], 3, 0), "seed": (curve, [Stream(route, 5.0)], 2, 1),
             "curve": (SimCurve(), [Stream(route, 5.0)], 2, 0), "rate": (curve, [Stream(route, 4.0)], 2, 0)}
    attainment(*other[change])
    assert len(runs) == 2


def test_the_memo_keeps_the_most_recent_simulations_only(runs, monkeypatch):
    monkeypatch.setattr(fleet_check, "SIM_MEMO_SIZE", 2)
    curve, route = SimCurve(), _route()
    for replicas in (1, 2, 3):
        attainment(curve, [Stream(route, 5.0)], replicas)
    assert len(fleet_check._ATTAINED) == 2
    attainment(curve, [Stream(route, 5.0)], 1)  # the oldest was dropped: it runs again
    assert len(runs) == 4
