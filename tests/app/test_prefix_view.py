"""The prefix-reuse view (ui.prefix_view, the "Prefix reuse" tab) on the bundled prefix example."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from planner.latency import ROUTERS
from planner.planning.plan import make_plan
from planner.planning.route_table import load_routes
from planner.sizing.assumptions import Assumptions
from tests.conftest import bundled_catalog
from ui import prefix_view

REPO = Path(__file__).resolve().parents[2]
PREFIX_ROUTES = REPO / "examples" / "routes-prefix.csv"
HIT_RATE_TOLERANCE = 0.005  # half a point: the view simulates the plan's own load, fleet and router
WIDER_FLEET = 3  # replicas at which the routers part (the example's plan runs one, where they all agree)


@pytest.fixture(scope="module")
def planned():
    """(routes rows by name, checked plan rows by route) of the bundled prefix example."""
    table = load_routes(PREFIX_ROUTES)
    table["log"] = [str(REPO / "examples" / log) if isinstance(log, str) and log else log for log in table["log"]]
    plan = make_plan(table, bundled_catalog(), Assumptions(), check_by_simulation=True).plan
    return ({r["name"]: r for r in table.to_dict("records")}, {r["route"]: r for r in plan.to_dict("records")})


@pytest.mark.parametrize("route", ["chat-prefix", "chat-system-prompt"])
def test_the_view_simulates_the_plans_hit_rate_behind_each_router(planned, route):
    rows, plan = planned
    view = prefix_view.route_prefix(rows[route], plan[route], bundled_catalog().curves)
    assert view is not None and view.replicas == plan[route]["replicas"]
    hits = dict(view.hit_rates)
    assert set(hits) == set(ROUTERS)
    assert abs(hits["least-outstanding"] - plan[route]["prefix_hit_rate_pred"]) <= HIT_RATE_TOLERANCE
    assert hits["prefix-affinity"] >= hits["round-robin"]
    assert 0 < view.lru_share <= view.reuse_share <= 1 and view.kv_cache_tokens > 0
    assert view.other is not None and view.other.router == "prefix-affinity" and view.other.replicas is not None
    table = prefix_view.hit_rate_table(view)
    assert table["planned"].sum() == 1 and table.loc[table["planned"], "cache"].str.startswith(view.plan_router).all()
    assert (table["prefill_tok_per_s_saved"] <= view.prompt_tok_per_s).all()
    assert prefix_view.hit_rate_chart(table).to_dict()["layer"]
    assert f"{100 * view.plan_hit_rate:.1f}%" in prefix_view.router_text(view)


def test_prefix_affinity_keeps_the_logs_reuse_where_the_others_split_it(planned):
    rows, plan = planned
    view = prefix_view.route_prefix(rows["chat-prefix"], plan["chat-prefix"], bundled_catalog().curves, WIDER_FLEET)
    assert view is not None
    hits = dict(view.hit_rates)
    assert hits["prefix-affinity"] > hits["round-robin"] and hits["prefix-affinity"] > hits["least-outstanding"]
    assert hits["prefix-affinity"] <= view.reuse_share + HIT_RATE_TOLERANCE


def test_a_route_without_a_log_or_shared_prefix_has_no_prefix_view(planned):
    rows, plan = planned
    row = {**rows["chat-system-prompt"], "shared_prefix_tokens": 0}
    assert not prefix_view.declares_prefixes(row)
    assert prefix_view.route_prefix(row, plan["chat-system-prompt"], bundled_catalog().curves) is None


def test_the_other_routers_fleet_is_read_from_the_plans_notes():
    priced = prefix_view.other_router("x; behind prefix-affinity: 2 replicas, $3,640/month, prefix hit rate 81.4%; y")
    assert priced == prefix_view.OtherRouter("prefix-affinity", 2, 3640.0, pytest.approx(0.814))
    refused = prefix_view.other_router("behind least-outstanding: simulation: no fleet up to 8 replicas meets the SLO")
    assert refused is not None and refused.replicas is None and refused.reason.startswith("simulation")
    assert prefix_view.other_router("nothing about routers") is None


def test_the_prefix_reuse_tab_renders_for_the_prefix_example():
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    at.file_uploader(key="routes_upload").set_value(("routes-prefix.csv", PREFIX_ROUTES.read_bytes(), "text/csv")).run()
    at.session_state["chart_tab"] = "Prefix reuse"
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.selectbox(key="prefix_route").value == "chat-prefix"
    charts = at.get("vega_lite_chart")
    assert len(charts) == 1 and "hit_rate" in json.dumps(json.loads(charts[0].proto.spec))
    text = " ".join(m.value for m in at.markdown)
    assert "repeat an earlier request's prefix" in text and "behind prefix-affinity" in text.lower()
    assert prefix_view.NO_HOST_TIER_TEXT in text  # the default assumptions price no host KV tier
    at.number_input(key="prefix_tier_chat-prefix").set_value(64.0).run()  # the what-if tier
    assert not at.exception and not at.error, [e.value for e in at.error]
    what_if = " ".join(m.value for m in at.markdown)
    assert "With a 64 GiB host KV tier per replica (a what-if here" in what_if and "1 replica behind" in what_if
    at.selectbox(key="prefix_route").select("chat-system-prompt").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "1,800-token shared prefix" in " ".join(m.value for m in at.markdown)
