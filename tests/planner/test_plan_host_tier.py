"""A host-memory KV tier as a lever the plan prices (the assumptions' host_kv_gib): routes with prefix structure are
also sized with the tier behind each replica's prefix cache, the cheaper fleet is kept, `deploy` writes vLLM's
offloading flags, and the app's Prefix reuse tab says what the tier saves."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planner.cli import main
from planner.planning.plan import make_plan
from planner.planning.route_table import load_routes
from planner.planning.sim_check import OtherMemory, memory_in_notes
from planner.sizing.assumptions import Assumptions
from tests.conftest import REPO, bundled_catalog, cli_fits_bundled_once
from ui import prefix_view

DOCS, BLOCKS_PER_DOC, RATE_RPS, SPAN_S = 60, 32, 2.0, 900.0
TIER_GIB = 128.0  # holds all 60 documents (16k tokens each, 128 KiB of bf16 KV per token of the 8B: 120 GiB)


def documents_log(folder: Path) -> Path:
    """Requests that each read one of 60 documents of 16k tokens (Mooncake hash ids), then 200 tokens of their own:
    the documents together (~1M tokens) outgrow one H100's KV cache (~458k tokens), not a 128 GiB host tier."""
    gen = np.random.default_rng(7)
    times = np.cumsum(gen.exponential(1 / RATE_RPS, int(RATE_RPS * SPAN_S * 1.2)))
    times = times[times < SPAN_S]
    path = folder / "documents.jsonl"
    with path.open("w") as f:
        for i, t in enumerate(times):
            doc = int(gen.integers(DOCS))
            ids = [*range(doc * BLOCKS_PER_DOC, (doc + 1) * BLOCKS_PER_DOC), 10**6 + i]
            f.write(json.dumps({"timestamp": int(t * 1000), "input_length": BLOCKS_PER_DOC * 512 + 200,
                                "output_length": int(gen.integers(50, 300)), "hash_ids": ids}) + "\n")
    return path


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    """(routes CSV, its table) of one online route serving the documents log on the H100 8B bf16."""
    folder = tmp_path_factory.mktemp("documents")
    log = documents_log(folder)
    routes = folder / "routes.csv"
    with cli_fits_bundled_once():
        assert main(["traffic", "--log", str(log), "--route", "docs", "--model", "llama-3.1-8b", "--out", str(routes),
                     "--ttft-slo-ms", "5000", "--tpot-slo-ms", "100"]) == 0
    table = pd.read_csv(routes).assign(engines="vllm", gpus="h100", precisions="bf16")
    table.to_csv(routes, index=False)
    return routes, load_routes(routes)


@pytest.fixture(scope="module")
def plans(documents) -> dict[float, dict]:
    """The documents route's plan row without a tier and with a 128 GiB one allowed."""
    _, table = documents
    return {gib: make_plan(table, bundled_catalog(), Assumptions(host_kv_gib=gib), check_by_simulation=True)
            .plan.iloc[0].to_dict() for gib in (0.0, TIER_GIB)}


def test_without_a_tier_assumed_the_plan_prices_none(plans):
    row = plans[0.0]
    assert row["status"] == "ok" and row["host_kv_gib"] == 0.0
    assert memory_in_notes(row["notes"]) is None


def test_a_host_tier_that_holds_the_documents_the_gpu_evicts_is_kept_and_saves_replicas(plans):
    cold, tiered = plans[0.0], plans[TIER_GIB]
    assert tiered["host_kv_gib"] == TIER_GIB
    assert tiered["replicas"] < cold["replicas"]
    assert tiered["prefix_hit_rate_pred"] > cold["prefix_hit_rate_pred"] + 0.2
    assert tiered["windows_in_breach"] == 0
    other = memory_in_notes(tiered["notes"])  # the fleet without the tier, as this plan priced it
    assert other is not None and not other.with_tier and other.gib == TIER_GIB
    assert other.replicas == cold["replicas"]
    assert other.usd_per_month == pytest.approx(cold["total_usd_per_month"], abs=1)
    assert other.hit_rate == pytest.approx(cold["prefix_hit_rate_pred"], abs=0.001)


def test_a_tier_that_saves_nothing_is_priced_and_not_kept(tmp_path):
    # The bundled chat example fits one replica's GPU cache: the tier cannot lower its single replica.
    table = load_routes(REPO / "examples" / "routes-prefix.csv")
    table["log"] = [str(REPO / "examples" / log) if isinstance(log, str) and log else log for log in table["log"]]
    table = table[table["name"] == "chat-prefix"]
    row = make_plan(table, bundled_catalog(), Assumptions(host_kv_gib=TIER_GIB), check_by_simulation=True
                    ).plan.iloc[0].to_dict()
    assert row["host_kv_gib"] == 0.0 and row["replicas"] == 1
    other = memory_in_notes(row["notes"])
    assert other is not None and other.with_tier and other.replicas == 1
    assert other.usd_per_month == pytest.approx(row["total_usd_per_month"], abs=1)


def test_deploy_writes_the_offloading_flags_the_plan_assumed(documents, tmp_path, capsys):
    routes, _ = documents
    plan = tmp_path / "plan.csv"
    with cli_fits_bundled_once():
        assert main(["plan", "--routes", str(routes), "--out", str(plan), "--host-kv-gib", f"{TIER_GIB:g}"]) == 0
        assert main(["deploy", "--plan", str(plan), "--format", "vllm", "--out", str(tmp_path / "deploy")]) == 0
    script = (tmp_path / "deploy" / "docs.vllm.sh").read_text()
    serve = next(line for line in script.splitlines() if line.startswith("exec vllm serve"))
    assert serve.endswith("--kv-offloading-backend native --kv-offloading-size 128")
    assert "host KV tier: the plan sized this fleet with 128 GiB of host memory per replica" in script
    assert json.loads((tmp_path / "plan.assumptions.json").read_text())["assumptions"]["host_kv_gib"] == TIER_GIB


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_a_bad_host_tier_size_gets_one_line(documents, tmp_path, capsys, value):
    routes, _ = documents
    assert main(["plan", "--routes", str(routes), "--out", str(tmp_path / "p.csv"), "--host-kv-gib", value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "host_kv_gib" in err


def test_the_prefix_view_says_what_the_tier_saves(documents, plans):
    _, table = documents
    route_row = table.to_dict("records")[0]
    tiered = prefix_view.route_prefix(route_row, plans[TIER_GIB], bundled_catalog().curves)
    assert tiered is not None and tiered.plan_host_gib == TIER_GIB
    # the view simulates the plan's replicas with their tier: the plan's own hit rate
    assert dict(tiered.hit_rates)[plans[TIER_GIB]["router"]] == pytest.approx(
        plans[TIER_GIB]["prefix_hit_rate_pred"], abs=0.005)
    saved = plans[0.0]["total_usd_per_month"] - plans[TIER_GIB]["total_usd_per_month"]
    text = prefix_view.memory_text(tiered)
    assert f"{TIER_GIB:g} GiB host KV tier" in text and f"saves ${saved:,.0f}/month" in text
    cold = prefix_view.route_prefix(route_row, plans[0.0], bundled_catalog().curves)
    assert cold is not None and prefix_view.memory_text(cold) == prefix_view.NO_HOST_TIER_TEXT


def test_the_prefix_tab_what_if_sizes_the_plans_option_with_a_tier_as_the_plan_would(documents, plans):
    # The what-if of a plan made without a tier: the same fleet search the plan runs with the tier, so the same
    # replicas, cost and hit rate as the plan that priced it.
    _, table = documents
    fleet = prefix_view.tier_fleet(table.to_dict("records")[0], plans[0.0], bundled_catalog().curves, TIER_GIB,
                                   Assumptions().slo_attainment)
    tiered = plans[TIER_GIB]
    assert fleet is not None and fleet.replicas == tiered["replicas"]
    assert fleet.usd_per_month == pytest.approx(tiered["total_usd_per_month"], abs=1)
    assert fleet.hit_rate == pytest.approx(tiered["prefix_hit_rate_pred"], abs=0.005)
    cold = prefix_view.route_prefix(table.to_dict("records")[0], plans[0.0], bundled_catalog().curves)
    saved = plans[0.0]["total_usd_per_month"] - tiered["total_usd_per_month"]
    assert f"saves ${saved:,.0f}/month against the plan" in prefix_view.tier_text(cold, fleet)



def test_a_priced_tier_that_costs_more_says_by_how_much(documents, plans):
    _, table = documents
    view = prefix_view.route_prefix(table.to_dict("records")[0], plans[0.0], bundled_catalog().curves)
    assert view is not None
    dearer = dataclasses.replace(view, other_memory=OtherMemory(True, 64.0, 3, view.plan_usd_per_month + 500, 0.5))
    assert prefix_view.memory_text(dearer).endswith(": $500/month more.")
