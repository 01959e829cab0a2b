"""The simulator's per-replica prefix cache and the prefix-affinity router (issue 49, part 2), through the door."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cli import main
from planner.latency import Fleet, Replay, predict
from planner.latency import simulate as sim
from planner.traffic.logs import log_blocks, read_log
from planner.traffic.prefixes import BlockIds, PromptBlocks, hit_tokens, prefix_reuse, segmented_prompts
from planner.traffic.workload import Requests
from tests.conftest import REPO
from tests.planner.sim_fakes import SimCurve

EXAMPLE = REPO / "examples" / "traces" / "synthetic_chat_prefix.jsonl"
BLOCK = 64
SHARED, PROMPT, N = 4096, 4196, 40  # every prompt: a 4096-token shared prefix, then 100 tokens of its own


def shared_log(n: int = N) -> tuple[np.ndarray, np.ndarray, np.ndarray, BlockIds]:
    inp = np.full(n, PROMPT)
    return np.arange(n) * 0.5, inp, np.full(n, 20), BlockIds.shared(inp, SHARED, BLOCK)


def session_log(sessions: int, n: int, prefix_tokens: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Requests of `sessions` sessions in random order, each session's prompts starting with its own prefix."""
    gen = np.random.default_rng(seed)
    which = gen.integers(0, sessions, n)
    inp = np.full(n, prefix_tokens + 100)
    per = prefix_tokens // BLOCK
    ids = tuple(np.concatenate([s * per + np.arange(per), [sessions * per + i, sessions * per + n + i]])
                for i, s in enumerate(which))
    return np.arange(n) * 0.25, inp, np.full(n, 20), BlockIds.of(ids, BLOCK)


def test_a_shared_prefix_is_served_from_the_cache_after_the_first_request():
    t, inp, out, blocks = shared_log()
    result = predict(SimCurve(), Replay(t, inp, out, blocks=blocks)).results[0]
    assert result.cached_tokens is not None
    assert result.cached_tokens[0] == 0 and np.all(result.cached_tokens[1:] == SHARED)
    assert result.prefix_hit_rate == pytest.approx(SHARED / PROMPT * (N - 1) / N)


def test_cached_prefixes_lower_ttft_and_no_structure_reports_no_rate():
    t, inp, out, blocks = shared_log()
    warm = predict(SimCurve(), Replay(t, inp, out, blocks=blocks))
    cold = predict(SimCurve(), Replay(t, inp, out))
    assert warm.value("ttft", 50) < 0.5 * cold.value("ttft", 50)
    assert math.isnan(cold.prefix_hit_rate) and "prefix_hit_rate" not in cold.to_record()
    assert warm.to_record()["prefix_hit_rate"] == pytest.approx(warm.prefix_hit_rate)


def test_blocks_that_never_repeat_change_nothing():
    t, inp, out, _ = shared_log()
    unique = BlockIds.shared(inp, 0, BLOCK)
    cold = sim.simulate(SimCurve(), t, inp, out, replicas=2)
    fresh = sim.simulate(SimCurve(), t, inp, out, replicas=2, blocks=unique)
    assert fresh.prefix_hit_rate == 0.0
    np.testing.assert_array_equal(fresh.ttft_s, cold.ttft_s)
    np.testing.assert_array_equal(fresh.e2e_s, cold.e2e_s)


def test_prefix_affinity_keeps_sessions_on_their_replica_and_hits_more_than_round_robin():
    t, inp, out, blocks = session_log(sessions=5, n=200, prefix_tokens=2048)
    rates = {router: predict(SimCurve(), Fleet(Requests(t, inp, out, "sessions", blocks), 2, router)).prefix_hit_rate
             for router in ("round-robin", "least-outstanding", "prefix-affinity")}
    assert rates["round-robin"] < rates["prefix-affinity"]
    assert rates["least-outstanding"] < rates["prefix-affinity"]
    # with affinity, each session misses once (its first request) on the one replica it sticks to
    assert rates["prefix-affinity"] == pytest.approx(2048 / 2148 * (200 - 5) / 200)


def test_an_lru_cache_too_small_for_the_prefixes_it_cycles_through_hits_nothing():
    # 10 sessions in turn, each prefix 2048 tokens: a cache of ~3 prefixes has always evicted the next one
    t, inp, out, _ = session_log(sessions=10, n=100, prefix_tokens=2048)
    turn = np.arange(100) % 10
    per = 2048 // BLOCK
    ids = tuple(np.concatenate([s * per + np.arange(per), [1000 + i, 2000 + i]]) for i, s in enumerate(turn))
    cycled = BlockIds.of(ids, BLOCK)
    small = sim.simulate(SimCurve(kv_cache_tokens=3 * 2148), t, inp, out, blocks=cycled)
    large = sim.simulate(SimCurve(), t, inp, out, blocks=cycled)
    assert small.prefix_hit_rate == 0.0
    assert large.prefix_hit_rate == pytest.approx(2048 / 2148 * 0.9)


def test_predicted_hit_rate_of_the_example_log_is_at_most_its_reuse(capsys):
    traffic = read_log(EXAMPLE, "mooncake", block_size=512)
    requests = traffic.requests
    blocks = log_blocks(traffic)
    assert blocks is not None
    reuse = prefix_reuse(PromptBlocks(requests["t_s"].to_numpy(), requests["input_len"].to_numpy(),
                                      blocks.hash_ids), 512).share
    capsys.readouterr()
    assert main(["predict", "--gpu", "h200", "--engine", "vllm", "--model", "llama-3.1-8b", "--log", str(EXAMPLE),
                 "--format", "mooncake", "--request-rate", "0.7256", "--replicas", "1", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert 0.0 < record["prefix_hit_rate"] <= reuse + 1e-12


def test_running_requests_hold_a_shared_prefix_once():
    # One long request holds the 4096-token prefix while nine more arrive behind it.  Counted once per request
    # they could not fit beside it (8,000 KV tokens) and would wait for its 1,000 decode steps; shared, as vLLM
    # reference-counts the blocks, each needs only its own 100 prompt and 20 output tokens.
    n = 10
    t = np.concatenate([[0.0], 1.0 + np.arange(n - 1) * 0.05])
    inp, out = np.full(n, PROMPT), np.concatenate([[1000], np.full(n - 1, 20)])
    blocks = BlockIds.shared(inp, SHARED, BLOCK)
    curve = SimCurve(kv_cache_tokens=8000)
    shared = sim.simulate(curve, t, inp, out, blocks=blocks)
    cold = sim.simulate(curve, t, inp, out)
    assert np.all(shared.cached_tokens[1:] == SHARED)
    assert np.nanmax(shared.ttft_s[1:]) < 0.1  # a few steps, not the long request's decode
    assert np.nanmin(cold.ttft_s[1:]) > shared.e2e_s[0] - t[1] - 0.1  # without the prefix they wait for it to end
    assert shared.rejected == 0 and np.all(np.isfinite(shared.e2e_s))


def test_a_prefix_copied_by_requests_prefilling_together_takes_kv_for_each():
    # Four requests arrive together in a KV cache of two: the first two miss (neither has filled the cache
    # yet) and each holds its own copy, as cold; once their prefills complete, the other two find the prefix
    # cached and held, and join them at once instead of waiting for one to end.
    n = 4
    t, inp, out = np.zeros(n), np.full(n, PROMPT), np.full(n, 20)
    curve = SimCurve(kv_cache_tokens=2 * (PROMPT + 20) + 1000)
    together = sim.simulate(curve, t, inp, out, blocks=BlockIds.shared(inp, SHARED, BLOCK))
    cold = sim.simulate(curve, t, inp, out)
    assert list(together.cached_tokens) == [0, 0, SHARED, SHARED]
    assert together.ttft_s[0] == cold.ttft_s[0]
    assert together.ttft_s[1] == pytest.approx(cold.ttft_s[1], rel=0.05)  # the late two's short prefills join it
    assert np.all(together.ttft_s[2:] < min(cold.e2e_s[:2]))
    assert np.all(cold.ttft_s[2:] > min(cold.e2e_s[:2]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6), st.integers(0, 40), st.booleans()),
                min_size=1, max_size=30))
def test_kv_reserved_for_prefix_blocks_is_all_freed_once_every_holder_ends(steps):
    # Requests of 4 prompt families (each a chain of 64-token blocks of its family, then blocks of its own),
    # admitted with their cached prefixes and released in any order: what they reserve sums to what they free.
    cache = sim._BlockCache(capacity=10_000, block=BLOCK)
    rows = [[family * 100 + j for j in range(length)] + [10_000 + i]
            for i, (family, length, _, _) in enumerate(steps)]
    lengths = [BLOCK * len(ids) - 7 for ids in rows]
    prompts = segmented_prompts(BlockIds.of(rows, BLOCK), lengths)
    running: list[int] = []
    reserved = freed = 0
    for i, (_, _, output, end_one) in enumerate(steps):
        prompt = prompts[i]
        hit, _, reached = cache.match_both(prompt)
        need, blocks, private = cache.kv_need(prompt, reached, lengths[i] + output)
        assert 0 < need <= lengths[i] + output
        cache.reserve(i, blocks, private)
        cache.touch(prompt)
        reserved += need
        running.append(i)
        if end_one and running:
            freed += cache.release(running.pop(0))
    for i in running:
        freed += cache.release(i)
    assert freed == reserved and not cache.held and not cache.holds


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(1, 4), st.integers(0, BLOCK - 1)),
                min_size=1, max_size=40),
       st.integers(1, 12))
def test_the_segment_cache_hits_what_an_lru_of_blocks_hits(requests, capacity_blocks):
    # Prompts of 4 families: a family's first `shared` blocks, then `own` blocks of the request (a partial last one
    # of `cut` tokens fewer), each referenced in arrival order: the replica's cache, which keeps runs of blocks
    # that always travel together as one segment, hits exactly what prefixes.hit_tokens' LRU of single blocks hits.
    rows = [[family * 100 + j for j in range(shared)] + [1_000 + 10 * i + j for j in range(own)]
            for i, (family, shared, own, _) in enumerate(requests)]
    lengths = np.array([BLOCK * len(ids) - cut for ids, (*_, cut) in zip(rows, requests, strict=True)])
    blocks = BlockIds.of(rows, BLOCK)
    expected = hit_tokens(PromptBlocks(np.arange(len(rows), dtype=float), lengths, blocks.hash_ids),
                          capacity_blocks * BLOCK, BLOCK).lru
    cache = sim._BlockCache(capacity=capacity_blocks, block=BLOCK)
    hits = []
    for prompt in segmented_prompts(blocks, lengths):
        hits.append(cache.match(prompt)[0])
        cache.touch(prompt)
    assert hits == list(expected)


def test_a_host_tier_hit_waits_for_its_own_load_while_the_engine_goes_on():
    # A long decode runs throughout.  A 1,280-token document is read, evicted from the GPU cache (4,400 tokens,
    # the decode's included) by three others, then read again: the host tier holds it, and bringing it back at
    # 1 ms a token takes ~1.3 s.  vLLM loads it asynchronously: that request's first token waits for it, the
    # running decode's iterations do not.
    docs = [[100 * d + j for j in range(20)] for d in (1, 2, 3, 4, 1)]
    t = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 3.0])
    inp = np.array([64] + [1280] * 5)
    out = np.array([3000, 2, 2, 2, 2, 2])
    curve = SimCurve(kv_cache_tokens=4400)
    blocks = BlockIds.of([[0], *docs], BLOCK)
    fast = sim.simulate(curve, t, inp, out, blocks=blocks, host=sim.HostTier(100_000, 1e-9))  # back at once
    slow = sim.simulate(curve, t, inp, out, blocks=blocks, host=sim.HostTier(100_000, 1e-3))
    gpu_only = sim.simulate(curve, t, inp, out, blocks=blocks)
    from_host = slow.cached_tokens[5] - gpu_only.cached_tokens[5]  # the GPU kept the document's head
    assert slow.cached_tokens[5] == fast.cached_tokens[5] >= 1200 and from_host >= 600
    assert slow.ttft_s[5] - fast.ttft_s[5] == pytest.approx(from_host * 1e-3, rel=0.05)
    assert slow.e2e_s[0] == pytest.approx(fast.e2e_s[0], abs=0.01)  # the decode did not stall for the load
