"""The 24k-token open-loop server rows measured on the H100 (vLLM 0.26.0, profiles/measured/h100/
vllm-llama-3.1-8b-bf16-tp1-long-server/): each row predicted with the curve and server refitted without it,
replaying the row's own arrivals (its recorded arrival_seed), as `validate --latency` does.

These rows are short (18-40 requests from an idle server).  `predict --request-rate` simulates an hour of
arrivals at steady state, where a request's decode meets more of the next prompts' 0.8 s prefills: its TPOT p50 is
higher (11.6 against 8.3 ms at 0.3 req/s), which is the load, not the model."""

from __future__ import annotations

import pytest

from fleetfacts.bundle import PROFILES_DIR
from planner.engine.curves import load_profiles
from planner.latency import validate_latency

GROUP = {"engine": "vllm", "gpu": "h100", "model": "llama-3.1-8b", "precision": "bf16"}
LONG_INPUT = 24576


@pytest.fixture(scope="module")
def held_out():
    profiles = load_profiles(PROFILES_DIR)
    mine = profiles[(profiles[list(GROUP)] == list(GROUP.values())).all(axis=1)]
    table = validate_latency(mine)
    return table[table["shape"] == f"{LONG_INPUT}/256"]


def test_every_long_server_row_is_predicted_held_out(held_out):
    assert len(held_out) == 3  # 0.3, 0.6 and 0.9 req/s


def test_tpot_of_the_long_rows_replayed_held_out_is_within_5_percent(held_out):
    assert held_out["tpot_p50_error"].abs().max() < 0.05
    assert held_out["tpot_p99_error"].abs().max() < 0.05


def test_ttft_of_the_long_rows_replayed_held_out_is_within_20_percent(held_out):
    assert held_out["ttft_p50_error"].abs().max() < 0.2
    assert held_out["ttft_p99_error"].abs().max() < 0.2
