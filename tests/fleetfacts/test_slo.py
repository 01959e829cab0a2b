"""The one SLO verdict (fleetfacts.slo): every window, pooled small windows, attainment."""

import math

import numpy as np

from fleetfacts.slo import Targets, judge

NAN = math.nan


def steady(seconds: float, rate: float, ttft_s: float = 0.1, tpot_s: float = 0.02):
    t = np.arange(0.0, seconds, 1.0 / rate)
    return t, np.full(t.size, ttft_s), np.full(t.size, tpot_s), np.full(t.size, ttft_s + 1.0)


def test_one_slow_minute_breaks_its_window_only_and_is_named():
    t, ttft, tpot, e2e = steady(300, 2.0)
    ttft[(t >= 120) & (t < 180)] = 0.9
    check = judge(t, ttft, tpot, e2e, Targets(ttft_ms=300, tpot_ms=30, window_s=60))
    assert check.windows == 5
    assert check.windows_in_breach == 1
    assert check.start_s[check.worst_window] == 120
    assert check.worst_ttft_ms == 900
    assert not check.ok
    assert "120-180 s" in check.window_lines()[0] and "TTFT p95 900 ms > 300" in check.window_lines()[0]


def test_a_whole_run_percentile_can_pass_where_a_window_fails():
    t, ttft, tpot, e2e = steady(1200, 2.0)
    ttft[(t >= 600) & (t < 660)] = 0.9  # 5% of requests: the whole-run p95 sits at the edge of the slow minute
    whole = judge(t, ttft, tpot, e2e, Targets(ttft_ms=300, window_s=0, attainment=0.9))
    per_minute = judge(t, ttft, tpot, e2e, Targets(ttft_ms=300, window_s=60, attainment=0.9))
    assert whole.windows == 1 and whole.ok
    assert per_minute.windows_in_breach == 1 and not per_minute.ok


def test_a_window_too_small_for_a_percentile_is_pooled_with_the_next_not_skipped():
    t = np.concatenate([np.arange(0, 60, 10.0), np.arange(60, 120, 1.0)])  # 6 requests, then 60
    ttft = np.full(t.size, 0.1)
    ttft[0] = 5.0  # the slow request sits in the sparse first minute
    tpot = np.full(t.size, 0.01)
    check = judge(t, ttft, tpot, ttft + 1, Targets(ttft_ms=300, percentile=99, window_s=60))
    assert check.windows == 1  # 6 < 100 requests needed for a p99 on its own: pooled with the 60 after it
    assert check.requests[0] == t.size
    assert check.worst_ttft_ms > 300  # the slow request still counts


def test_unserved_requests_miss_every_target_and_count_as_unbounded_ttft():
    t, ttft, tpot, e2e = steady(60, 1.0)
    e2e[:10] = NAN
    ttft[:10] = NAN
    check = judge(t, ttft, tpot, e2e, Targets(ttft_ms=300, window_s=60))
    assert check.attainment == 50 / 60
    assert math.isinf(check.worst_ttft_ms)
    assert "unbounded" in check.describe()


def test_attainment_counts_every_target_and_one_token_requests_pass_tpot():
    t, ttft, tpot, e2e = steady(100, 1.0)
    tpot[:5] = 0.05   # over the TPOT target
    tpot[5:10] = NAN  # one-token requests: no TPOT
    e2e[10:12] = 9.0  # over the end-to-end target
    check = judge(t, ttft, tpot, e2e, Targets(ttft_ms=300, tpot_ms=30, e2e_ms=5000, window_s=0))
    assert check.attainment == 93 / 100


def test_requests_before_the_warm_up_are_not_judged():
    t, ttft, tpot, e2e = steady(120, 1.0)
    ttft[t < 30] = 2.0
    assert judge(t, ttft, tpot, e2e, Targets(ttft_ms=300, window_s=60), warmup_s=30).ok
    assert not judge(t, ttft, tpot, e2e, Targets(ttft_ms=300, window_s=60)).ok


def test_the_busiest_window_is_the_one_with_the_highest_arrival_rate():
    t = np.sort(np.concatenate([np.arange(0, 300, 1.0), np.arange(180, 240, 0.25)]))
    ones = np.full(t.size, 0.1)
    check = judge(t, ones, ones / 10, ones + 1, Targets(ttft_ms=300, window_s=60))
    assert check.busiest_window_start_s == 180
