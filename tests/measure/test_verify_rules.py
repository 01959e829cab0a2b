"""The verdict rules of `measure verify`, on hand-made measurements (no server)."""

from __future__ import annotations

import numpy as np
import pytest

from fleetfacts.errors import InputError
from measure import verify
from measure.loadgen import LoadResult, RequestResult, RequestSpec

PLAN = {"replica_output_tok_per_s": 100.0, "replica_output_tok_per_s_low": 60.0,
        "replica_output_tok_per_s_high": 140.0, "replicas": 4}


def test_the_band_is_the_plans_interval_or_at_least_the_run_to_run_spread():
    assert verify.band(PLAN, 10.0) == pytest.approx((6.0, 14.0))  # the plan's +-40%
    narrow = {**PLAN, "replica_output_tok_per_s_low": 99.0, "replica_output_tok_per_s_high": 101.0}
    spread = verify.RUN_TO_RUN_SPREAD
    assert verify.band(narrow, 10.0) == pytest.approx((10 * (1 - spread), 10 * (1 + spread)))


@pytest.mark.parametrize(("measured", "slo", "expected"), [
    (11.0, 20.0, verify.WITHIN),
    (15.0, 20.0, f"{verify.DRIFT} (worse than predicted)"),
    (5.0, 20.0, f"{verify.DRIFT} (better than predicted)"),
    (21.0, 20.0, verify.AT_RISK),
    (11.0, None, verify.WITHIN),
    (None, 20.0, verify.AT_RISK),
    (None, None, verify.NOT_MEASURED),
])
def test_judge(measured, slo, expected):
    assert verify.judge("ttft_p95_ms", measured, 10.0, slo, PLAN).verdict == expected


def test_exit_code_is_the_worst_verdict():
    def v(verdict):
        return verify.Verdict("m", 1.0, 1.0, None, None, None, verdict)
    assert verify.exit_code([v(verify.WITHIN)]) == verify.EXIT_MEETS
    assert verify.exit_code([v(verify.WITHIN), v(f"{verify.DRIFT} (worse than predicted)")]) == verify.EXIT_DRIFT
    assert verify.exit_code([v(verify.DRIFT), v(verify.AT_RISK)]) == verify.EXIT_AT_RISK


def test_share_scales_the_peak_rate_to_the_replicas_under_test():
    route = {"rate_rps": 10.0, "peak_to_mean": 2.0}
    share = verify.share_of(route, PLAN, 1)
    assert share.rate_rps == pytest.approx(5.0) and share.fraction == pytest.approx(0.25)
    with pytest.raises(InputError, match="between 1 and the plan's 4"):
        verify.share_of(route, PLAN, 5)


def test_synthetic_lengths_follow_the_routes_quantiles():
    route = {"input_len_mean": 500.0, "input_len_p50": 400.0, "input_len_p95": 2000.0, "input_len_p99": 4000.0}
    lengths = verify.sample_lengths(route, "input_len", 20000, np.random.default_rng(0))
    assert np.percentile(lengths, 50) == pytest.approx(400, rel=0.05)
    assert np.percentile(lengths, 95) == pytest.approx(2000, rel=0.05)
    assert lengths.max() <= 4000 and lengths.min() >= 1
    only_mean = {"input_len_mean": 300.0, "input_len_p50": np.nan, "input_len_p95": np.nan, "input_len_p99": np.nan}
    assert set(verify.sample_lengths(only_mean, "input_len", 10, np.random.default_rng(0))) == {300}


def _load(ends, e2e=1.0):
    return LoadResult(tuple(RequestResult(True, e - e2e, e, 0.1, (), 8) for e in ends), duration_s=max(ends))


def test_served_throughput_falls_below_offered_when_the_deployment_falls_behind():
    sends = tuple(RequestSpec(8, 8, float(t)) for t in range(10))  # one a second, 8 tokens each
    kept_up = _load([t + 1.0 for t in range(10)])
    served, offered = verify.throughput(kept_up, sends)
    assert served == pytest.approx(offered) == pytest.approx(80 / 10)
    behind = LoadResult(tuple(RequestResult(True, float(t), 1.0 + 3.0 * t, 0.1, (), 8) for t in range(10)),
                        duration_s=28.0)  # one completion every 3 s
    served, offered = verify.throughput(behind, sends)
    assert served < 0.5 * offered
    assert verify._throughput_verdict(behind, sends, PLAN).verdict == f"{verify.DRIFT} (worse than predicted)"


def test_latency_is_judged_against_the_plans_own_latency_interval():
    plan = {**PLAN, "ttft_pred_ms_low": 30.0, "ttft_pred_ms_high": 60.0}
    assert verify.latency_band(plan, "ttft", 40.0) == pytest.approx((30.0, 60.0))
    tight = {**PLAN, "ttft_pred_ms_low": 39.0, "ttft_pred_ms_high": 41.0}
    spread = verify.RUN_TO_RUN_SPREAD
    assert verify.latency_band(tight, "ttft", 40.0) == pytest.approx((40 * (1 - spread), 40 * (1 + spread)))
    assert verify.latency_band(PLAN, "ttft", 10.0) == verify.band(PLAN, 10.0)   # an older plan: no columns
    m = verify.Measurement(num_requests=3, duration_s=1.0, input_tokens=3, output_tokens=3,
                           ttft_ms=[55.0, 56.0, 57.0], tpot_ms=[5.0] * 3, itl_ms=[], e2e_ms=[100.0] * 3)
    route = {"slo_percentile": 95.0, "ttft_slo_ms": 300.0, "tpot_slo_ms": None, "e2e_slo_ms": None}
    row = {**plan, "ttft_pred_ms": 40.0, "tpot_pred_ms": 5.0, "e2e_pred_ms": 100.0}
    ttft = verify.verdicts(m, row, route, _load([1.0, 1.1, 1.2]), ())[0]
    assert ttft.verdict == verify.WITHIN and ttft.high == pytest.approx(60.0)


def test_a_run_the_prefix_cache_served_is_flagged():
    server = {"counters": {"prefix_cache_queries": 1000.0, "prefix_cache_hits": 870.0}}
    assert verify.prefix_hit_rate(server) == pytest.approx(0.87)
    assert verify.prefix_hit_rate({"counters": {}}) is None and verify.prefix_hit_rate(None) is None
    flagged = verify.prefix_verdict(0.87, {"prefix_hit_rate": 0.0})
    assert flagged.verdict.startswith(verify.DRIFT) and "87%" in flagged.verdict
    assert verify.prefix_verdict(0.87, {"prefix_hit_rate": 0.9}).verdict == verify.WITHIN   # a route that shares
    assert verify.prefix_verdict(0.01, {"prefix_hit_rate": None}).verdict == verify.WITHIN
    assert verify.prefix_verdict(None, {}).verdict == verify.NOT_MEASURED
