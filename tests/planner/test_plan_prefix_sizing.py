"""The first pass of a route with prefix structure sizes at the mean uncached prompt (issue 49): a log whose
prompts are mostly one shared system prompt needs fewer replicas than the same log cold, the fleet simulation of
the prefix caches judging the count."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from planner.planning.plan import make_plan
from planner.planning.route_table import load_routes
from tests.conftest import bundled_catalog

pytestmark = pytest.mark.slow

# A synthetic chat log (made here, not a measurement): every prompt a SYSTEM_BLOCKS x 512-token system prompt and
# a short user turn, short answers, Poisson arrivals at RATE_RPS for SPAN_S: cold, prefill is the work.
BLOCK = 512
SYSTEM_BLOCKS = 16
TURN_TOKENS = (50, 150)
OUTPUT_TOKENS = (10, 30)
RATE_RPS = 12.0
SPAN_S = 600.0


def _log(seed: int = 0) -> pd.DataFrame:
    gen = np.random.default_rng(seed)
    t = np.cumsum(gen.exponential(1.0 / RATE_RPS, size=int(RATE_RPS * SPAN_S)))
    turns = gen.integers(*TURN_TOKENS, size=t.size)
    outputs = gen.integers(*OUTPUT_TOKENS, size=t.size)
    hash_ids = [[*range(SYSTEM_BLOCKS), SYSTEM_BLOCKS + k] for k in range(t.size)]  # the turn: a block of its own
    return pd.DataFrame({"timestamp": np.round(t * 1000).astype(int), "input_length": SYSTEM_BLOCKS * BLOCK + turns,
                         "output_length": outputs, "hash_ids": hash_ids})


def _route(log: str, frame: pd.DataFrame) -> dict:
    inputs, outputs = frame["input_length"], frame["output_length"]
    row = {"name": "assistant", "model": "llama-3.1-8b", "traffic": "online", "rate_rps": RATE_RPS,
           "peak_to_mean": 1.0, "arrival_cv": 1.0, "slo_percentile": 95.0, "ttft_slo_ms": 2000.0,
           "tpot_slo_ms": 100.0, "slo_window_s": 60.0, "gpus": "h100", "engines": "vllm", "log": log}
    for name, values in (("input_len", inputs), ("output_len", outputs)):
        row[f"{name}_mean"] = float(values.mean())
        for p in (50, 95, 99):
            row[f"{name}_p{p}"] = float(np.percentile(values, p))
    return row


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    folder = tmp_path_factory.mktemp("uncached")
    frame = _log()
    with open(folder / "warm.jsonl", "w") as out:
        for record in frame.to_dict("records"):
            out.write(json.dumps({k: (v if k == "hash_ids" else int(v)) for k, v in record.items()}) + "\n")
    pd.DataFrame({"timestamp": frame["timestamp"] / 1000.0, "input_len": frame["input_length"],
                  "output_len": frame["output_length"]}).to_csv(folder / "cold.csv", index=False)
    catalog = bundled_catalog()
    out = {}
    for name, log in (("warm", "warm.jsonl"), ("cold", "cold.csv")):
        pd.DataFrame([_route(log, frame)]).to_csv(folder / f"routes-{name}.csv", index=False)
        out[name] = make_plan(load_routes(folder / f"routes-{name}.csv"), catalog, check_by_simulation=True).rows[0]
    return out


def test_a_mostly_shared_prompt_needs_fewer_replicas_than_cold(plans):
    warm, cold = plans["warm"], plans["cold"]
    assert warm.ok and cold.ok
    assert (warm.gpu, warm.tp) == (cold.gpu, cold.tp)
    assert warm.replicas < cold.replicas
    assert math.isnan(cold.prefix_hit_rate_pred)
    assert warm.prefix_hit_rate_pred > 0.8  # 16 of ~16.2 blocks shared
    assert "first pass at the mean uncached prompt" in warm.notes
    assert "first pass at the mean uncached prompt" not in cold.notes

