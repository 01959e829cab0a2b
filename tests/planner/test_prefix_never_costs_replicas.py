"""A route's prefix structure can only take work away from its replicas: its plan never buys more replicas than
the same requests planned cold (their block ids dropped)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

from planner.cli import main
from planner.planning.plan import make_plan
from tests.conftest import REPO, bundled_catalog, cli_fits_bundled_once


def conversations(path: Path) -> None:
    """scripts/make_conversation_log.py's SYNTHETIC multi-turn log: 400 sessions over 15 minutes (1,703 requests,
    prompts growing with each turn's history)."""
    spec = importlib.util.spec_from_file_location("make_conversation_log",
                                                  REPO / "scripts" / "make_conversation_log.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_conversations(path, sessions=400, span_s=900.0)


def test_a_conversation_log_plans_no_more_replicas_than_cold(tmp_path):
    # Its uncached share is small (prompts mostly repeat the session's history), so the first pass sizes at
    # prompts shorter than the H100 curve's measured 8k: that capacity is an extrapolation whose low end must not
    # floor the plan above the cold one (it did: 3 replicas against 2).
    warm_log, cold_log, routes = tmp_path / "c.jsonl", tmp_path / "cold.csv", tmp_path / "routes.csv"
    conversations(warm_log)
    frame = pd.read_json(warm_log, lines=True)
    pd.DataFrame({"timestamp": frame["timestamp"] / 1000.0, "input_len": frame["input_length"],
                  "output_len": frame["output_length"]}).to_csv(cold_log, index=False)
    with cli_fits_bundled_once():
        assert main(["traffic", "--log", str(warm_log), "--route", "chat", "--model", "llama-3.1-8b", "--out",
                     str(routes), "--ttft-slo-ms", "5000", "--tpot-slo-ms", "100"]) == 0
    row = pd.read_csv(routes).assign(engines="vllm", gpus="h100", precisions="bf16")
    table = pd.concat([row.assign(name="warm", log=str(warm_log)), row.assign(name="cold", log=str(cold_log))],
                      ignore_index=True)
    plan = make_plan(table, bundled_catalog(), check_by_simulation=True).plan.set_index("route")
    assert plan.loc["warm", "prefix_hit_rate_pred"] > 0.2
    assert plan.loc["warm", "replicas"] <= plan.loc["cold", "replicas"]
    assert plan.loc["warm", "windows_in_breach"] == 0
