"""The prefix example replayed on an H100 (vLLM 0.26.0, the sixteenth and eighteenth sessions' device calls, records
committed under profiles/measured/h100/bench/2026-12-07-s16/ and -s18/) against `planner predict` on the same requests at the same
rate: the hit rate within 5 points (issue 49's target), TTFT and TPOT within the accuracy docs/traffic.md states.

Each record is what `measure verify --record` wrote: its arguments, every request's TTFT, TPOT and prompt/cached
tokens.  The requests are rebuilt the way verify chose them (measure.verify.replayed_requests on the example's
plan and routes), then predicted with the KV cache size the server's log printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from measure import verify
from planner.cli import main
from tests.conftest import REPO

BENCH = REPO / "profiles" / "measured" / "h100" / "bench"
INPUTS = REPO / "scripts" / "gpu" / "inputs" / "prefix-replay"
LOG = REPO / "examples" / "traces" / "synthetic_chat_prefix.jsonl"
# (record file, which of its records, the server log that printed its KV cache size, prefix caching on, host tier
# GiB).  The sixteenth session's calls, then the eighteenth's: the host tier, and two repeats in fresh engines.
REPLAYS = {
    "full cache, 10x": ("2026-12-07-s16/call11/prefix-repeat.jsonl", 0,
                        "2026-12-07-s16/call11/prefix-repeat-on-full-repeat-server.log", True, 0),
    "32k cache, 3x": ("2026-12-07-s16/call10/prefix.jsonl", 1, "2026-12-07-s16/call10/prefix-on-32k-server.log",
                      True, 0),
    "caching off, 10x": ("2026-12-07-s16/call10/prefix.jsonl", 0, "2026-12-07-s16/call10/prefix-off-server.log",
                         False, 0),
    "32k cache and an 8 GiB host tier, 3x": ("2026-12-07-s18/call8/host.jsonl", 0,
                                             "2026-12-07-s18/call8/host-host8-server.log", True, 8),
    "32k cache again, 3x": ("2026-12-07-s18/call8/host.jsonl", 1, "2026-12-07-s18/call8/host-nohost-server.log",
                            True, 0),
    "caching off again, 10x": ("2026-12-07-s18/call9/off.jsonl", 0, "2026-12-07-s18/call9/off-off-server.log",
                               False, 0),
}


def record(name: str) -> dict:
    path, k, *_ = REPLAYS[name]
    return json.loads((BENCH / path).read_text().splitlines()[k])


def kv_tokens(name: str) -> int:
    text = (BENCH / REPLAYS[name][2]).read_text()
    return int(re.search(r"GPU KV cache size: ([\d,]+) tokens", text).group(1).replace(",", ""))


def replayed(name: str, tmp_path: Path) -> tuple[Path, float]:
    """The requests verify sent (a log file, prefix structure kept only where caching was on) and their rate."""
    rec, caching = record(name), REPLAYS[name][3]
    route = verify.route_row(str(INPUTS / "routes.csv"), rec["route"])
    plan = verify.plan_row(str(INPUTS / "plan.csv"), rec["route"])
    share = verify.share_of(route, plan, rec["replicas"], rec["argv"]["scale"])
    specs = verify.replayed_requests(LOG, share, rec["argv"]["duration"], rec["argv"]["max_requests"],
                                     float(route["rate_rps"]), block_size=512)
    assert len(specs) == rec["requests"]
    out = tmp_path / f"{name.replace(' ', '_').replace(',', '')}.jsonl"
    with out.open("w") as f:
        for r in specs:
            row = {"timestamp": r.send_at_s * 1000, "input_length": r.input_len, "output_length": r.output_len}
            if caching:
                row["hash_ids"] = list(r.blocks)
            f.write(json.dumps(row) + "\n")
    times = [r.send_at_s for r in specs]
    return out, (len(specs) - 1) / (times[-1] - times[0])


def predicted(name: str, tmp_path: Path, capsys) -> dict:
    log, rate = replayed(name, tmp_path)
    capsys.readouterr()
    assert main(["predict", "--gpu", "h100", "--engine", "vllm", "--model", "llama-3.1-8b", "--precision", "bf16",
                 "--log", str(log), "--format", "mooncake", "--request-rate", f"{rate:.6f}", "--replicas", "1",
                 "--kv-cache-tokens", str(kv_tokens(name)), "--json",
                 *(["--host-kv-gib", str(REPLAYS[name][4])] if REPLAYS[name][4] else [])]) == 0
    return json.loads(capsys.readouterr().out)


def measured_hit_rate(name: str) -> float:
    tokens = np.array(record(name)["prompt_cached_tokens"], dtype=float)
    return float(tokens[:, 1].sum() / tokens[:, 0].sum())


@pytest.mark.parametrize("name", list(REPLAYS))
def test_gpu_replay_of_the_prefix_example_matches_the_prediction_for_its_requests(name, tmp_path, capsys):
    pred, rec = predicted(name, tmp_path, capsys), record(name)
    hit = measured_hit_rate(name)
    if REPLAYS[name][3]:
        assert abs(pred["prefix_hit_rate"] - hit) <= 0.05
    else:
        assert hit == 0.0 and "prefix_hit_rate" not in pred
    for metric in ("ttft", "tpot"):
        values = rec["measured"][f"{metric}_ms"]
        p50, p95 = np.percentile(values, 50), np.percentile(values, 95)
        assert p50 == pytest.approx(pred[f"{metric}_p50_ms"], rel=P50_BOUND.get((name, metric), 0.25)), metric
        assert p95 == pytest.approx(pred[f"{metric}_p95_ms"], rel=0.5), metric


# At 3x (2.2 req/s) the measured TTFT p50 stays near the 10x runs' ~40 ms (38, 43 and 46 ms in three engines) where
# the model, all of whose TTFT there is the request's own short prefill, predicts 33 ms: a load-independent 5-13 ms
# it lacks (docs/validation.md, "Prefix reuse on the GPU").  Bounded here so that a larger gap fails.
P50_BOUND = {(name, "ttft"): 0.45 for name in REPLAYS if "3x" in name}
