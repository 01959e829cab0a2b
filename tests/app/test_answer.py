"""ui.answer: the page's one answer (fleet or plan), its change, its bar and the plan -> fleet table per route."""

from __future__ import annotations

import pandas as pd

from planner.planning.exports import markdown_text
from planner.planning.fleet import FleetResult
from ui import answer

PRICE = ("vast on-demand $2.4024/GPU-h (https://console.vast.ai/api/v0/bundles/ (transcribed by x/y "
         "derived/cost.json (verbatim)), 2026-10-19)")


def plan_row(route: str, engine: str = "vllm", gpu: str = "h200", replicas: int = 1, gpu_usd: float = 2000.0,
             status: str = "ok") -> dict:
    return {"route": route, "status": status, "engine": engine, "engine_version": "0.26.0",
            "engine_config": "default", "gpu": gpu, "precision": "fp8", "tp": 1, "replicas": replicas,
            "gpus": replicas, "gpu_usd_per_month": gpu_usd, "eng_usd_per_month": 100.0,
            "total_usd_per_month": gpu_usd + 100.0, "runner_up": "", "notes": ""}


def deployment(name: str, routes: str, engine: str = "vllm", replicas: int = 1, gpu_usd: float = 2000.0,
               kind: str = "shared", slo: str = "p95 TTFT 300 ms, TPOT 30 ms", pricing: str = PRICE,
               replicas_min: int | None = None) -> dict:
    return {"deployment": name, "kind": kind, "model": "llama-3.1-8b", "engine": engine, "engine_version": "0.26.0",
            "engine_config": "default", "gpu": "h200", "precision": "fp8", "tp": 1, "slo": slo, "routes": routes,
            "replicas_min": replicas if replicas_min is None else replicas_min, "replicas_max": replicas,
            "reserved_replicas": 0, "gpus_max": replicas, "pricing": pricing, "gpu_usd_per_month": gpu_usd,
            "sim_attainment": 1.0, "notes": ""}


def fleet(deployments: list[dict], placed: dict[str, str], total: float = 5000.0, checked: bool = True,
          gpus: dict[str, int] | None = None) -> FleetResult:
    routes = pd.DataFrame({"route": list(placed), "traffic": "online", "deployments": list(placed.values()),
                           "sim_attainment": 1.0})
    summary = {"total_usd_per_month": total, "gpu_usd_per_month": total - 200.0, "eng_usd_per_month": 200.0,
               "gpus_by_type": gpus or {"h200": 3}, "simulation_checked": checked}
    return FleetResult(pd.DataFrame(deployments), pd.DataFrame(), pd.DataFrame(), routes, summary, None)  # type: ignore[arg-type]


def test_plan_to_fleet_says_per_route_what_the_fleet_changes_and_why():
    plan = pd.DataFrame([plan_row("chat", engine="trtllm", gpu_usd=2600.0), plan_row("code", replicas=3, gpu_usd=6000.0),
                         plan_row("batch", gpu_usd=300.0), plan_row("same"), plan_row("bad", status="infeasible")])
    result = fleet([deployment("d1", "chat 1.00; code 1.00", replicas=3, gpu_usd=6000.0),
                    deployment("d2", "batch 1.00", kind="batch", slo="", gpu_usd=200.0,
                               pricing="coreweave spot $2.6162/GPU-h (https://x (transcribed (verbatim)), 2026)"),
                    deployment("d3", "same 1.00", kind="route-by-route", slo="")],
                   {"chat": "d1", "code": "d1", "batch": "d2", "same": "d3"})
    table = answer.plan_fleet_table(plan, result).set_index("route")
    assert list(table.columns) == list(answer.PLAN_FLEET_COLUMNS[1:])
    why = table["why they differ"]
    assert "shares d1 with code" in why["chat"] and "p95 TTFT 300 ms" in why["chat"]
    assert "another option in d1: vllm 0.26.0/h200/fp8/tp1" in why["chat"]
    assert "shares d1 with chat" in why["code"] and "another option" not in why["code"]
    assert why["batch"] == "priced coreweave spot $2.6162/GPU-h"
    assert why["same"] == "same as the plan"
    assert why["bad"] == "infeasible: no option meets this route's SLOs, in the plan or the fleet" and table.loc["bad", "fleet: deployment"] == ""
    assert table.loc["chat", "fleet: GPUs"] == 3 and table.loc["chat", "fleet: GPU $/month"] == 6000.0
    assert table.loc["chat", "plan: engine / GPU"] == "trtllm 0.26.0/h200/fp8/tp1"


def test_autoscaled_and_resized_deployments_say_so():
    plan = pd.DataFrame([plan_row("a", replicas=2, gpu_usd=4000.0)])
    result = fleet([deployment("d1", "a 1.00", kind="route-by-route", slo="", replicas=4, replicas_min=1,
                               gpu_usd=4000.0)], {"a": "d1"})
    why = answer.plan_fleet_table(plan, result)["why they differ"].iloc[0]
    assert "4 replicas instead of 2" in why and "autoscaled 1–4 replicas over the day" in why


def test_price_brief_drops_nested_sources():
    assert answer.price_brief(PRICE) == "vast on-demand $2.4024/GPU-h"
    assert answer.price_brief("1 reserved: a $1/GPU-h (s (t)); the rest on-demand: b $2/GPU-h (u)") == \
        "1 reserved: a $1/GPU-h; the rest on-demand: b $2/GPU-h"


def test_the_fleet_answer_counts_gpus_at_the_busiest_hour_and_its_check():
    plan = pd.DataFrame([plan_row("a"), plan_row("b", status="infeasible")])
    now = answer.fleet_answer(fleet([], {"a": "d1"}, gpus={"h100": 2, "h200": 5}, checked=False), plan)
    assert (now.kind, now.totals["gpus"], now.planned, now.routes) == (answer.FLEET, 7.0, ("a",), ("a", "b"))
    assert answer.coverage_text(now) == "1 of 2 routes; b infeasible"
    bar = answer.bar_text(now, answer.plan_answer(plan, checked=True))
    assert bar.startswith("**Buy: optimised fleet, $5,000/month**") and "7 GPUs (2 h100, 5 h200)" in bar
    assert "**NOT checked by simulation**" in bar
    assert bar.endswith("alternative: route by route $2,100/month")
    assert answer.bar_text(now, None, compact=True) == \
        "**Buy: optimised fleet, $5,000/month** · 7 GPUs · **NOT checked by simulation** · **1 of 2 routes infeasible**"


def test_a_fleet_change_is_shown_only_over_the_same_routes():
    plan = pd.DataFrame([plan_row("a"), plan_row("b")])
    before = answer.fleet_answer(fleet([], {"a": "d1", "b": "d1"}, total=5000.0), plan)
    cheaper = answer.fleet_answer(fleet([], {"a": "d1", "b": "d1"}, total=4000.0), plan)
    fewer = answer.fleet_answer(fleet([], {"a": "d1"}, total=3000.0), plan)
    change = answer.answer_change(cheaper, before)
    assert change is not None and change["total_usd_per_month"] == -1000.0 and change["common"] == 2
    change = answer.answer_change(fewer, before)
    assert change is not None and change["planned"] == -1 and change["common"] == 0
    assert all(change[name] == 0 for name in answer.MONEY)  # a lost route is never a saving
    assert answer.answer_change(answer.plan_answer(plan, True), before) is None  # a plan after a fleet


def test_a_plan_change_compares_the_routes_planned_in_both():
    before = answer.plan_answer(pd.DataFrame([plan_row("a"), plan_row("b")]), True)
    now = answer.plan_answer(pd.DataFrame([plan_row("a", gpu_usd=1000.0), plan_row("b", status="infeasible")]), True)
    change = answer.answer_change(now, before)
    assert change is not None and (change["total_usd_per_month"], change["planned"], change["common"]) == \
        (-1000.0, -1.0, 1.0)


def test_cards_carry_gpus_engine_and_dollars_per_route():
    plan = pd.DataFrame([plan_row("chat\x1b[31m"), plan_row("b", status="infeasible")])
    plan.loc[1, "notes"] = "no option meets the SLO"
    cards = answer.plan_cards(plan)
    # The title is markdown source: the control shown as '\x1b' (printable), then escaped (renders as typed).
    assert cards[0] == ("chat\\\\x1b\\[31m", "**1 GPUs** · vllm 0.26.0/h200/fp8/tp1 · **$2,100/month**", "")
    assert cards[1] == ("b", "**infeasible**", "no option meets the SLO")
    result = fleet([deployment("d1", "chat 1.00")], {"chat\x1b[31m": "d1"})
    table = answer.plan_fleet_table(plan.iloc[:1], result)
    title, line, note = answer.plan_fleet_cards(table)[0]
    assert title == "chat\\\\x1b\\[31m" and line.startswith("**1 GPUs** · vllm 0.26.0") and "$2,000/month" in line
    assert note.startswith(markdown_text("route by route: 1 GPUs")) and note.endswith("same as the plan")


def test_why_text_lists_each_differing_route_and_names_the_unchanged_ones():
    table = pd.DataFrame({"route": ["a", "b\x1b", "c"], "why they differ": ["shares d1 with c", "same as the plan",
                                                                          "same as the plan"]})
    assert answer.why_text(table) == "- **a**: shares d1 with c\n- same as the plan: b\\\\x1b, c"


def test_deployment_terms_list_pricing_without_sources_and_notes():
    frame = pd.DataFrame([deployment("d1", "a 1.00"), {**deployment("d2", "b 1.00"), "notes": "simulation added replicas"}])
    assert answer.deployment_terms_text(frame) == ("- **d1**: vast on-demand $2.4024/GPU-h\n"
                                                   "- **d2**: vast on-demand $2.4024/GPU-h; simulation added replicas")


def test_deployment_cards_carry_gpus_option_and_dollars():
    frame = pd.DataFrame([deployment("d1", "chat 1.00; code 1.00", replicas=3, gpu_usd=6000.0)])
    assert answer.deployment_cards(frame) == [(
        markdown_text("d1: chat 1.00; code 1.00"), "**3 GPUs** · vllm 0.26.0/h200/fp8/tp1 · **$6,000/month** in GPUs",
        markdown_text("shared · p95 TTFT 300 ms, TPOT 30 ms · vast on-demand $2.4024/GPU-h"))]


def test_option_sources_say_what_each_feasible_option_rests_on_cheapest_first():
    options = pd.DataFrame([
        {"route": "big", "option": "trtllm/h100/tp4", "data_source": "published", "feasible": True, "gpus": 16,
         "total_usd_per_month": 28000.0, "replica_output_tok_per_s_low": 10.0, "replica_output_tok_per_s_high": 790.0},
        {"route": "big", "option": "vllm/h200/fp8", "data_source": "measured", "feasible": True, "gpus": 2,
         "total_usd_per_month": 5400.0, "replica_output_tok_per_s_low": 500.0, "replica_output_tok_per_s_high": 1000.0},
        {"route": "big", "option": "vllm/b200", "data_source": "transferred", "feasible": False, "gpus": 1,
         "total_usd_per_month": 100.0, "replica_output_tok_per_s_low": 1.0, "replica_output_tok_per_s_high": 2.0},
        {"route": "small", "option": "vllm/h100", "data_source": "transferred", "feasible": True, "gpus": 1,
         "total_usd_per_month": 900.0, "replica_output_tok_per_s_low": float("nan"),
         "replica_output_tok_per_s_high": 3.0},
    ])
    sources = answer.option_sources(options)
    assert sources["big"] == ("measured by this project: vllm/h200/fp8 (2 GPUs, 90% interval ×2.0); "
                              "published (vendor tables): trtllm/h100/tp4 (16 GPUs, 90% interval ×79.0)")
    assert sources["small"] == "transferred (predicted from other models and GPUs): vllm/h100 (1 GPU)"
    assert answer.option_sources(options.drop(columns="data_source")) == {}


def test_the_page_says_why_the_per_route_fleet_gpus_add_up_to_more_than_the_fleet():
    plan = pd.DataFrame([plan_row("chat"), plan_row("code", replicas=3), plan_row("solo")])
    shared = fleet([deployment("d1", "chat 1.00; code 1.00", replicas=3), deployment("d2", "solo 1.00", kind="one route")],
                   {"chat": "d1", "code": "d1", "solo": "d2"})
    note = answer.fleet_gpus_note(answer.plan_fleet_table(plan, shared), shared)
    assert note == ("The fleet GPUs column adds up to 7 for a fleet of 4 GPUs: the GPUs of d1 appear under each "
                    "route they serve.")
    alone = fleet([deployment("d1", "chat 1.00", kind="one route"), deployment("d2", "code 1.00", replicas=3,
                                                                              kind="route-by-route")],
                  {"chat": "d1", "code": "d2"})
    assert answer.fleet_gpus_note(answer.plan_fleet_table(plan.iloc[:2], alone), alone) == ""


def test_the_headline_carries_the_fleets_gpu_range_and_names_the_wide_ones():
    """Issue 35: the recommendation carries its uncertainty in the bar (page and phone), from the fleet's
    per-deployment gpus_low / gpus_high; a deployment whose range is wide is named with its ratio."""
    plan = pd.DataFrame([plan_row("chat"), plan_row("big", replicas=16), plan_row("gone", status="infeasible")])
    d1 = {**deployment("d1", "chat 1.00", replicas=5), "gpus_low": 4, "gpus_high": 7}
    d2 = {**deployment("d2", "big 1.00", replicas=16), "gpus_low": 4, "gpus_high": 316}
    now = answer.fleet_answer(fleet([d1, d2], {"chat": "d1", "big": "d2"}, gpus={"h200": 21}), plan)
    assert now.gpu_range == (8, 323)
    assert now.wide == "16 of 21 GPUs on a wide throughput range (big ×79)"
    bar = answer.bar_text(now, None)
    assert "21 GPUs (21 h200) (8–323 at the ends of the throughput intervals)" in bar
    assert "**16 of 21 GPUs on a wide throughput range (big ×79)**" in bar
    phone = answer.bar_text(now, None, compact=True)
    assert "21 GPUs (8–323)" in phone and "**1 of 3 routes infeasible**" in phone and "big ×79" in phone
    narrow = answer.fleet_answer(fleet([{**d1}], {"chat": "d1"}, gpus={"h200": 5}), plan.iloc[:1])
    assert narrow.wide == "" and "1 of 1" not in answer.bar_text(narrow, None, compact=True)
    unknown = answer.fleet_answer(fleet([deployment("d1", "chat 1.00")], {"chat": "d1"}), plan.iloc[:1])
    assert unknown.gpu_range is None and "at the ends" not in answer.bar_text(unknown, None)
