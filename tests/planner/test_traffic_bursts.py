"""Burst descriptors and the busiest-hour peak_to_mean that `planner traffic` derives from a log (issue 34)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fleetfacts.errors import InputError
from planner.cli import main
from planner.traffic import logs as traffic
from tests.conftest import REPO

AZURE = REPO / "examples" / "traces" / "azure_llm_2023_code.csv"
EPOCH = 1_767_225_600  # 2026-01-01 00:00 UTC
DAY_S = 86_400.0


def write_log(tmp_path, t_s: np.ndarray, name: str = "log.csv"):
    """A generic CSV log (epoch seconds) with one request per arrival time."""
    path = tmp_path / name
    pd.DataFrame({"timestamp": EPOCH + np.asarray(t_s), "prompt_tokens": 100,
                  "completion_tokens": 10}).to_csv(path, index=False)
    return path


def test_a_known_ten_second_burst_gives_its_exact_ratio():
    background = np.arange(0.0, 601.0)  # one arrival a second over 600 s
    burst = 100.0 + np.arange(50) * 0.1  # 50 more in [100, 105)
    t = np.sort(np.concatenate([background, burst]))
    b = traffic.burst_descriptors(t)
    mean = (t.size - 1) / 600.0
    assert b.peak_10s == pytest.approx(60 / 10 / mean)  # 10 background + 50 burst arrivals in one 10 s window
    assert b.peak_60s == pytest.approx(110 / 60 / mean)
    assert b.peak_300s == pytest.approx(350 / 300 / mean)


def test_the_window_is_half_open_and_starts_at_an_arrival():
    t = np.array([0.0, 5.0, 10.0, 10.0, 10.0, 20.0, 400.0])
    b = traffic.burst_descriptors(t, mean_rps=1.0)
    assert b.peak_10s == pytest.approx(4 / 10)  # [10, 20) holds three; [5, 15) holds four; 20 is outside [10, 20)


def test_evenly_spaced_arrivals_have_no_bursts_and_dispersion_zero():
    b = traffic.burst_descriptors(np.arange(0.0, 3600.0, 0.5))
    assert (b.peak_10s, b.peak_60s, b.peak_300s) == pytest.approx((1.0, 1.0, 1.0), rel=1e-3)
    assert b.dispersion_60s == 0.0


def test_poisson_arrivals_give_ratios_near_one_and_dispersion_near_one():
    rate, span = 20.0, 4 * 3600.0
    rng = np.random.default_rng(7)
    t = np.sort(rng.uniform(0.0, span, rng.poisson(rate * span)))
    b = traffic.burst_descriptors(t, start_s=0.0, end_s=span)
    for w, ratio in b.peaks().items():
        # the busiest of ~span/w windows: a few standard deviations (sqrt(rate w)) above the mean count
        assert 1.0 < ratio < 1.0 + 6.0 / math.sqrt(rate * w), w
    assert b.peak_10s > b.peak_60s > b.peak_300s
    assert b.dispersion_60s == pytest.approx(1.0, abs=0.3)  # 240 bins: sd of variance/mean ~ 0.09


def test_sliding_peak_minute_is_at_least_the_aligned_one():
    rng = np.random.default_rng(3)
    t = np.sort(np.concatenate([rng.uniform(0, 1800, 2000), rng.uniform(610, 640, 400)]))
    b = traffic.burst_descriptors(t, start_s=0.0, end_s=1800.0, mean_rps=1.0)
    assert b.peak_60s >= traffic.peak_minute_rps(t, 1800.0)


def test_clumped_arrivals_are_overdispersed():
    rng = np.random.default_rng(5)
    clumps = rng.uniform(0, 3600, 200)
    t = np.sort(np.repeat(clumps, 20))  # 20 requests at each instant
    assert traffic.burst_descriptors(t, start_s=0.0, end_s=3600.0).dispersion_60s > 10


def test_a_log_shorter_than_a_window_has_nan_there():
    b = traffic.burst_descriptors(np.linspace(0.0, 30.0, 31))
    assert b.peak_10s == pytest.approx(1.0, rel=0.05)
    assert math.isnan(b.peak_60s) and math.isnan(b.peak_300s) and math.isnan(b.dispersion_60s)
    assert b == traffic.burst_descriptors(np.linspace(0.0, 30.0, 31))  # NaN fields still compare equal


@pytest.mark.parametrize("t, kwargs, message", [
    ([1.0], {}, "at least 2 arrivals"),
    ([1.0, 1.0], {}, "extent > 0"),
    ([0.0, 1.0], {"mean_rps": 0.0}, "mean rate > 0"),
])
def test_unusable_input_raises(t, kwargs, message):
    with pytest.raises(InputError, match=message):
        traffic.burst_descriptors(np.array(t), **kwargs)


def test_bundled_code_log_descriptors_in_their_published_ranges():
    (stats,), _ = traffic.route_traffic(traffic.read_log(AZURE))
    b = stats.bursts
    assert 12 < b.peak_10s < 20 and 4.2 < b.peak_60s < 5.2 and 1.5 < b.peak_300s < 2.5  # issue 34: 16x / 4.7x / ~2x
    assert b.peak_10s > b.peak_60s > b.peak_300s and b.dispersion_60s > 10  # clumped, far from Poisson
    assert stats.peak_to_mean == 1.0  # one hour of log: replayed as it is


def test_traffic_writes_peak_to_mean_one_for_a_log_shorter_than_a_day(tmp_path, capsys):
    out = tmp_path / "routes.csv"
    t = np.concatenate([np.arange(0.0, 3600.0, 2.0), 1000 + np.arange(100) * 0.05])  # a burst, 1 h of log
    assert main(["traffic", "--log", str(write_log(tmp_path, np.sort(t))), "--out", str(out)]) == 0
    row = pd.read_csv(out).iloc[0]
    assert row["peak_to_mean"] == 1.0
    assert "less than a day" in row["notes"] and "peak 10 s" in row["notes"]


def test_traffic_writes_the_busiest_hour_over_the_mean_for_a_two_day_log(tmp_path):
    background = np.arange(0.0, 2 * DAY_S + 1, 10.0)  # 0.1 req/s for 48 h
    busy = 30 * 3600.0 + 1.0 + np.arange(0.0, 3600.0, 2.0)  # +0.5 req/s in hour 30 (counted from the first arrival)
    t = np.sort(np.concatenate([background, busy]))
    out = tmp_path / "routes.csv"
    assert main(["traffic", "--log", str(write_log(tmp_path, t)), "--out", str(out)]) == 0
    row = pd.read_csv(out).iloc[0]
    mean = (t.size - 1) / (t[-1] - t[0])
    assert row["peak_to_mean"] == pytest.approx((360 + 1800) / 3600.0 / mean, rel=1e-5)
    assert "busiest full hour" in row["notes"]


def test_the_busiest_hour_needs_a_day_of_log():
    t = np.arange(0.0, DAY_S + 1, 5.0)
    assert traffic.peak_hour_rps(t, DAY_S) == pytest.approx(720 / 3600.0)
    assert traffic.peak_hour_rps(t, DAY_S - 1) is None


def test_cli_prints_each_routes_descriptors(tmp_path, capsys):
    chat = np.arange(0.0, 600.0, 1.0)
    search = np.sort(np.concatenate([np.arange(0.5, 600.0, 4.0), 300 + np.arange(40) * 0.1]))
    frame = pd.concat([pd.DataFrame({"timestamp": EPOCH + chat, "route": "chat"}),
                       pd.DataFrame({"timestamp": EPOCH + search, "route": "search"})]).sort_values("timestamp")
    path = tmp_path / "gw.csv"
    frame.assign(prompt_tokens=100, completion_tokens=10).to_csv(path, index=False)
    assert main(["traffic", "--log", str(path), "--out", str(tmp_path / "routes.csv")]) == 0
    printed = capsys.readouterr().out.splitlines()
    chat_line = next(line for line in printed if line.startswith("chat: peak 10 s"))
    assert "300 s 1.0x" in chat_line and "dispersion at 60 s 0" in chat_line
    search_line = next(line for line in printed if line.startswith("search: peak 10 s"))
    total = len(chat) + len(search)
    search_rate = (total - 1) / (max(chat[-1], search[-1]) - chat[0]) * len(search) / total  # the log's rate x share
    assert f"10 s {(40 + 3) / 10 / search_rate:.1f}x" in search_line  # the 40-request burst + 3 background arrivals
