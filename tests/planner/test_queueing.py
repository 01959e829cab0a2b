"""The utilisation floor of an online fleet."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.sizing import queueing
from planner.sizing.queueing import QueueingError


def test_load_bound():
    assert queueing.load_bound(10.0, 5.0, 1.0) == 3      # exactly 2 replicas would be rho = 1: unstable
    assert queueing.load_bound(9.0, 5.0, 0.9) == 2


@pytest.mark.parametrize("args", [(0.0, 1.0, 0.9), (-1.0, 1.0, 0.9), (1.0, 0.0, 0.9), (1.0, 1.0, 1.5),
                                  (float("nan"), 1.0, 0.9)])
def test_load_bound_rejects_bad_inputs(args):
    with pytest.raises(QueueingError):
        queueing.load_bound(*args)


@settings(max_examples=50, deadline=None)
@given(st.floats(0.1, 1e4), st.floats(0.1, 1e3), st.floats(0.05, 1.0))
def test_the_floor_keeps_utilisation_under_the_cap_with_one_replica_fewer_over_it(rate, mu, cap):
    n = queueing.load_bound(rate, mu, cap)
    assert rate / (n * mu) <= cap + 1e-9 and rate / (n * mu) < 1
    assert n == 1 or rate / ((n - 1) * mu) > cap - 1e-9 or rate / ((n - 1) * mu) >= 1
