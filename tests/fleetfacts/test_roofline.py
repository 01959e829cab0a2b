"""fleetfacts.roofline: the decode bound and KV capacity, on hand-computed numbers and invariants."""

from __future__ import annotations

import pytest

from fleetfacts import roofline


def test_min_step_time_reads_weights_and_kv_over_the_aggregate_bandwidth():
    t = roofline.min_step_time_s(16e9, 131072.0, batch=8, mean_context=1000, bandwidth_bytes_s=4.8e12, tp=2)
    assert t == pytest.approx((16e9 + 8 * 1000 * 131072.0) / (2 * 4.8e12))
    assert roofline.weights_read_s(16e9, 4.8, tp=2) == pytest.approx(16e9 / 9.6e12)
    with pytest.raises(ValueError, match="bandwidth"):
        roofline.min_step_time_s(1.0, 1.0, 1, 1, bandwidth_bytes_s=0.0)


def test_roofline_fraction_prefers_tpot_and_needs_a_measurement():
    kw = dict(weight_bytes=16e9, kv_bytes_per_token=131072.0, batch=4, input_len=1000, output_len=200,
              bandwidth_bytes_s=4.8e12)
    t_min = roofline.min_step_time_s(16e9, 131072.0, 4, 1100, 4.8e12)
    assert roofline.roofline_fraction(**kw, tpot_mean_ms=2 * t_min * 1000) == pytest.approx(0.5)
    assert roofline.roofline_fraction(**kw, output_tok_per_s=4 / t_min) == pytest.approx(1.0)
    assert roofline.roofline_fraction(**kw) is None
    assert roofline.roofline_fraction(**{**kw, "batch": 0}, tpot_mean_ms=5.0) is None


@pytest.mark.parametrize("memory_fraction, free_fraction", [(1.0, 0.9), (0.92, 1.0)])
def test_kv_capacity_from_memory_left_after_weights(memory_fraction, free_fraction):
    memory = roofline.replica_memory_bytes(80, tp=2)
    assert memory == 2 * 80 * 2**30
    tokens = roofline.kv_cache_tokens(memory, 16e9, 131072.0, memory_fraction=memory_fraction,
                                      free_fraction=free_fraction)
    assert tokens == pytest.approx(free_fraction * (memory_fraction * memory - 16e9) / 131072.0)
    more = roofline.kv_cache_tokens(2 * memory, 16e9, 131072.0, memory_fraction=memory_fraction,
                                    free_fraction=free_fraction)
    assert more > tokens  # more memory never holds fewer tokens
    assert roofline.kv_cache_tokens(memory, 2 * memory, 131072.0) == 0.0  # weights do not fit
