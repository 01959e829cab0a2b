"""A route parsed from a ROUTES row: its length distributions as sizing and the simulator read them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.traffic.routes import LengthDistribution

SIM_ROUTE = {"name": "chat", "rate_rps": 20.0, "peak_to_mean": 1.0, "arrival_cv": 1.0, "input_len_mean": 800.0,
             "input_len_p50": 600.0, "input_len_p95": 2000.0, "input_len_p99": 3000.0, "output_len_mean": 150.0,
             "output_len_p50": 120.0, "output_len_p95": 400.0, "output_len_p99": 600.0}


def test_length_sampler_reproduces_quantiles_and_mean():
    sampler = LengthDistribution.from_row(SIM_ROUTE, "input_len")
    x = sampler.sample(200_000, 1)
    assert sampler.mean_matched and np.mean(x) == pytest.approx(800.0, rel=0.02)
    assert np.percentile(x, [50, 95, 99]) == pytest.approx([600, 2000, 3000], rel=0.03)
    only_mean = LengthDistribution.from_row({"output_len_mean": 42.0}, "output_len")
    assert set(only_mean.sample(10)) == {42}


def test_length_percentiles_and_spread_from_the_route_row():
    row = {"input_len_mean": 800.0, "input_len_p50": 500.0, "input_len_p95": 3000.0, "input_len_p99": math.nan,
           "output_len_mean": 200.0, "output_len_p50": 150.0, "output_len_p95": 600.0, "output_len_p99": math.nan}
    assert LengthDistribution.from_row(row, "input_len").at_percentile(95) == 3000.0
    assert LengthDistribution.from_row(row, "input_len").at_percentile(99) == 800.0   # no p99: the mean
    assert LengthDistribution.from_row(row, "input_len").at_percentile(90) == 3000.0  # next percentile up
    sigma = math.log(600 / 150) / 1.6449
    assert LengthDistribution.from_row(row, "output_len").cv2() == pytest.approx(math.expm1(sigma**2))
    assert LengthDistribution.from_row({"output_len_mean": 3.0, "output_len_p50": math.nan}, "output_len").cv2() is None
