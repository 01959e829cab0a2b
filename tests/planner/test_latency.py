"""Latency under load: async scheduling, the server front end fitted on open-loop rows, predictions, ranking."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pandas as pd
import pytest

from fleetfacts.arrivals import arrival_times
from planner import latency
from planner.assumptions import Assumptions
from planner.cli import main as cli_main
from planner.curves import GroupKey, fit_group
from planner.frontend import FrontEnd
from planner.plan import load_inputs, make_plan, read_plan
from planner.routes import LengthDistribution
from planner.simulate import simulate
from tests.planner.fakes import online_route, synthetic_profile_rows, write_synthetic_inputs
from tests.planner.sim_fakes import SimCurve
from tests.planner.test_cli import invoke

# The front end the synthetic server rows are generated with (seconds): what the fit must recover.
TRUE_FRONT_END = FrontEnd(0.004, 2e-6, 0.006, 4e-5, 0.01)
# (input, output, rate/s) of the synthetic open-loop rows: light load to near the front end's limit.
LOADS = [(256, 256, r) for r in (2, 8, 16, 24)] + [(2048, 256, r) for r in (1, 4, 8)] + [(512, 1024, r) for r in (2, 6)]


@dataclasses.dataclass(frozen=True, eq=False)
class AsyncCurve(SimCurve):
    async_scheduling: bool = True


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
    assert fe is not None and fe.basis.startswith("measured: 9 open-loop server rows")
    assert fe.rel_error < 0.05
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


def test_front_end_saturates_instead_of_inventing_a_latency():
    fe = FrontEnd(0.001, 0.0, 0.01, 0.0, 0.01)
    assert fe.mean_delay_s(100, 150.0, 100) == float("inf")  # 150 req/s x 10 ms > 1
    assert np.isinf(fe.delays_s(np.array([100.0]), 150.0, 100, np.array([0.5]))).all()


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
    """Synthetic inputs where the cheapest option (vllm on h200: fast, $1/GPU-hour) has throughput rows only."""
    files = write_synthetic_inputs(directory)
    fast = pd.DataFrame(synthetic_profile_rows("vllm", "h200", speedup=3.0))
    fast[fast["mode"] == "offline"].to_csv(files["profiles"] / "vllm_h200.csv", index=False)  # throughput only
    prices = pd.read_csv(files["prices"])
    prices.loc[prices["gpu"] == "h200", "usd_per_gpu_hour"] = 1.0  # and the cheapest GPU-hour
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
    from planner.curves import NOISE_FLOOR, repeat_noise

    base = {"mode": "rate", "input_len": 256, "output_len": 256, "batch_size": None, "concurrency": None,
            "request_rate": 24.0}
    rows = pd.DataFrame([{**base, "arrival": "poisson", "output_tok_per_s": 100.0},
                         {**base, "arrival": "gamma:cv=1", "output_tok_per_s": 110.0},  # CV 1 is Poisson: a repeat
                         {**base, "arrival": "gamma:cv=2", "output_tok_per_s": 300.0}])
    expected = np.sqrt(2 * (5 / 105) ** 2 / 1)
    assert repeat_noise(rows) == pytest.approx(expected)
    assert repeat_noise(rows.iloc[[0, 2]]) == NOISE_FLOOR
