"""Latency under load: async scheduling, the server front end fitted on open-loop rows, predictions, ranking."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from fleetfacts.arrivals import arrival_times
from planner import latency
from planner.cli import main as cli_main
from planner.engine.curves import GroupKey, fit_group
from planner.engine.frontend import BACKLOG_BIN_S, LOAD_WINDOW_S, FrontEnd, StreamLoad, stream_load
from planner.latency import server_fit
from planner.latency.simulate import simulate
from planner.planning.catalog import load_inputs
from planner.planning.plan import make_plan
from planner.planning.plan_files import read_plan
from planner.sizing.assumptions import Assumptions
from planner.traffic.routes import LengthDistribution
from tests.planner.fakes import online_route, synthetic_profile_rows, write_synthetic_inputs
from tests.planner.sim_fakes import SimCurve
from tests.planner.test_cli import invoke

# The server the synthetic rows are generated with (seconds; prefill 15% faster than the curve): what the
# fit must recover.
TRUE_FRONT_END = FrontEnd(0.004, 2e-6, 0.006, 4e-5, 0.03, prefill_scale=0.85)
# (input, output, rate/s) of the synthetic open-loop rows: light load to near the front end's limit, and
# prefill-heavy loads whose TPOT shows the prefill speed.
LOADS = [(256, 256, r) for r in (2, 8, 16, 24)] + [(2048, 256, r) for r in (1, 4, 8)] + [(512, 1024, r) for r in (2, 6)] \
    + [(2048, 64, r) for r in (30, 50)]


@dataclasses.dataclass(frozen=True, eq=False)
class AsyncCurve(SimCurve):
    async_scheduling: bool = True


@dataclasses.dataclass(frozen=True, eq=False)
class ServedCurve(SimCurve):
    """A fake curve served through an OpenAI server (planner.engine.frontend)."""

    front_end: FrontEnd | None = None


def test_async_scheduling_makes_an_arrival_wait_one_more_iteration():
    """A prompt arriving mid-iteration joins the iteration after next when the next was already scheduled."""
    arrivals = [0.0, 0.0505]  # the second arrives during a decode iteration of the first
    ttft = {}
    for lag in (False, True):
        curve = AsyncCurve(async_scheduling=lag)
        ttft[lag] = simulate(curve, arrivals, [10, 300], [2000, 50]).ttft_s[1]
    decode_step = SimCurve().step_time_s(1, 10 + 50)  # one decode iteration of the first request, roughly
    assert ttft[True] - ttft[False] == pytest.approx(decode_step, rel=0.05)


def _curve():
    rows = pd.DataFrame(synthetic_profile_rows("vllm", "h100"))
    key = GroupKey("vllm", "0.26.0", "h100", "llama-3.1-8b", "bf16", 1)
    curve = fit_group(key, rows)
    assert curve is not None
    return key, rows, curve


def _server_rows(curve) -> pd.DataFrame:
    """Open-loop rows 'measured' on the curve with TRUE_FRONT_END (seeded arrivals, recorded seeds)."""
    served = dataclasses.replace(curve, front_end=TRUE_FRONT_END)
    base = {c: curve.points.iloc[0][c] for c in ("engine", "engine_version", "gpu", "model", "precision", "tp",
                                                 "provenance", "source", "date", "kv_cache_tokens", "max_num_seqs",
                                                 "max_num_batched_tokens")}
    rows = []
    for seed, (i, o, rate) in enumerate(LOADS):
        n = 400
        t = np.asarray(arrival_times(n, rate, "poisson", seed))
        r = simulate(served, t, [i] * n, [o] * n)
        rows.append({**base, "mode": "rate", "input_len": i, "output_len": o, "request_rate": rate,
                     "arrival": "poisson", "arrival_seed": seed, "num_requests": n, "status": "ok",
                     "output_tok_per_s": n * o / r.makespan_s,
                     "ttft_p50_ms": np.percentile(r.ttft_s, 50) * 1000, "ttft_p99_ms": np.percentile(r.ttft_s, 99) * 1000,
                     "tpot_p50_ms": np.nanpercentile(r.tpot_s, 50) * 1000,
                     "tpot_p99_ms": np.nanpercentile(r.tpot_s, 99) * 1000,
                     "ttft_mean_ms": np.mean(r.ttft_s) * 1000, "tpot_mean_ms": np.nanmean(r.tpot_s) * 1000,
                     "e2e_mean_ms": np.mean(r.e2e_s) * 1000})
    return pd.DataFrame(rows)


def test_front_end_fit_recovers_the_delays_it_was_generated_with():
    key, rows, curve = _curve()
    server = _server_rows(curve)
    calibrated = latency.calibrate(curve, server)
    fe = calibrated.front_end
    assert fe is not None and fe.basis.startswith(f"measured: {len(LOADS)} open-loop server rows")
    assert fe.rel_error < 0.05
    assert fe.prefill_scale == pytest.approx(TRUE_FRONT_END.prefill_scale, abs=0.03)
    # Parameters trade off against each other on p50/p99; what they imply must match: utilisation and delays.
    for i, o, rate in ((256, 256, 20), (2048, 256, 6)):
        assert fe.utilisation(rate, o) == pytest.approx(TRUE_FRONT_END.utilisation(rate, o), rel=0.25)
        assert fe.mean_delay_s(i, rate, o) == pytest.approx(TRUE_FRONT_END.mean_delay_s(i, rate, o), rel=0.3)


def test_validate_latency_predicts_held_out_rows():
    key, rows, curve = _curve()
    group = pd.concat([rows, _server_rows(curve)], ignore_index=True)
    table = latency.validate_latency(group.assign(config="default", pp=1))
    assert len(table) == len(LOADS)
    summary = latency.latency_summary(table).iloc[0]
    assert summary["ttft_p50_median"] < 0.1 and summary["tpot_p50_median"] < 0.05
    assert summary["throughput_median"] < 0.05


@pytest.mark.parametrize("rate", [5.0, 15.0, 19.0, 21.5])
def test_the_analytic_tier_and_the_simulator_share_one_front_end_model(rate):
    """Issue 36, item 2: the steady-state delay the closed forms add (mean_delay_s) is the simulator's
    per-request delay (delays_s) on a load that has lasted at that rate, also above the utilisation a 4 s load
    can build (where an M/M/1 mean would keep growing: 19 req/s here is rho 0.88 and 21.5 is 0.97)."""
    fe = FrontEnd(0.004, 2e-6, 0.02, 1e-4, 0.045)
    steady = StreamLoad.steady(np.array([rate]), np.array([rate * 250]))
    assert fe.utilisation(rate, 250) < 1.0
    assert fe.mean_delay_s(1000, rate, 250) == pytest.approx(fe.delays_s(np.array([1000.0]), steady)[0], rel=1e-12)
    simulated = np.mean(fe.delays_s(np.full(4, 1000.0), stream_load(np.arange(4) / rate, np.arange(4) / rate,
                                                                   np.arange(4) / rate, np.ones(4))))
    assert simulated <= fe.mean_delay_s(1000, rate, 250)  # a load just started has built less


def test_a_saturated_front_end_queues_for_as_long_as_the_overload_lasts():
    """Steady state: infinite.  In a run: the backlog grows by (load - 1) x time, so TTFT grows with the
    run's length instead of being invented or capped."""
    fe = FrontEnd(0.001, 0.0, 0.01, 0.0, 0.01)
    assert fe.mean_delay_s(100, 150.0, 100) == float("inf")  # 150 req/s x 10 ms > 1
    arrival = np.arange(1500) / 150.0                           # 10 s at 150 req/s: load 1.5
    load = stream_load(arrival, arrival + 0.01, arrival + 0.02, np.full(1500, 2.0))
    backlog = fe.backlog_s(load)
    assert np.all(np.diff(backlog) >= -1e-12)
    assert backlog[-1] == pytest.approx(0.5 * arrival[-1], rel=0.02)
    assert fe.backlog_s(stream_load(arrival[::2], arrival[::2] + 0.01, arrival[::2] + 0.02,
                                    np.full(750, 2.0))).max() < BACKLOG_BIN_S   # load 0.75: no backlog


def test_front_end_delay_grows_with_load_from_its_fixed_part():
    fe = FrontEnd(0.004, 1e-6, 0.002, 5e-5, 0.02)
    requests = np.array([0.0, 5.0, 10.0, 20.0])
    tokens = np.array([0.0, 2000.0, 6000.0, 12000.0])
    delays = fe.delays_s(np.full(4, 1000.0), StreamLoad.steady(requests, tokens))
    assert delays[0] == pytest.approx(0.004 + 1e-6 * 1000)   # idle: fixed + prompt
    assert np.all(np.diff(delays) > 0)
    rho = 0.002 * 20.0 + 5e-5 * 12000.0
    assert delays[-1] == pytest.approx(0.005 + 0.02 * rho / (1 - rho))
    assert not FrontEnd.engine_only(0.9).adds_delay and fe.adds_delay


def test_a_load_lasting_the_window_builds_no_more_than_its_relaxed_wait():
    """Above rho* = (1 - sqrt(service / window))^2 a queue needs longer than the window to reach its mean wait."""
    fe = FrontEnd(0.0, 0.0, 0.0, 1e-4, 0.05)
    star = (1 - math.sqrt(0.05 / LOAD_WINDOW_S)) ** 2
    assert fe.relaxed_utilisation() == pytest.approx(star)
    tokens = np.array([0.5 * star, star, 0.5 * (star + 1), 0.999, 1.0]) / 1e-4
    delays = fe.delays_s(np.zeros(5), StreamLoad.steady(np.zeros(5), tokens))
    assert delays[0] == pytest.approx(0.05 * 0.5 * star / (1 - 0.5 * star))
    assert delays[1] == delays[2] == delays[3] == delays[4] == pytest.approx(0.05 * star / (1 - star))


def _streamed_brute_force(arrival, first, end, out, window, steps=20000):
    """Tokens/s each request's window saw, by summing every request's token emissions on a fine grid."""
    lo, hi = float(np.nanmin(arrival)) - window - 1.0, float(np.nanmax(end)) + 1.0
    grid = np.linspace(lo, hi, steps)
    dt = grid[1] - grid[0]
    rate = np.zeros(steps)
    for f, e, o in zip(first, end, out, strict=True):
        if not np.isfinite(f):
            continue
        rate[np.argmin(np.abs(grid - f))] += 1.0 / dt                      # the first token
        if o > 1 and e > f:
            rate[(grid >= f) & (grid < e)] += (o - 1) / (e - f)
    cumulative = np.concatenate([[0.0], np.cumsum(rate) * dt])
    at = lambda x: np.interp(x, np.concatenate([[lo - dt], grid]) + dt / 2, cumulative)  # noqa: E731
    return (at(arrival) - at(arrival - window)) / window


def random_streams(seed: int, n: int, span_s: float, first_s: tuple[float, float], length_s: tuple[float, float],
                   out: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """n requests over span_s: (arrival, first token, end, output tokens), drawn with `seed`."""
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.uniform(0, span_s, n))
    first = arrival + rng.uniform(*first_s, n)
    return arrival, first, first + rng.uniform(*length_s, n), rng.integers(*out, n).astype(float)


def test_stream_load_counts_what_the_replica_streamed_in_the_window():
    n = 40
    arrival, first, end, out = random_streams(3, n, 10.0, (0.01, 0.2), (0.5, 3.0), (2, 300))
    first[5] = end[5] = np.nan                       # a rejected request streams nothing
    load = stream_load(arrival, first, end, out, window_s=2.0)
    assert load.token_rate == pytest.approx(_streamed_brute_force(arrival, first, end, out, 2.0), rel=0.02, abs=2.0)
    earlier = np.array([np.sum((arrival >= a - 2.0) & (arrival < a)) for a in arrival])
    assert load.request_rate == pytest.approx(earlier / 2.0)
    assert load.bin_requests.sum() == n


def test_stream_load_bins_hold_each_bins_tokens():
    """One request streams 101 tokens over [0, 1 s]: its first token, then 100 tokens/s; two never served."""
    arrival = np.array([0.0, 0.5, 1.0])
    nan = float("nan")
    load = stream_load(arrival, np.array([0.0, nan, nan]), np.array([1.0, nan, nan]), np.array([101, 9, 9]))
    per_bin = 100 * BACKLOG_BIN_S
    bins = int(round(1.0 / BACKLOG_BIN_S))
    assert load.bin_tokens[0] == pytest.approx(1 + per_bin)
    assert load.bin_tokens[1:bins] == pytest.approx(np.full(bins - 1, per_bin))
    assert load.bin_tokens[bins:].sum() == pytest.approx(0.0, abs=1e-9)
    assert list(load.bin_requests[[0, bins // 2, bins]]) == [1, 1, 1] and load.bin_of.tolist() == [0, bins // 2, bins]


def test_stream_load_bins_match_each_streams_overlap():
    """Random streams, many ending after the last arrival's bin: each bin holds its first tokens plus every
    stream's rate times its overlap with the bin (counted directly here)."""
    arrival, first, end, out = random_streams(11, 60, 3.0, (0.0, 0.3), (0.0, 2.0), (1, 200))
    load = stream_load(arrival, first, end, out)
    edges = arrival[0] + BACKLOG_BIN_S * np.arange(load.bin_tokens.size + 1)
    rate = np.where(end > first, (out - 1) / np.maximum(end - first, 1e-300), 0.0)
    overlap = np.clip(np.minimum(edges[1:, None], end) - np.maximum(edges[:-1, None], first), 0.0, None)
    lo, hi = edges[:-1, None], edges[1:, None]
    firsts = np.sum((first >= lo) & (first < hi), axis=1)
    assert load.bin_tokens == pytest.approx(firsts + overlap @ rate, abs=1e-9)
    assert load.bin_requests.tolist() == np.sum((arrival >= lo) & (arrival < hi), axis=1).tolist()


def test_prefill_scale_speeds_up_prefill_only():
    curve = ServedCurve()
    plain = simulate(curve, [0.0], [4000], [50])
    engine = simulate(dataclasses.replace(curve, front_end=FrontEnd.engine_only(1.0)), [0.0], [4000], [50])
    faster = simulate(dataclasses.replace(curve, front_end=FrontEnd.engine_only(0.5)), [0.0], [4000], [50])
    assert engine.ttft_s[0] == plain.ttft_s[0] and engine.tpot_s[0] == plain.tpot_s[0]
    prefill = curve.step_time_s(0, 0.0, 4000, 4000) - curve.step_time_s(0, 0.0)
    assert plain.ttft_s[0] - faster.ttft_s[0] == pytest.approx(0.5 * prefill)
    assert faster.tpot_s[0] == pytest.approx(plain.tpot_s[0])


def test_a_burst_loads_the_front_end_with_what_the_engine_streams_not_with_what_was_offered():
    """2,000 requests in 0.2 s offer 10k req/s, far past the front end (mean-rate model: infinite delay);
    the engine streams them at its own pace, and the front end only meets that."""
    fe = FrontEnd(0.002, 0.0, 1e-4, 2e-5, 0.01)
    n = 2000
    assert fe.mean_delay_s(256, n / 0.2, 64) == float("inf")
    served = ServedCurve(max_num_seqs=64, front_end=fe)
    result = simulate(served, np.linspace(0.0, 0.2, n), [256] * n, [64] * n)
    engine = simulate(SimCurve(max_num_seqs=64), np.linspace(0.0, 0.2, n), [256] * n, [64] * n)
    extra = result.ttft_s - engine.ttft_s
    assert np.all(np.isfinite(extra)) and np.all(extra >= fe.fixed_s - 1e-12)
    assert np.max(extra) < 0.1


def test_prefill_scale_is_lent_only_to_the_same_gpu():
    key, rows, curve = _curve()
    donor = dataclasses.replace(curve, front_end=TRUE_FRONT_END)
    same = dataclasses.replace(curve, key=dataclasses.replace(key, model="qwen2.5-7b"))
    other = dataclasses.replace(curve, key=dataclasses.replace(key, gpu="h200"))
    assert server_fit._borrow(same, [donor]).front_end.prefill_scale == TRUE_FRONT_END.prefill_scale
    lent = server_fit._borrow(other, [donor]).front_end
    assert lent.prefill_scale == 1.0 and lent.basis.startswith("transferred")
    assert lent.per_output_token_s == TRUE_FRONT_END.per_output_token_s


def test_fixed_lengths_simulate_as_fixed():
    """Issue 13 s.6: p50 = p95 = p99 = mean is a fixed length, as every benchmark's shape."""
    fixed = LengthDistribution(512.0, 512.0, 512.0, 512.0)
    assert set(fixed.sample(5000, 3)) == {512}
    skewed = LengthDistribution(800.0, 600.0, 2000.0, 3000.0)
    assert len(set(skewed.sample(5000, 3))) > 100


def _write_server_profile(directory, curve) -> None:
    _server_rows(curve).assign(config="default", pp=1).to_csv(directory / "vllm_h100_server.csv", index=False)


def test_predict_request_rate_prints_percentiles_with_intervals(tmp_path, capsys):
    files = write_synthetic_inputs(tmp_path)
    _write_server_profile(files["profiles"], _curve()[2])
    out = invoke(capsys, "predict", "--profiles", str(files["profiles"]), "--gpu", "h100", "--engine", "vllm",
                 "--model", "llama-3.1-8b", "--input-len", "256", "--output-len", "256", "--request-rate", "12",
                 "--arrival-cv", "2", "--json")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert record["latency_basis"] == "measured" and record["front_end"].startswith("measured")
    for metric in ("ttft", "tpot", "itl", "e2e"):
        p50, p95, p99 = (record[f"{metric}_p{p}_ms"] for p in (50, 95, 99))
        assert 0 < p50 <= p95 <= p99
        assert record[f"{metric}_p50_ms_low"] < p50 < record[f"{metric}_p50_ms_high"]
    bad = invoke(capsys, "predict", "--profiles", str(files["profiles"]), "--gpu", "h100", "--engine", "vllm",
                 "--model", "llama-3.1-8b", "--input-len", "256", "--output-len", "256", "--request-rate", "-1")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--request-rate" in bad.stderr


def test_closed_loop_rounds_have_a_far_higher_ttft_than_staggered_clients(tmp_path, capsys):
    files = write_synthetic_inputs(tmp_path)
    ttft = {}
    for mode in ("staggered", "rounds"):
        out = invoke(capsys, "predict", "--profiles", str(files["profiles"]), "--gpu", "h100", "--engine", "vllm",
                     "--model", "llama-3.1-8b", "--input-len", "1024", "--output-len", "256", "--concurrency", "128",
                     "--closed-loop", mode, "--json")
        assert out.returncode == 0, out.stderr
        ttft[mode] = json.loads(out.stdout)["ttft_ms"]
    assert ttft["rounds"] > 3 * ttft["staggered"]


def write_cheap_unverified_inputs(directory) -> dict:
    """Synthetic inputs where the cheapest option (vllm on h200: fast, $0.2/GPU-hour) has throughput rows only."""
    files = write_synthetic_inputs(directory)
    fast = pd.DataFrame(synthetic_profile_rows("vllm", "h200", speedup=3.0))
    fast[fast["mode"] == "offline"].to_csv(files["profiles"] / "vllm_h200.csv", index=False)  # throughput only
    prices = pd.read_csv(files["prices"])
    # and the cheapest GPU-hour by far: its throughput-only curve has a wide interval, whose low end sets the
    # utilisation floor, so it needs many replicas
    prices.loc[prices["gpu"] == "h200", "usd_per_gpu_hour"] = 0.2
    prices.to_csv(files["prices"], index=False)
    return files


def test_unverified_latency_ranks_behind_unless_allowed(tmp_path):
    """An option with no latency rows behind it does not win an online route on cost alone."""
    files = write_cheap_unverified_inputs(tmp_path)
    catalog = load_inputs(files["profiles"], files["prices"], files["ops"])
    unverified = [c for c in catalog.curves.values() if c.latency_basis == "unverified"]
    assert unverified, "the throughput-only group has no latency behind it"
    routes = pd.DataFrame([online_route("chat", rate_rps=300.0)])
    strict = make_plan(routes, catalog, Assumptions()).plan.iloc[0]
    loose = make_plan(routes, catalog, Assumptions(allow_unverified_latency=True)).plan.iloc[0]
    assert strict["latency_basis"] != "unverified"
    assert loose["latency_basis"] == "unverified" and loose["total_usd_per_month"] < strict["total_usd_per_month"]


def test_a_cheaper_runner_up_with_unverified_latency_is_worded_as_such_not_as_negative_savings(tmp_path, capsys):
    files = write_cheap_unverified_inputs(tmp_path)
    routes, out = tmp_path / "routes.csv", tmp_path / "plan.csv"
    # vllm only: the measured h100 option and the cheaper h200 one with throughput rows only are the two left
    pd.DataFrame([online_route("chat", rate_rps=300.0, engines="vllm")]).to_csv(routes, index=False)
    code = cli_main(["plan", "--routes", str(routes), "--out", str(out), "--profiles", str(files["profiles"]),
                     "--prices", str(files["prices"]), "--ops", str(files["ops"]), "--transfer", "off"])
    printed = capsys.readouterr().out
    assert code == 0
    row = read_plan(out)[0].iloc[0]
    assert row["runner_up"].startswith("vllm/") and "/h200/" in row["runner_up"]
    cheaper = -row["savings_usd_per_month"]
    assert cheaper > 0 and row["runner_up_total_usd_per_month"] < row["total_usd_per_month"]
    said = re.search(rf"runner-up {re.escape(row['runner_up'])} is \$([\d,]+)/month cheaper but its latency is "
                     "unverified", row["notes"])                         # the plan file says why
    assert said and float(said[1].replace(",", "")) == pytest.approx(cheaper, abs=1.0)
    assert f"chat: {said[0]}" in " ".join(printed.split())            # and so does the printed plan
    assert "$-" not in printed and "-$" not in printed                # no negative "saves"


def test_noise_comes_from_repeated_points():
    """Issue 13 s.5: intervals cover run-to-run spread measured by repeats, not a fixed 2%."""
    from planner.engine.curves import NOISE_FLOOR, repeat_noise

    base = {"mode": "rate", "input_len": 256, "output_len": 256, "batch_size": None, "concurrency": None,
            "request_rate": 24.0}
    rows = pd.DataFrame([{**base, "arrival": "poisson", "output_tok_per_s": 100.0},
                         {**base, "arrival": "gamma:cv=1", "output_tok_per_s": 110.0},  # CV 1 is Poisson: a repeat
                         {**base, "arrival": "gamma:cv=2", "output_tok_per_s": 300.0}])
    expected = np.sqrt(2 * (5 / 105) ** 2 / 1)
    assert repeat_noise(rows) == pytest.approx(expected)
    assert repeat_noise(rows.iloc[[0, 2]]) == NOISE_FLOOR


def test_a_sparse_routes_backlog_bins_are_bounded_and_its_front_end_idle():
    """A route at 1e-5 req/s replays its arrivals over ~1e8 s: 50 ms bins would be 2e9 of them.  They cover the
    stretches where a request is in flight, each quiet stretch one wide bin."""
    from planner.engine.frontend import MAX_BACKLOG_BINS
    arrival = np.sort(np.random.default_rng(0).uniform(0, 1e8, 1000))
    load = stream_load(arrival, arrival + 0.05, arrival + 2.0, np.full(1000, 200.0))
    assert load.bin_requests.size <= MAX_BACKLOG_BINS + 1 and np.max(load.bin_s) > BACKLOG_BIN_S
    assert np.median(load.bin_s) == pytest.approx(BACKLOG_BIN_S)
    assert load.bin_requests.sum() == 1000 and np.all(TRUE_FRONT_END.backlog_s(load) == 0.0)
    dense = np.sort(np.random.default_rng(0).uniform(0, 600, 1000))
    assert stream_load(dense, dense + 0.05, dense + 2.0, np.full(1000, 200.0)).bin_s == BACKLOG_BIN_S
