"""A benchmark's closed loop simulated request by request (planner.latency.closed_loop), on a fake curve and against
the repo's own server measurements at fixed concurrency."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from planner.engine.curves import find_curve
from planner.latency.closed_loop import simulate_closed_loop
from tests.planner.fakes import FakeCurve, key

CURVE = FakeCurve(key())


def test_one_client_waits_for_its_own_prefill_and_sends_every_request():
    run = simulate_closed_loop(CURVE, concurrency=1, requests=5, input_len=512, output_len=64)
    assert len(run.ttft_s) == len(run.tpot_s) == 5
    alone = CURVE.step_time_s(0, 0.0, 512, 512)  # one prefill step of its 512 tokens, nothing decoding
    assert run.ttft_s == pytest.approx(np.full(5, alone), rel=1e-9)
    assert run.output_tokens == 5 * 64 and run.duration_s > 5 * 63 * CURVE.step_time_s(1, 512, 0, 0)


def test_a_request_ends_its_ttft_with_its_own_chunk_not_the_rounds_whole_prefill():
    """32 prompts of 4096 tokens in the fake's 8192-token budget: two prompts a step at first; the first two see
    their first token after one step, the last ones after the whole burst, so the mean is well below the burst."""
    run = simulate_closed_loop(CURVE, concurrency=32, requests=32, input_len=4096, output_len=16)
    step = CURVE.step_time_s(0, 0.0, 8192, 4096)
    assert run.ttft_s.min() == pytest.approx(step, rel=1e-9)
    assert run.ttft_s.max() >= 16 * step
    assert run.ttft_s.mean() < 0.75 * run.ttft_s.max()


def test_requests_beyond_the_kv_cache_wait_for_room():
    small = replace(CURVE, kv_cache_tokens=4 * (1024 + 128))
    roomy = simulate_closed_loop(CURVE, concurrency=8, requests=16, input_len=1024, output_len=128)
    tight = simulate_closed_loop(small, concurrency=8, requests=16, input_len=1024, output_len=128)
    assert tight.ttft_s.mean() > 2 * roomy.ttft_s.mean()
    assert tight.duration_s > roomy.duration_s


def test_the_simulated_closed_loop_is_closer_to_the_measured_ttft_than_the_rounds():
    """The H200 server rows at fixed concurrency (vllm bench serve's load) and the H100's long-prompt one: mean TTFT
    simulated request by request against the analytic rounds, median |error| over the rows."""
    from planner.latency import rounds_answer
    from planner.latency.analytic import Rounds, analytic
    from tests.conftest import bundled_catalog

    catalog = bundled_catalog()
    profiles = catalog.profiles_df
    rows = profiles[(profiles["mode"] == "concurrency") & (profiles["model"] == "llama-3.1-8b")
                    & (profiles["engine"] == "vllm") & (profiles["precision"] == "bf16")
                    & profiles["num_requests"].notna() & profiles["ttft_mean_ms"].notna()]
    assert len(rows) >= 6
    simulated, rounds = [], []
    for r in rows.itertuples():
        curve = find_curve(catalog.curves, "vllm", r.gpu, "llama-3.1-8b", "bf16")
        load = Rounds(float(r.input_len), float(r.output_len), float(r.concurrency), int(r.num_requests))
        simulated.append(abs(rounds_answer(curve, load).prediction.ttft_ms / r.ttft_mean_ms - 1))
        rounds.append(abs(analytic(curve, load).prediction.ttft_ms / r.ttft_mean_ms - 1))
    assert np.median(simulated) < np.median(rounds)
    assert np.median(simulated) < 0.15 and max(simulated) < 0.4, simulated
    assert not any(math.isnan(x) for x in simulated)


def test_predict_rounds_says_it_simulated_the_clients(capsys):
    import json

    from planner.cli import main
    assert main(["predict", "--gpu", "h200", "--engine", "vllm", "--model", "llama-3.1-8b", "--precision", "bf16",
                 "--input-len", "512", "--output-len", "256", "--concurrency", "32", "--closed-loop", "rounds",
                 "--num-requests", "128", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["tier"] == "closed-loop simulated"
    assert record["low"] <= record["output_tok_per_s"] <= record["high"]
