"""A host-memory KV tier behind each replica's prefix cache (`predict --host-kv-gib`): every block the GPU caches is
written to host memory too (vLLM's OffloadingConnector), and what the GPU has evicted since comes back at the host
link's bandwidth instead of being prefilled again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "synthetic_chat_prefix.jsonl"
# A GPU cache far smaller than the log's working set (the example's reuse distance p90 is ~200k tokens), so
# that the LRU evicts blocks the next turns of a session come back for.
SMALL_GPU_CACHE = 32_000


def _predict(capsys, *extra: str) -> dict:
    capsys.readouterr()
    code = main(["predict", "--gpu", "h100", "--engine", "vllm", "--model", "llama-3.1-8b", "--precision", "bf16",
                 "--request-rate", "0.7256", "--log", str(EXAMPLE), "--replicas", "1",
                 "--kv-cache-tokens", str(SMALL_GPU_CACHE), "--json", *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_a_host_tier_serves_what_the_gpu_evicted_and_a_big_one_serves_everything(capsys):
    gpu_only = _predict(capsys)["prefix_hit_rate"]
    small = _predict(capsys, "--host-kv-gib", "8")["prefix_hit_rate"]  # 65k tokens of the 8B's KV: twice the GPU's
    big = _predict(capsys, "--host-kv-gib", "256")["prefix_hit_rate"]
    # the log's whole reuse: what one replica's cache serves when nothing is ever evicted (less what a request
    # misses of a sibling's blocks that are not computed yet while the sibling's own hit comes back from the host)
    unbounded = json.loads(_unbounded(capsys))["prefix_hit_rate"]
    assert gpu_only < small < big and big == pytest.approx(unbounded, abs=1e-3)


def test_a_write_through_tier_no_larger_than_the_gpu_cache_adds_nothing(capsys):
    # 2 GiB hold 16k tokens of Llama-3.1-8B bf16 KV (128 KiB a token): written through, the host keeps the most
    # recent blocks, which the 32k-token GPU cache keeps too (an exclusive tier of evicted blocks would add hits).
    assert _predict(capsys, "--host-kv-gib", "2")["prefix_hit_rate"] == _predict(capsys)["prefix_hit_rate"]


def _unbounded(capsys) -> str:
    capsys.readouterr()
    main(["predict", "--gpu", "h100", "--engine", "vllm", "--model", "llama-3.1-8b", "--precision", "bf16",
          "--request-rate", "0.7256", "--log", str(EXAMPLE), "--replicas", "1", "--kv-cache-tokens", "10000000",
          "--json"])
    return capsys.readouterr().out


def test_blocks_brought_back_cost_the_transfer(capsys):
    fast = _predict(capsys, "--host-kv-gib", "256", "--host-gb-per-s", "1000")
    slow = _predict(capsys, "--host-kv-gib", "256", "--host-gb-per-s", "0.5")
    assert fast["prefix_hit_rate"] == pytest.approx(slow["prefix_hit_rate"], abs=0.01)  # order of insertion shifts
    # at 0.5 GB/s a 10k-token history (1.3 GB of KV for Llama-3.1-8B bf16) takes seconds to come back
    assert slow["ttft_p95_ms"] > fast["ttft_p95_ms"] + 500


@pytest.mark.parametrize("extra, message", [
    (["--host-kv-gib", "0"], "--host-kv-gib: expected a number > 0, got 0"),
    (["--host-kv-gib", "4", "--host-gb-per-s", "-1"], "--host-gb-per-s: expected a number > 0, got -1"),
    (["--host-gb-per-s", "8"], "--host-gb-per-s: only with --host-kv-gib"),
])
def test_bad_host_tier_settings_are_one_line_errors(capsys, extra, message):
    code = main(["predict", "--gpu", "h100", "--engine", "vllm", "--model", "llama-3.1-8b", "--precision", "bf16",
                 "--request-rate", "0.7256", "--log", str(EXAMPLE), "--replicas", "1", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
