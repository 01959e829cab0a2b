"""planner.traffic.prefixes: the prefix cache as a pure function.  Hand-built cases whose hits are worked out by
hand (blocks of 4 tokens), then Hypothesis invariants: hits never exceed the prompt, a bigger LRU cache never
hits less, the unbounded cache hits at least as much as any LRU."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetfacts.errors import InputError
from planner.traffic.prefixes import PromptBlocks, hit_tokens, prefix_reuse

B = 4  # tokens per block in the hand-built cases


def blocks(*requests: tuple[float, int, list[int]]) -> PromptBlocks:
    """PromptBlocks from (arrival s, prompt tokens, hash ids) triples."""
    return PromptBlocks(np.array([r[0] for r in requests], dtype=float), np.array([r[1] for r in requests]),
                        [np.array(r[2], dtype=np.int64) for r in requests])


def hits(requests: PromptBlocks, capacity: int = 10**9) -> tuple[list[int], list[int]]:
    h = hit_tokens(requests, capacity, B)
    return h.infinite.tolist(), h.lru.tolist()


def test_two_requests_sharing_three_blocks():
    # 16 tokens = 4 full blocks cached; the second's 14 tokens: 3 full blocks, all behind the same prefix: 12 hit
    assert hits(blocks((0, 16, [1, 2, 3, 4]), (1, 14, [1, 2, 3, 9]))) == ([0, 12], [0, 12])


def test_an_identical_prompt_hits_all_but_the_block_of_its_last_token():
    # vLLM recomputes the last prompt token: at most floor((16 - 1) / 4) = 3 of the 4 cached blocks
    assert hits(blocks((0, 16, [1, 2, 3, 4]), (1, 16, [1, 2, 3, 4]))) == ([0, 12], [0, 12])


def test_blocks_chain_on_their_prefix():
    first = (0, 16, [1, 2, 3, 4])
    assert hits(blocks(first, (1, 16, [9, 2, 3, 4])))[0] == [0, 0]  # same ids 2, 3, 4 behind another first block
    assert hits(blocks(first, (1, 16, [1, 7, 3, 4])))[0] == [0, 4]  # the run stops at the first miss


def test_a_partial_block_is_never_cached():
    # 10 tokens: blocks [1, 2] full, 5 partial (2 tokens): not cached, so the next prompt's full block 5 misses
    assert hits(blocks((0, 10, [1, 2, 5]), (1, 13, [1, 2, 5, 6])))[0] == [0, 8]
    # once a 12-token prompt has filled block 5 it is cached
    assert hits(blocks((0, 12, [1, 2, 5]), (1, 13, [1, 2, 5, 6])))[0] == [0, 12]


def test_lru_evicts_the_least_recent_and_a_chain_tail_first():
    a, b, a_again = (0, 9, [1, 2, 10]), (1, 9, [3, 4, 11]), (2, 9, [1, 2, 12])  # 2 full blocks each, hit cap 2
    requests = blocks(a, b, a_again)
    assert hits(requests, capacity=16) == ([0, 0, 8], [0, 0, 8])  # 4 blocks: nothing evicted
    assert hits(requests, capacity=8) == ([0, 0, 8], [0, 0, 0])  # 2 blocks: b evicted both of a's
    # 3 blocks: b evicts one of a's, its tail (1, 2) (a frees tail first, as vLLM), so a's head (1) still hits
    assert hits(requests, capacity=12) == ([0, 0, 8], [0, 0, 4])
    assert hits(requests, capacity=0) == ([0, 0, 8], [0, 0, 0])


def test_requests_are_cached_in_arrival_order_and_answered_in_the_given_order():
    later, earlier = (5, 16, [1, 2, 3, 4]), (1, 16, [1, 2, 3, 4])
    assert hits(blocks(later, earlier)) == ([12, 0], [12, 0])


def test_reuse_share_and_distances():
    # c reuses a's two full blocks; between them b put 8 tokens (2 full blocks) through the cache
    requests = blocks((0, 9, [1, 2, 10]), (1, 9, [3, 4, 11]), (2, 9, [1, 2, 12]))
    reuse = prefix_reuse(requests, B, cache_tokens=8)
    assert (reuse.prompt_tokens, reuse.reused_tokens, reuse.share) == (27, 8, pytest.approx(8 / 27))
    assert reuse.distances_tokens.tolist() == [8, 8] and reuse.distance(50) == 8
    assert reuse.lru_tokens == 0  # two blocks of cache: b evicted a's
    # a system prompt (block 1) used by every request: distance 0 from the request before
    system = prefix_reuse(blocks((0, 9, [1, 2, 3]), (1, 9, [1, 5, 6]), (2, 9, [1, 7, 8])), B)
    assert system.distances_tokens.tolist() == [0, 0] and system.reused_tokens == 8


def test_no_reuse_reports_no_distance():
    reuse = prefix_reuse(blocks((0, 9, [1, 2, 3]), (1, 9, [4, 5, 6])), B)
    assert reuse.reused_tokens == 0 and np.isnan(reuse.distance(90))
    assert "0.0% of prompt tokens" in reuse.describe() and "distance" not in reuse.describe()


def test_bad_input_is_an_input_error():
    with pytest.raises(InputError, match="request 1: 2 hash ids for a 16-token prompt; blocks of 4 tokens need 4"):
        hit_tokens(blocks((0, 4, [1]), (1, 16, [1, 2])), 100, B)
    with pytest.raises(InputError, match="cache capacity: expected tokens >= 0"):
        hit_tokens(blocks((0, 4, [1])), -1, B)
    with pytest.raises(InputError, match="block size"):
        hit_tokens(blocks((0, 4, [1])), 10, 0)


# ---------------------------------------------------------------- invariants

@st.composite
def prompt_blocks(draw) -> tuple[PromptBlocks, int]:
    """Requests whose ids come from a small alphabet (so prefixes repeat), at a small block size."""
    block_size = draw(st.sampled_from([1, 2, 4, 16]))
    n = draw(st.integers(1, 25))
    tokens = draw(st.lists(st.integers(0, 6 * block_size), min_size=n, max_size=n))
    ids = [draw(st.lists(st.integers(0, 2), min_size=-(-t // block_size), max_size=-(-t // block_size)))
           for t in tokens]
    arrivals = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))  # ties: the given order
    return PromptBlocks(np.array(arrivals, dtype=float), np.array(tokens), [np.array(i) for i in ids]), block_size


@settings(max_examples=200, deadline=None)
@given(prompt_blocks(), st.integers(0, 40), st.integers(0, 40))
def test_hits_stay_within_the_prompt_and_grow_with_the_cache(case, small_blocks, extra_blocks):
    requests, block_size = case
    small = hit_tokens(requests, small_blocks * block_size, block_size)
    big = hit_tokens(requests, (small_blocks + extra_blocks) * block_size, block_size)
    cap = np.maximum(0, (requests.prompt_tokens - 1) // block_size) * block_size
    assert np.all(small.infinite <= cap) and np.all(cap <= np.maximum(requests.prompt_tokens, 0))
    assert np.all(small.infinite % block_size == 0) and np.all(small.lru % block_size == 0)
    assert np.array_equal(small.infinite, big.infinite)
    # LRU is a stack algorithm (a smaller cache's blocks are always inside a bigger one's): no Belady anomaly
    assert np.all(small.lru <= big.lru) and np.all(big.lru <= big.infinite)
    everything = hit_tokens(requests, int(requests.prompt_tokens.sum()), block_size)
    assert np.array_equal(everything.lru, everything.infinite)  # a cache that holds every block is unbounded


@settings(max_examples=100, deadline=None)
@given(prompt_blocks())
def test_reuse_counts_the_unbounded_hits(case):
    requests, block_size = case
    reuse = prefix_reuse(requests, block_size)
    infinite = hit_tokens(requests, 0, block_size).infinite
    assert reuse.reused_tokens == infinite.sum()
    assert reuse.distances_tokens.size * block_size == infinite.sum() and np.all(reuse.distances_tokens >= 0)
