"""What a plan says beyond its choice (issue 15 §3.4, §3.9, §3.10, §4): ranges consistent with
`validate`, break-even only where it means something, pre-release builds held back, totals that
say what they cover."""

from __future__ import annotations

import dataclasses
import math

import pytest

from planner.engine.curves import GroupKey, leave_one_out
from planner.planning.catalog import is_prerelease
from planner.planning.exports import FLEET, baseline_diff, plan_totals_table
from planner.planning.plan import breakeven, make_plan, plan_coverage, plan_ranges
from planner.planning.route_table import load_routes
from planner.sizing.assumptions import Assumptions
from planner.sizing.options import NO_COST, Option
from planner.sizing.plan_row import PlanRow
from tests.conftest import REPO, bundled_catalog

EXAMPLE = REPO / "examples" / "routes.csv"


@pytest.fixture(scope="module")
def bundled():
    return bundled_catalog()


@pytest.fixture(scope="module")
def example_result(bundled):
    return make_plan(load_routes(EXAMPLE), bundled)


@pytest.fixture(scope="module")
def example_plan(example_result):
    return example_result.plan


@pytest.mark.parametrize("version,pre", [("0.20+main", True), ("1.0rc1", True), ("0.21.dev3", True),
                                         ("0.26.0", False), ("1.0", False), ("not-a-version", True)])
def test_prerelease_versions(version, pre):
    assert is_prerelease(version) is pre


def test_prerelease_builds_are_recommended_only_when_allowed(bundled, example_plan):
    ok = example_plan[example_plan["status"] == "ok"]
    assert not any(is_prerelease(v) for v in ok["engine_version"]), ok["engine_version"].tolist()
    assert ok["notes"].str.contains("pre-release engine build").any()
    held = make_plan(load_routes(EXAMPLE), bundled).options
    assert not any(is_prerelease(v) for v in held["engine_version"])
    allowed = make_plan(load_routes(EXAMPLE), bundled, Assumptions(allow_prerelease=True)).options
    assert any(is_prerelease(v) for v in allowed["engine_version"]), "nothing to hold back in the data"


def test_plan_intervals_are_never_tighter_than_leave_one_out(bundled, example_plan):
    from planner.engine.physics_prior import physics_priors
    loo = leave_one_out(bundled.profiles_df, physics_priors(bundled.profiles_df)).set_index("group")["max_err_pct"] / 100
    checked = 0
    for r in example_plan[example_plan["status"] == "ok"].to_dict("records"):
        key = next(k for k in bundled.curves if (k.engine, k.engine_version, k.gpu, k.precision, k.tp) ==
                   (r["engine"], r["engine_version"], r["gpu"], r["precision"], r["tp"]) and k.model in
                   set(load_routes(EXAMPLE)["model"]) and (k.config or "default") == r["engine_config"])
        mid = r["replica_output_tok_per_s"]
        assert r["gpus_low"] <= r["gpus"] <= r["gpus_high"]
        assert r["total_usd_per_month_low"] <= r["total_usd_per_month"] + 1e-9 <= r["total_usd_per_month_high"] + 2e-9
        if key.label() in loo.index:
            error = loo[key.label()]
            assert r["replica_output_tok_per_s_low"] <= mid * max(0.05, 1 - error) + 1e-6
            assert r["replica_output_tok_per_s_high"] >= mid * (1 + error) - 1e-6
            checked += 1
    assert checked, "no planned option has a leave-one-out error to compare with"


def option(**changes):
    base = {"route": "r", "status": "ok", "traffic": "online", "replicas": 10, "tp": 1,
            "replica_output_tok_per_s": 100.0, "replica_output_tok_per_s_low": 50.0,
            "replica_output_tok_per_s_high": 200.0, "utilisation": 0.5, "gpu_usd_per_month": 1000.0,
            "total_usd_per_month": 1200.0}
    return PlanRow(**{**base, **changes})


def test_a_load_bound_fleet_ranges_with_the_throughput_interval():
    r = plan_ranges(option(), 0.95, Assumptions())
    assert (r["gpus_low"], r["gpus_high"]) == (5, 20)
    assert r["total_usd_per_month_low"] == pytest.approx(200 + 500) and r["total_usd_per_month_high"] == 2200


def test_a_latency_bound_fleet_is_never_shown_smaller():
    r = plan_ranges(option(replicas=3), 0.1, Assumptions())
    assert (r["gpus_low"], r["gpus_high"]) == (3, 3)


def row(engine, version, fixed, per_update):
    """An option of `engine` `version` with only the costs break-even reads (fixed $/month, $ per update)."""
    cost = dataclasses.replace(NO_COST, fixed_usd_per_month=fixed, usd_per_update=per_update)
    key = GroupKey(engine, version, "h100", "llama-3.1-8b", "bf16", 1)
    return Option(None, key, None, None, True, "", 0.5, "", cost)  # type: ignore[arg-type]


def test_break_even_between_engines_and_not_within_one_build():
    u, note = breakeven(row("vllm", "0.26.0", 1000.0, 500.0), row("trtllm", "1.0", 1500.0, 300.0))
    assert u == pytest.approx(2.5) and note == ""
    u, note = breakeven(row("trtllm", "1.0", 1000.0, 500.0), row("trtllm", "1.0", 1500.0, 300.0))
    assert math.isnan(u) and note.startswith("same engine build")
    u, note = breakeven(row("vllm", "0.26.0", 1000.0, 300.0), row("trtllm", "1.0", 1500.0, 500.0))
    assert math.isnan(u) and note.startswith("never")


def test_totals_say_what_they_cover(bundled):
    routes = load_routes(EXAMPLE)
    routes.loc[routes["name"] == "chat", "tpot_slo_ms"] = 0.5
    result = make_plan(routes, bundled)
    plan = result.plan
    assert plan_coverage(result.rows) == "3 of 4 routes; chat infeasible"
    totals = plan_totals_table(result.rows).set_index("route")
    assert totals.loc[FLEET, "status"] == "3 of 4 routes; chat infeasible"
    ok = plan[plan["status"] == "ok"]
    assert totals.loc[FLEET, "gpus"] == ok["gpus"].sum()


def test_baseline_fleet_total_compares_like_for_like(example_result):
    before = example_result.rows
    now = [dataclasses.replace(r, status="infeasible") if r.route == "chat" else r for r in before]
    diff = baseline_diff(now, before).set_index("route")
    assert diff.loc["chat", "change"] == "now infeasible"
    assert "not counted: chat" in diff.loc[FLEET, "change"]
    assert diff.loc[FLEET, "usd_per_month_change"] == 0  # chat is left out of both sides, not silently dropped


def test_scenario_comparison_flags_different_route_sets(example_plan):
    from ui.scenario import NOT_LIKE_FOR_LIKE, compare_plans

    worse = example_plan.copy()
    worse.loc[worse["route"] == "chat", "status"] = "infeasible"
    table = compare_plans({"a": example_plan, "b": worse}).set_index("route")
    assert table.loc["fleet total", "b: engine / GPU"] == f"3 of 4 routes; chat infeasible; {NOT_LIKE_FOR_LIKE}"
    same = compare_plans({"a": example_plan, "b": example_plan}).set_index("route")
    assert same.loc["fleet total", "a: engine / GPU"] == "4 of 4 routes"


def test_markdown_text_escapes_syntax_and_autolinks_but_keeps_plain_names():
    from planner.planning.exports import markdown_text
    assert markdown_text("llama-3.1-8b chat+batch 2.5") == "llama-3.1-8b chat+batch 2.5"
    assert markdown_text("https://x.io *b* $m$ [a](b) www.x.io a@b.io") == \
        "https\\://x.io \\*b\\* \\$m\\$ \\[a\\]\\(b\\) www\\.x.io a\\@b.io"
    assert markdown_text("\x1b[2J") == "\\\\x1b\\[2J"  # printable first: the escape is visible, then escaped
