"""`measure verify` replays a log's prefix structure: prompts share tokens where the log's block ids are equal,
and the run's hit rate is read per request from the server's usage and set beside the plan's prediction."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from fleetfacts.schema import PLAN, ROUTES
from measure import verify
from measure.cli import main
from measure.loadgen import LoadResult, RequestResult, _usage, block_prompt
from measure.stub_openai import start_stub

BLOCK = 512


def _prompt(ids, length, salt=7, memo=None):
    return block_prompt(ids, length, BLOCK, 32000, salt, {} if memo is None else memo)


def test_equal_block_ids_give_equal_tokens_and_nothing_else_is_shared():
    a = _prompt([1, 2, 3], 1200)            # block 3 partial: its first 176 tokens
    b = _prompt([1, 2, 3, 4], 1700)         # the next turn: block 3 filled, then a new block
    c = _prompt([1, 5], 900)
    assert (len(a), len(b), len(c)) == (1200, 1700, 900)
    assert a == b[:1200]                                    # a whole earlier prompt, partial block included
    assert a[:512] == c[:512] and a[512:900] != c[512:900]  # one shared block, then nothing
    assert _prompt([1], 512, salt=8) != _prompt([1], 512)   # another run's prompts share nothing with this one's


def test_a_prompt_longer_than_its_ids_is_filled_with_new_tokens():
    short = _prompt([1], 700)
    assert len(short) == 700 and short[:512] == _prompt([1], 512)


def test_usage_cached_tokens_are_read_where_the_server_sends_them():
    assert _usage({"prompt_tokens": 100, "completion_tokens": 5,
                   "prompt_tokens_details": {"cached_tokens": 64}})["cached_tokens"] == 64
    assert "cached_tokens" not in _usage({"prompt_tokens": 100, "prompt_tokens_details": None})
    with pytest.raises(ValueError, match="cached_tokens"):
        _usage({"prompt_tokens_details": {"cached_tokens": -1}})


def _result(prompt, cached):
    return RequestResult(True, 0.0, 1.0, ttft_s=0.1, output_tokens=2, prompt_tokens=prompt, cached_tokens=cached)


def test_hit_rate_comes_from_usage_before_metrics_and_is_judged_against_the_plans_prediction():
    load = LoadResult((_result(1000, 0), _result(1000, 800), _result(2000, 1600)), 1.0)
    server = {"counters": {"prefix_cache_queries": 4000.0, "prefix_cache_hits": 100.0}}
    rate, source = verify.measured_hit_rate(load, server)
    assert rate == pytest.approx(2400 / 4000) and source == "usage"
    assert verify.measured_hit_rate(LoadResult((_result(1000, None),), 1.0), server) == (100 / 4000, "/metrics")
    near = verify.prefix_verdict(rate, {"prefix_hit_rate": None}, {"prefix_hit_rate_pred": 0.57}, source)
    far = verify.prefix_verdict(rate, {"prefix_hit_rate": None}, {"prefix_hit_rate_pred": 0.40}, source)
    assert near.verdict == verify.WITHIN and far.verdict.startswith(verify.DRIFT)
    assert near.metric == "prefix_hit_rate (usage)"
    # no prediction: the old drift check against the route's declared rate (default 0)
    assert verify.prefix_verdict(rate, {"prefix_hit_rate": None}).verdict.startswith(verify.DRIFT)


def _mooncake(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _files(tmp_path, log, predicted):
    routes, plan = tmp_path / "routes.csv", tmp_path / "plan.csv"
    with open(routes, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=ROUTES.names)
        writer.writeheader()
        writer.writerow({"name": "chat", "model": "tiny", "traffic": "online", "rate_rps": 2.0, "peak_to_mean": 1,
                         "arrival_cv": 1, "input_len_mean": 1000, "output_len_mean": 4, "slo_percentile": 95,
                         "ttft_slo_ms": 5000, "tpot_slo_ms": 500, "log": log.name})
    with open(plan, "w", newline="") as handle:
        handle.write('# fleetplan-assumptions: {"slo_attainment": 0.99}\n')
        names = list(PLAN.names) + ([] if "prefix_hit_rate_pred" in PLAN.names else ["prefix_hit_rate_pred"])
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        writer.writerow({"route": "chat", "status": "ok", "traffic": "online", "model": "tiny",
                         "engine": "stub", "engine_version": "1", "gpu": "cpu", "precision": "fp32", "tp": 1,
                         "replicas": 1, "gpus": 1, "replica_output_tok_per_s": 100.0, "ttft_pred_ms": 100.0,
                         "tpot_pred_ms": 10.0, "e2e_pred_ms": 200.0, "prefix_hit_rate_pred": predicted})
    return routes, plan


@pytest.mark.slow
def test_a_prefix_structured_log_replays_with_its_sharing_and_its_measured_hit_rate_is_recorded(tmp_path, capsys):
    """Three turns of one session and a stranger, against a server with a prefix cache (the stub's keeps
    16-token blocks, as vLLM's): what the cache served is what the log's sharing allows, read from usage."""
    log = tmp_path / "trace.jsonl"
    _mooncake(log, [{"timestamp": 0, "input_length": 1200, "output_length": 4, "hash_ids": [1, 2, 3]},
                    {"timestamp": 500, "input_length": 1700, "output_length": 4, "hash_ids": [1, 2, 3, 4]},
                    {"timestamp": 1000, "input_length": 300, "output_length": 4, "hash_ids": [9]},
                    {"timestamp": 1500, "input_length": 2100, "output_length": 4, "hash_ids": [1, 2, 3, 4, 5]}])
    # What a 16-token-block cache serves: turn 2 the whole of turn 1 (1200 = 75 blocks), turn 3 turn 2's 1696.
    expected = (1200 + 1696) / (1200 + 1700 + 300 + 2100)
    routes, plan = _files(tmp_path, log, round(expected, 3))
    url, server = start_stub()
    record = tmp_path / "run.jsonl"
    try:
        code = main(["verify", "--plan", str(plan), "--routes", str(routes), "--route", "chat", "--base-url", url,
                     "--duration", "10", "--drain", "10", "--prompt-format", "tokens", "--record", str(record),
                     "--out", str(tmp_path / "prof")])
    finally:
        server.kill()
        server.wait()
    out = capsys.readouterr().out
    line = json.loads(record.read_text().splitlines()[-1])
    pairs = np.array(line["prompt_cached_tokens"], dtype=float)
    assert sorted(pairs[:, 0]) == [300, 1200, 1700, 2100]
    assert pairs[:, 1].sum() / pairs[:, 0].sum() == pytest.approx(expected)
    assert "prefix_hit_rate (usage)" in out and code in (verify.EXIT_MEETS, verify.EXIT_DRIFT), out
    verdict = next(v for v in line["verdicts"] if v["metric"].startswith("prefix_hit_rate"))
    assert verdict["verdict"] == verify.WITHIN


def test_a_prefix_structured_log_refuses_word_prompts(tmp_path, capsys):
    log = tmp_path / "trace.jsonl"
    _mooncake(log, [{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]},
                    {"timestamp": 100, "input_length": 600, "output_length": 4, "hash_ids": [1, 3]}])
    routes, plan = _files(tmp_path, log, "")
    code = main(["verify", "--plan", str(plan), "--routes", str(routes), "--route", "chat",
                 "--base-url", "http://127.0.0.1:9", "--prompt-format", "words"])
    err = capsys.readouterr().err
    assert code != 0 and "prompt-format tokens" in err and "Traceback" not in err
