"""A route's prefix structure can only take work away from its replicas: its plan never buys more replicas than
the same requests planned cold (their block ids dropped)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from planner.cli import main
from planner.planning.plan import make_plan
from tests.conftest import bundled_catalog, cli_fits_bundled_once

BLOCK = 512


def conversations(path: Path, sessions: int = 400, span_s: float = 900.0, seed: int = 49) -> None:
    """A SYNTHETIC multi-turn log: each session opens with one of 200 Zipf-popular 2k-token system prompts, then
    each turn appends the previous reply and 1-4 blocks of new text, ~2 minutes apart (prompts grow to ~25k)."""
    gen = np.random.default_rng(seed)
    rows, fresh = [], 800
    for _ in range(sessions):
        system = int(min(gen.zipf(1.3), 200)) - 1
        ids = [system * 4 + j for j in range(4)]
        t, reply = float(gen.uniform(0.0, span_s)), 0
        for _ in range(int(gen.integers(4, 13))):
            added = -(-reply // BLOCK) + int(gen.integers(1, 5))
            ids += range(fresh, fresh + added)
            fresh += added
            reply = int(gen.integers(100, 600))
            rows.append((t, len(ids) * BLOCK, reply, list(ids)))
            t += float(gen.exponential(120.0))
            if t >= span_s:
                break
    rows.sort(key=lambda row: row[0])
    with path.open("w") as f:
        for t, tokens, reply, ids in rows:
            f.write(json.dumps({"timestamp": int(t * 1000), "input_length": tokens, "output_length": reply,
                                "hash_ids": ids}) + "\n")


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
