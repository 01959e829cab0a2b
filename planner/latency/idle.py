"""Requests no replica count brings within the TTFT target: their prefill alone, on an idle replica, is longer.

A request's TTFT on an idle replica (nothing queued, nothing else in flight) is what the door's simulation gives it
alone (planner.latency.simulate): its prompt prefilled in chunks of the curve's token budget, the per-request
overhead and, behind an OpenAI server, the front end's delay.  More replicas shorten queues, never that, so the
window verdict that sizes a route judges such a request on everything but its TTFT (fleetfacts.slo `judge`'s
`ttft_exempt`) and the plan counts them apart.  A prefix-cache hit could shorten such a prompt's prefill; the idle
replica here has none (a cold prompt, as the first request of its kind).

The idle TTFT grows with the prompt (every term of a prefill step does), so the requests that cannot make a target
are those whose prompt is longer than one limit per curve and target, found by bisection on lone simulations
(memoised) and then compared with every prompt at once.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from planner.engine.curves import CurveLike, longest_held_context
from planner.latency.simulate import simulate

# Lone TTFTs and prompt limits memoised: one per prompt the bisection tries and per (curve, target).
IDLE_CACHE_SIZE = 4096


@lru_cache(maxsize=IDLE_CACHE_SIZE)
def lone_ttft_s(curve: CurveLike, input_len: int) -> float:
    """TTFT (s) of one request of `input_len` prompt tokens alone on an idle replica of `curve`, as the door's
    simulation gives it; NaN when the prompt does not fit the replica's KV cache."""
    return float(simulate(curve, np.zeros(1), np.array([int(input_len)]), np.ones(1, dtype=np.int64)).ttft_s[0])


@lru_cache(maxsize=IDLE_CACHE_SIZE)
def idle_prompt_limit(curve: CurveLike, ttft_ms: float) -> int | None:
    """The longest prompt (tokens) whose idle TTFT on `curve` is within `ttft_ms`; None when every prompt the
    replica's KV cache holds is (0 when not even a one-token prompt is)."""
    top = longest_held_context(curve) - 1  # the longest prompt admitted with its one output token

    def within(tokens: int) -> bool:
        return lone_ttft_s(curve, tokens) * 1000.0 <= ttft_ms

    if top < 1 or within(top):
        return None
    low, high = 0, top  # within(low) (a prompt of 0 tokens waits for nothing), not within(high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if within(mid) else (low, mid)
    return low


def idle_ttft_infeasible(curve: CurveLike, input_len: np.ndarray, ttft_ms: float | None) -> np.ndarray:
    """Per request (prompt tokens `input_len`): True where even an idle replica of `curve` gives it a TTFT over
    `ttft_ms` (all False without a target)."""
    prompts = np.asarray(input_len)
    limit = None if ttft_ms is None else idle_prompt_limit(curve, float(ttft_ms))
    if limit is None:
        return np.zeros(prompts.shape, dtype=bool)
    return prompts > limit
