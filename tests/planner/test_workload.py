"""Arrival generators: mean rate and CV on long seeded samples, diurnal shape, replay, bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

from fleetfacts.errors import InputError
from planner.traffic import workload

N = 200_000


def test_poisson_has_the_rate_and_cv_one():
    rate, cv = workload.rate_and_cv(workload.poisson(12.5, N, seed=1))
    assert rate == pytest.approx(12.5, rel=0.01) and cv == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("cv", [0.0, 0.3, 2.0, 5.0])
def test_gamma_has_the_rate_and_cv(cv):
    times = workload.gamma(3.0, cv, N, seed=2)
    rate, measured = workload.rate_and_cv(times)
    assert rate == pytest.approx(3.0, rel=0.03) and measured == pytest.approx(cv, rel=0.05, abs=1e-9)
    assert np.all(np.diff(times) >= 0)


def test_generators_are_seeded():
    assert np.array_equal(workload.gamma(2.0, 3.0, 100, seed=7), workload.gamma(2.0, 3.0, 100, seed=7))
    assert not np.array_equal(workload.poisson(2.0, 100, seed=7), workload.poisson(2.0, 100, seed=8))


def test_diurnal_follows_the_hourly_multipliers():
    multipliers = np.where(np.arange(24) < 12, 0.5, 1.5)
    days = 20
    times = workload.diurnal(2.0, multipliers, days * 86_400.0, seed=3)
    hours = (times // 3600 % 24).astype(int)
    per_hour = np.bincount(hours, minlength=24) / (days * 3600.0)
    assert per_hour[:12].mean() == pytest.approx(1.0, rel=0.02)
    assert per_hour[12:].mean() == pytest.approx(3.0, rel=0.02)
    assert np.all(np.diff(times) >= 0)
    shifted = workload.diurnal(2.0, multipliers, 3600.0 * 12, seed=3, start_hour=12)
    assert len(shifted) / (3600 * 12) == pytest.approx(3.0, rel=0.05)


def test_replay_sorts_and_starts_at_zero():
    assert list(workload.replay([105.0, 100.0, 101.5])) == [0.0, 1.5, 5.0]


@pytest.mark.parametrize("call", [
    lambda: workload.poisson(0.0, 10), lambda: workload.poisson(-1.0, 10), lambda: workload.gamma(1.0, -1.0, 10),
    lambda: workload.poisson(1.0, -5), lambda: workload.diurnal(1.0, [1.0] * 23, 100.0),
    lambda: workload.diurnal(1.0, [0.0] * 24, 100.0), lambda: workload.rate_and_cv([1.0, 2.0]),
])
def test_bad_arguments_raise_input_error(call):
    with pytest.raises(InputError):
        call()
