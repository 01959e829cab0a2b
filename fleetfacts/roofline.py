"""Roofline and KV-cache capacity: the memory-bandwidth and memory-size bounds of one replica.

A decode step of `b` sequences with mean context `c` must read the weights
once and every sequence's KV cache:  bytes = W + b * c * kv_per_token.  At
`bandwidth` bytes/s over `tp` GPUs the fastest possible step is
t_min = bytes / (tp * bandwidth).  measure/ reports a measured decode's share of
that bound (`roofline_fraction`, the profile's roofline_frac) and estimates sweep
times from it; planner/ bounds a fitted curve's fixed step cost below by it.

The KV cache holds what memory is left after the weights:
tokens = free_fraction * (memory_fraction * memory - W) / kv_per_token, where an
engine's memory share applies to the whole memory (vLLM's gpu_memory_utilization)
or to what the weights leave free (TensorRT-LLM's free_gpu_memory_fraction).
"""

from __future__ import annotations

import math

GIB = 2**30


def replica_memory_bytes(memory_gib: float, tp: int) -> float:
    """GPU memory of one replica of `tp` GPUs of `memory_gib` GiB each, bytes."""
    return tp * memory_gib * GIB


def min_step_time_s(weight_bytes: float, kv_bytes_per_token: float, batch: float, mean_context: float,
                    bandwidth_bytes_s: float, tp: int = 1) -> float:
    """Fastest possible decode step, s: (weights + KV read) / aggregate bandwidth; ValueError without bandwidth."""
    if bandwidth_bytes_s <= 0 or tp < 1:
        raise ValueError(f"bandwidth must be > 0 and tp >= 1, got {bandwidth_bytes_s}, {tp}")
    return (weight_bytes + batch * mean_context * kv_bytes_per_token) / (tp * bandwidth_bytes_s)


def weights_read_s(weight_bytes: float, bandwidth_tb_s: float, tp: int = 1) -> float:
    """Time to stream the weights once over `tp` GPUs of `bandwidth_tb_s` TB/s, s: the floor of any step."""
    return weight_bytes / (tp * bandwidth_tb_s * 1e12)


def roofline_fraction(*, weight_bytes: float, kv_bytes_per_token: float, batch: float, input_len: float,
                      output_len: float, bandwidth_bytes_s: float, tp: int = 1, tpot_mean_ms: float | None = None,
                      output_tok_per_s: float | None = None) -> float | None:
    """Measured decode speed over the bandwidth bound (0..~1); None without a usable measurement.

    With a TPOT (which excludes the first token) it is t_min / TPOT at the mean context
    input_len + output_len / 2; else measured output tokens/s over the bound b / t_min
    (that includes prefill time, so it is a lower bound on decode efficiency).
    """
    if batch <= 0:
        return None
    t_min = min_step_time_s(weight_bytes, kv_bytes_per_token, batch, input_len + output_len / 2.0,
                            bandwidth_bytes_s, tp)
    if tpot_mean_ms is not None and math.isfinite(tpot_mean_ms) and tpot_mean_ms > 0:
        return t_min / (tpot_mean_ms / 1000.0)
    if output_tok_per_s is not None and math.isfinite(output_tok_per_s) and output_tok_per_s > 0:
        return output_tok_per_s / (batch / t_min)
    return None


def kv_cache_tokens(memory_bytes: float, weight_bytes: float, kv_bytes_per_token: float, *,
                    memory_fraction: float = 1.0, free_fraction: float = 1.0) -> float:
    """Tokens of context the KV cache holds (0 when the weights do not fit); see the module docstring."""
    free = memory_fraction * memory_bytes - weight_bytes
    return free_fraction * max(free, 0.0) / kv_bytes_per_token
