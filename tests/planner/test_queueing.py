"""Queueing formulas against independently computed M/M/c values, and replica-search invariants."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import queueing
from planner.queueing import QueueingError, erlang_b, erlang_c, mean_wait_s, replicas_for, wait_percentile_s


def erlang_c_direct(c: int, a: float) -> float:
    """Textbook Erlang C by direct summation: (a^c/c! * c/(c-a)) / (sum_{k<c} a^k/k! + a^c/c! * c/(c-a))."""
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


def erlang_b_recursive(c: int, a: float) -> float:
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b


@pytest.mark.parametrize("c,a", [(1, 0.5), (2, 1.0), (5, 3.0), (10, 8.0), (20, 15.0), (50, 45.0), (100, 99.0)])
def test_erlang_c_matches_direct_summation(c, a):
    assert erlang_c(c, a) == pytest.approx(erlang_c_direct(c, a), rel=1e-9)


def test_textbook_values():
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)          # M/M/2, rho = 0.5
    assert erlang_c(1, 0.7) == pytest.approx(0.7)            # M/M/1: P(wait) = rho
    assert erlang_b(1, 1.0) == pytest.approx(0.5)


def test_erlang_b_matches_recursion_for_many_servers():
    for c, a in [(500, 480.0), (3000, 2900.0), (12000, 11800.0)]:
        assert erlang_b(c, a) == pytest.approx(erlang_b_recursive(c, a), rel=1e-8)


def test_unstable_queue_waits_forever():
    assert erlang_c(4, 4.0) == 1.0
    assert mean_wait_s(4, 4.0, 1.0, 1.0, 1.0) == math.inf
    assert wait_percentile_s(4, 5.0, 1.0, 1.0, 1.0, 0.95) == math.inf


def test_mm1_mean_wait_and_tail_are_exact():
    lam, mu = 0.8, 1.0
    assert mean_wait_s(1, lam, mu, 1.0, 1.0) == pytest.approx(lam / (mu * (mu - lam)))
    # M/M/1: P(W > t) = rho * exp(-(mu - lam) t)  ->  t_p = ln(rho / (1 - p)) / (mu - lam)
    assert wait_percentile_s(1, lam, mu, 1.0, 1.0, 0.95) == pytest.approx(math.log(0.8 / 0.05) / 0.2)


def test_allen_cunneen_scales_with_variability():
    base = mean_wait_s(10, 8.0, 1.0, 1.0, 1.0)
    assert mean_wait_s(10, 8.0, 1.0, 4.0, 1.0) == pytest.approx(base * 2.5)
    assert mean_wait_s(10, 8.0, 1.0, 0.0, 0.0) == 0.0


def test_wait_percentile_is_zero_when_few_arrivals_wait():
    assert erlang_c(40, 20.0) < 0.05
    assert wait_percentile_s(40, 20.0, 1.0, 1.0, 1.0, 0.95) == 0.0


def test_replicas_for_finds_the_smallest_meeting_the_budget():
    sized = replicas_for(rate=30.0, service_rate_per_replica=4.0, ca2=1.0, cs2=1.0, wait_budget_s=0.5,
                         percentile=0.99, slots_per_replica=4)
    assert sized.wait_pct_s <= 0.5 and sized.utilisation < 1
    fewer = sized.replicas - 1
    assert wait_percentile_s(fewer * 4, 30.0, 1.0, 1.0, 1.0, 0.99) > 0.5 or 30.0 / (fewer * 4.0) >= 1


def test_replicas_for_respects_utilisation_cap():
    sized = replicas_for(100.0, 10.0, 0.0, 0.0, wait_budget_s=100.0, utilisation_cap=0.8)
    assert sized.replicas == 13 and sized.utilisation <= 0.8


def test_zero_budget_means_almost_nobody_waits():
    sized = replicas_for(10.0, 1.0, 1.0, 1.0, wait_budget_s=-1.0, percentile=0.95, slots_per_replica=1)
    assert sized.wait_probability <= 0.05 and sized.wait_pct_s == 0.0


@pytest.mark.parametrize("kwargs", [dict(rate=0.0), dict(rate=-1.0), dict(service_rate_per_replica=0.0),
                                    dict(utilisation_cap=1.5), dict(slots_per_replica=0)])
def test_replicas_for_rejects_bad_inputs(kwargs):
    args = dict(rate=1.0, service_rate_per_replica=1.0, ca2=1.0, cs2=1.0, wait_budget_s=1.0) | kwargs
    with pytest.raises(QueueingError):
        replicas_for(**args)


def test_bad_percentile_is_rejected():
    with pytest.raises(QueueingError):
        wait_percentile_s(2, 1.0, 1.0, 1.0, 1.0, 95.0)


rates = st.floats(0.1, 500.0)
budgets = st.floats(0.0, 5.0)


@settings(max_examples=60, deadline=None)
@given(rate=rates, mu=st.floats(0.2, 50.0), ca=st.floats(0.0, 4.0), budget=budgets, slots=st.integers(1, 64))
def test_more_load_never_fewer_replicas_and_tighter_budget_never_fewer(rate, mu, ca, budget, slots):
    base = replicas_for(rate, mu, ca**2, 1.0, budget, 0.95, slots).replicas
    assert replicas_for(rate * 1.5, mu, ca**2, 1.0, budget, 0.95, slots).replicas >= base
    assert replicas_for(rate, mu, ca**2, 1.0, budget / 2, 0.95, slots).replicas >= base
    assert replicas_for(rate, mu, (ca + 1) ** 2, 1.0, budget, 0.95, slots).replicas >= base


@settings(max_examples=60, deadline=None)
@given(c=st.integers(1, 400), a=st.floats(0.05, 300.0))
def test_more_servers_never_more_waiting(c, a):
    if a >= c:
        return
    assert erlang_c(c + 1, a) <= erlang_c(c, a) + 1e-12
    assert mean_wait_s(c + 1, a, 1.0, 1.0, 1.0) <= mean_wait_s(c, a, 1.0, 1.0, 1.0) + 1e-12


def test_load_bound():
    assert queueing.load_bound(10.0, 5.0, 1.0) == 3      # exactly 2 replicas would be rho = 1: unstable
    assert queueing.load_bound(9.0, 5.0, 0.9) == 2
