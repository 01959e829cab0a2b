"""Sizing invariants on a fake curve with the engine's physics (tests/planner/fakes.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.sizing import sizing
from planner.sizing.sizing import Policy, size_batch, size_online
from planner.traffic.routes import LengthDistribution, Route, Slo
from tests.planner.fakes import FakeCurve, key

CURVE = FakeCurve(key())


def route(**values) -> Route:
    """A Route with only mean lengths (so the lengths at the SLO percentile are the means, and no output CV)."""
    base = dict(name="r", model="llama-3.1-8b", traffic="online", rate_rps=10.0, peak_to_mean=1.0, arrival_cv=1.0,
                num_requests=0, jobs_per_month=30.0, deadline_hours=math.nan, input_len=1000.0, output_len=200.0,
                slo_percentile=95.0, ttft_slo_ms=1000.0, tpot_slo_ms=50.0, e2e_slo_ms=math.nan, updates_per_month=0.0)
    v = base | values
    targets = [v.pop(f"{metric}_slo_ms") for metric in ("ttft", "tpot", "e2e")]
    slo = Slo(*(None if math.isnan(t) else t for t in targets))
    lengths = LengthDistribution(v.pop("input_len")), LengthDistribution(v.pop("output_len"))
    return Route(**v, input=lengths[0], output=lengths[1], slo=slo)


def batch(**values) -> Route:
    return route(**(dict(traffic="batch", num_requests=50_000, deadline_hours=4.0) | values))


def test_online_sizing_meets_its_slos():
    r = route(tpot_slo_ms=20.0, ttft_slo_ms=300.0, rate_rps=50.0)
    s = size_online(CURVE, r, tp=1)
    assert s.feasible and s.replicas >= 1 and s.gpus == s.replicas
    assert s.tpot_ms <= 20.0 and s.ttft_ms <= 300.0
    assert 0 < s.peak_utilisation <= Policy().utilisation_cap


def test_in_flight_p99_is_what_one_replica_holds_at_its_share():
    r = route(tpot_slo_ms=15.0, ttft_slo_ms=10_000.0)
    s = size_online(CURVE, r, tp=1)
    assert s.latency is not None and s.latency.meets(r)
    # Little's law: requests in flight on average = arrival rate x mean time in the system; p99 holds more.
    result = s.latency.results[0]
    little = r.peak_rps / s.replicas * float(result.e2e_s.mean())
    assert little <= s.concurrency <= 3 * little + 5


def test_predictions_are_used_at_the_conservative_end_of_the_interval():
    r = route(rate_rps=200.0)
    narrow = size_online(FakeCurve(key(), spread=0.0), r, 1)
    wide = size_online(FakeCurve(key(), spread=0.2), r, 1)
    assert wide.replicas >= narrow.replicas
    assert wide.tpot_ms > narrow.tpot_ms or wide.concurrency < narrow.concurrency


def test_tp_multiplies_gpus():
    s = size_online(CURVE, route(rate_rps=100.0), tp=4)
    assert s.gpus == 4 * s.replicas


def test_impossible_slo_reports_the_closest_miss():
    s = size_online(CURVE, route(tpot_slo_ms=3.0), tp=1)
    assert not s.feasible and s.replicas == 0
    assert s.reason.startswith("misses p95 TPOT by") and "at concurrency 1" in s.reason
    assert s.miss_ratio == pytest.approx(s.tpot_ms / 3.0 - 1.0)


def test_ttft_slo_below_prefill_is_infeasible():
    s = size_online(CURVE, route(ttft_slo_ms=1.0), tp=1)
    assert not s.feasible and "TTFT" in s.reason


def test_peak_and_burstiness_need_more_replicas():
    base = size_online(CURVE, route(rate_rps=100.0), 1).replicas
    assert size_online(CURVE, route(rate_rps=100.0, peak_to_mean=3.0), 1).replicas > base
    tight = dict(rate_rps=100.0, ttft_slo_ms=150.0)
    assert size_online(CURVE, route(arrival_cv=4.0, **tight), 1).replicas >= size_online(CURVE, route(**tight), 1).replicas


def test_tight_ttft_budget_may_pick_a_lower_concurrency():
    r = route(rate_rps=20.0, tpot_slo_ms=40.0, ttft_slo_ms=70.0, arrival_cv=3.0)
    s = size_online(CURVE, r, 1)
    assert s.feasible and s.ttft_ms <= 70.0


slo = st.floats(8.0, 200.0)


@settings(max_examples=40, deadline=None)
@given(tpot=slo, ttft=st.floats(60.0, 3000.0), shrink=st.floats(0.3, 1.0), rate=st.floats(0.5, 300.0),
       cv=st.floats(0.0, 3.0))
def test_a_tighter_slo_never_needs_fewer_gpus(tpot, ttft, shrink, rate, cv):
    loose = size_online(CURVE, route(tpot_slo_ms=tpot, ttft_slo_ms=ttft, rate_rps=rate, arrival_cv=cv), 1)
    for tighter in (route(tpot_slo_ms=tpot * shrink, ttft_slo_ms=ttft, rate_rps=rate, arrival_cv=cv),
                    route(tpot_slo_ms=tpot, ttft_slo_ms=ttft * shrink, rate_rps=rate, arrival_cv=cv)):
        tight = size_online(CURVE, tighter, 1)
        if not loose.feasible:
            assert not tight.feasible
        elif tight.feasible:
            assert tight.gpus >= loose.gpus


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(0.5, 500.0), more=st.floats(1.0, 4.0))
def test_more_traffic_never_needs_fewer_replicas(rate, more):
    assert size_online(CURVE, route(rate_rps=rate * more), 1).replicas >= size_online(CURVE, route(rate_rps=rate), 1).replicas


def test_batch_replicas_finish_before_the_deadline_and_one_fewer_would_not():
    r = batch()
    s = size_batch(CURVE, r, tp=2)
    assert s.feasible and s.gpus == 2 * s.replicas
    budget = r.deadline_hours * 3600 * Policy().batch_efficiency
    assert sizing._batch_run(CURVE, r, s.replicas)[0] <= budget
    if s.replicas > 1:
        assert sizing._batch_run(CURVE, r, s.replicas - 1)[0] > budget
    assert s.job_hours <= r.deadline_hours


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 2_000_000), replicas=st.integers(1, 64))
def test_more_replicas_never_less_capacity(n, replicas):
    r = batch(num_requests=n)
    fewer = sizing._batch_run(CURVE, r, replicas)[0]
    assert sizing._batch_run(CURVE, r, replicas + 1)[0] <= fewer * (1 + 1e-9)


def test_shorter_deadline_needs_more_replicas():
    assert size_batch(CURVE, batch(deadline_hours=0.1), 1).replicas > size_batch(CURVE, batch(), 1).replicas


def test_batch_that_cannot_finish_even_one_request_is_reported():
    s = size_batch(CURVE, batch(deadline_hours=1e-6), 1)
    assert not s.feasible and "longer than" in s.reason


def test_extrapolated_predictions_mark_the_sizing():
    s = size_batch(FakeCurve(key(), measured_max_load=10), batch(), 1)
    assert s.provenance == "extrapolated"
    assert sizing.weakest_provenance(["measured", "predicted"]) == "predicted"
    assert sizing.weakest_provenance(["published", "measured"]) == "published"


def test_predictions_are_memoised_per_curve_and_shape():
    curve = FakeCurve(key())
    r = route()
    size_online(curve, r, 1)
    calls = len(curve.calls)
    size_online(curve, route(rate_rps=77.0), 1)
    assert len(curve.calls) == calls


def test_a_request_longer_than_one_replicas_kv_cache_makes_the_option_infeasible_with_the_reason():
    from dataclasses import replace

    from planner.sizing.options import kv_reason, max_model_len
    long = route(input_len=120_000.0, output_len=1_000.0)
    assert max_model_len(long) == 121_000
    assert kv_reason(long, CURVE) == ""  # 500k tokens hold it
    small = replace(CURVE, kv_cache_tokens=100_000)
    reason = kv_reason(long, small)
    assert "121,000 tokens" in reason and "100,000 tokens" in reason and "KV cache" in reason
