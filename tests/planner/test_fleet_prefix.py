"""`planner fleet` simulates a route's prefix structure (issue 49): the fleet check's prefix caches are the plan's
for the same fleet, two routes never share a block, and the fleet CSV reports the hit rate."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from planner.latency import DEFAULT_ROUTER
from planner.planning import fleet_check
from planner.planning.catalog import candidate_curves
from planner.planning.fleet import make_fleet
from planner.planning.fleet_check import Stream
from planner.planning.fleet_units import NO_LEVERS
from planner.planning.plan import make_plan
from planner.planning.route_table import load_routes
from planner.sizing import sizing
from planner.sizing.assumptions import Assumptions
from planner.sizing.options import option_name
from planner.traffic.routes import Route
from planner.traffic.workload import route_load, route_log_load
from tests.conftest import bundled_catalog

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# The example four times as busy (its log compressed): several replicas, so the fleet is more than one cache.
BUSY = 4.0
# Hit rates within half a point (the brief's tolerance; the same simulation gives the same figure).
HIT_RATE_POINTS = 0.005


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """chat-prefix alone, at its own rate and BUSY times as busy, planned on vLLM H100 (one option)."""
    folder = tmp_path_factory.mktemp("fleet-prefix")
    shutil.copytree(ROOT / "examples" / "traces", folder / "traces")
    table = pd.read_csv(ROOT / "examples" / "routes-prefix.csv")
    one = table[table["name"] == "chat-prefix"].assign(gpus="h100", engines="vllm")
    busy = one.assign(name="chat-prefix-busy", peak_to_mean=BUSY)
    pd.concat([one, busy]).to_csv(folder / "routes.csv", index=False)
    routes = load_routes(folder / "routes.csv")
    catalog = bundled_catalog()
    return routes, catalog, make_plan(routes, catalog, check_by_simulation=True)


def _route_and_curve(routes, catalog, row):
    route = Route.from_row(routes[routes["name"] == row.route].iloc[0].to_dict())
    curves, _ = candidate_curves(route, catalog)
    curve = next(c for c in curves if option_name(c.key.engine, c.key.engine_version, c.key.gpu, c.key.precision,
                                                  c.key.tp, c.key.config) == row.option)
    return route, curve


@pytest.mark.parametrize("name", ["chat-prefix", "chat-prefix-busy"])
def test_the_fleet_check_finds_the_plans_hit_rate_for_the_same_fleet(planned, name):
    routes, catalog, plan = planned
    row = next(r for r in plan.rows if r.route == name)
    assert row.ok and 0.0 < row.prefix_hit_rate_pred < 1.0
    route, curve = _route_and_curve(routes, catalog, row)
    fleet = fleet_check.prefix_hit_rate(curve, [Stream(route, route.peak_rps)], row.replicas)
    # The plan's own simulation of this fleet behind the fleet check's router (least-outstanding).
    load = route_load(route, *route_log_load(route))
    plans = sizing.fleet_latency(curve, route, row.replicas, load, DEFAULT_ROUTER).prefix_hit_rate
    assert fleet == pytest.approx(plans, abs=HIT_RATE_POINTS)
    if row.router == DEFAULT_ROUTER:
        assert fleet == pytest.approx(row.prefix_hit_rate_pred, abs=HIT_RATE_POINTS)


def test_two_routes_on_one_deployment_never_share_a_block(planned):
    """Two routes replaying the same log: their block ids are kept apart, so neither hits the other's prompts
    (sharing them would find nearly every prompt cached): twice the replicas for twice the traffic find no more
    than one route on its own fleet."""
    routes, catalog, plan = planned
    row = next(r for r in plan.rows if r.route == "chat-prefix")
    route, curve = _route_and_curve(routes, catalog, row)
    twin = Route.from_row({**routes[routes["name"] == "chat-prefix"].iloc[0].to_dict(), "name": "twin"})
    streams = [Stream(route, route.peak_rps), Stream(twin, twin.peak_rps)]
    merged = fleet_check._requests(curve, streams, 2 * row.replicas, 0)
    assert merged.requests.blocks is not None
    ids = [set().union(*(set(merged.requests.blocks.hash_ids[k].tolist()) for k in (merged.owner == j).nonzero()[0]))
           for j in (0, 1)]
    assert ids[0] and ids[1] and not ids[0] & ids[1]
    both = fleet_check.prefix_hit_rate(curve, streams, 2 * row.replicas)
    assert 0.0 < both <= row.prefix_hit_rate_pred + HIT_RATE_POINTS


def test_a_route_without_prefix_data_has_no_hit_rate(planned):
    routes, catalog, plan = planned
    row = next(r for r in plan.rows if r.route == "chat-prefix")
    _, curve = _route_and_curve(routes, catalog, row)
    cold = Route.from_row({"name": "cold", "model": "llama-3.1-8b", "traffic": "online", "rate_rps": 0.5,
                           "input_len_mean": 500.0, "output_len_mean": 200.0, "ttft_slo_ms": 1000.0})
    assert math.isnan(fleet_check.prefix_hit_rate(curve, [Stream(cold, 0.5)], 1))


def test_the_fleet_csv_reports_the_kept_routes_hit_rate(planned):
    routes, catalog, plan = planned
    fleet = make_fleet(routes, catalog, levers=NO_LEVERS, baseline=plan)
    by_route = {str(d["routes"]).rsplit(" ", 1)[0]: d for d in fleet.deployments.to_dict("records")}
    for row in plan.rows:
        assert by_route[row.route]["prefix_hit_rate_pred"] == pytest.approx(row.prefix_hit_rate_pred, abs=1e-4)
        assert by_route[row.route]["router"] == row.router  # a kept option: its plan row's router and host tier
        assert by_route[row.route]["host_kv_gib"] == row.host_kv_gib


def test_the_fleet_check_routes_behind_the_router_it_is_given(planned):
    # The busy route on 4 replicas: affinity keeps each conversation's prefix on one replica's cache, so it finds
    # more cached than round robin, which spreads a conversation's turns over all four (the same seeded arrivals).
    routes, catalog, plan = planned
    row = next(r for r in plan.rows if r.route == "chat-prefix-busy")
    route, curve = _route_and_curve(routes, catalog, row)
    streams = [Stream(route, route.peak_rps)]
    assert fleet_check.carries_prefixes(streams)
    rates = {router: fleet_check.prefix_hit_rate(curve, streams, 4, router=router)
             for router in ("round-robin", "prefix-affinity")}
    assert rates["prefix-affinity"] > rates["round-robin"] + 0.02


def test_a_shared_deployment_names_its_router_and_prices_the_other_and_a_host_tier():
    routes = load_routes(ROOT / "examples" / "routes-prefix.csv")
    routes["log"] = [str(ROOT / "examples" / log) if isinstance(log, str) and log else log for log in routes["log"]]
    fleet = make_fleet(routes, bundled_catalog(), assumptions=Assumptions(host_kv_gib=64.0))
    shared = fleet.deployments[fleet.deployments["kind"] == "shared"]
    assert len(shared) == 1
    row = shared.iloc[0]
    assert row["router"] in ("least-outstanding", "prefix-affinity") and row["host_kv_gib"] in (0.0, 64.0)
    other = "prefix-affinity" if row["router"] == "least-outstanding" else "least-outstanding"
    assert f"behind {other}: " in row["notes"]
    assert "64 GiB host KV tier per replica (measured once, on an H100)" in row["notes"]
