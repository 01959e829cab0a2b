"""`python -m measure verify` end to end against real OpenAI-compatible servers.

A deployment sized for its route runs on the real CPU test server (`transformers serve`): the plan's
predictions come from a calibration load at the route's rate (what a profile of the server would say),
its SLO leaves a margin over them, and it must not be flagged.  A mis-sized one runs on a server of
known capacity (one generation slot, fixed TTFT and ITL), so that being over capacity does not depend
on how fast the machine running the tests is: asked for many times that capacity, it must be flagged.
"""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest

from fleetfacts.arrivals import arrival_times
from fleetfacts.schema import PLAN, PROFILE, ROUTES, load_table
from measure import verify
from measure.cli import main
from measure.loadgen import LoadSpec, RequestSpec, run_load_sync
from measure.stats import metric_columns

pytestmark = pytest.mark.slow

# Six requests at the route's rate, for the calibration and for the verify run (the CPU server's TTFT stayed
# within SLO_MARGIN of its calibration at 40x this rate).
RATE_RPS, INPUT_LEN, OUTPUT_LEN = 1.0, 16, 8
DURATION_S = 6.0
# The SLO the route sets over the calibrated p95 TTFT: room for the CPU server's run-to-run noise.
SLO_MARGIN = 5.0
# The server of known capacity for the mis-sized deployment: one slot, TTFT 20 ms, then 5 ms per token,
# so 55 ms a request and about 18 requests per second at most; the route asks for 100.
SLOT_TTFT_S, SLOT_ITL_S, OVERLOAD_RPS = 0.020, 0.005, 100.0


@pytest.fixture(scope="module")
def calibration(tiny_server):
    """What the server does at the route's rate: the numbers a plan made for it predicts."""
    times = arrival_times(int(RATE_RPS * DURATION_S), RATE_RPS, "poisson", 1)
    specs = tuple(RequestSpec(INPUT_LEN, OUTPUT_LEN, t) for t in times)
    load = run_load_sync(LoadSpec(base_url=tiny_server["url"], requests=specs, ignore_eos=False,
                                  max_duration_s=DURATION_S + 60))
    m = verify.measurement(load, specs)
    assert m.errors == 0, m.first_error
    return metric_columns(m)




def _files(tmp_path, calibration, rate, assumptions_line):
    routes = tmp_path / "routes.csv"
    with open(routes, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=ROUTES.names)
        writer.writeheader()
        writer.writerow({"name": "tiny", "model": "tiny", "traffic": "online", "rate_rps": rate, "peak_to_mean": 1,
                         "arrival_cv": 1, "input_len_mean": INPUT_LEN, "output_len_mean": OUTPUT_LEN,
                         "slo_percentile": 95, "ttft_slo_ms": SLO_MARGIN * calibration["ttft_p95_ms"],
                         "tpot_slo_ms": SLO_MARGIN * calibration["tpot_p95_ms"]})
    tok_s = calibration["output_tok_per_s"]
    plan = tmp_path / "plan.csv"
    with open(plan, "w", newline="") as handle:
        if assumptions_line:
            handle.write('# fleetplan-assumptions: {"slo_attainment": 0.99}\n')
        writer = csv.DictWriter(handle, fieldnames=PLAN.names)
        writer.writeheader()
        writer.writerow({"route": "tiny", "status": "ok", "traffic": "online", "model": "tiny",
                         "engine": "transformers", "engine_version": "5.24.0", "gpu": "cpu", "precision": "fp32",
                         "tp": 1, "replicas": 1, "gpus": 1, "in_flight_p99": 1,
                         "replica_output_tok_per_s": tok_s, "replica_output_tok_per_s_low": 0.9 * tok_s,
                         "replica_output_tok_per_s_high": 1.1 * tok_s, "ttft_pred_ms": calibration["ttft_p95_ms"],
                         "tpot_pred_ms": calibration["tpot_p95_ms"], "e2e_pred_ms": calibration["e2e_p95_ms"]})
    if not assumptions_line:  # the plain-CSV plan format: assumptions beside it
        (tmp_path / "plan.assumptions.json").write_text(json.dumps({"slo_attainment": 0.99}))
    return routes, plan


def _verify(url, routes, plan, out, *extra):
    return main(["verify", "--plan", str(plan), "--routes", str(routes), "--route", "tiny", "--base-url",
                 url, "--duration", str(DURATION_S), "--max-requests", "200", "--drain", "10",
                 "--no-ignore-eos", "--out", str(out), *extra])


def test_a_deployment_sized_for_its_route_is_not_flagged(tiny_server, calibration, tmp_path, capsys):
    routes, plan = _files(tmp_path, calibration, RATE_RPS, assumptions_line=True)
    code = _verify(tiny_server["url"], routes, plan, tmp_path / "prof")
    out = capsys.readouterr().out
    assert code in (verify.EXIT_MEETS, verify.EXIT_DRIFT), out
    assert verify.AT_RISK not in out
    rows = load_table(tmp_path / "prof" / "profile.csv", PROFILE)
    assert len(rows) == 1
    row = rows.iloc[0]
    assert (row["mode"], row["engine"], row["gpu"], row["provenance"]) == ("rate", "transformers", "cpu", "measured")
    assert row["request_rate"] == pytest.approx(RATE_RPS) and row["arrival_seed"] == 0
    assert row["num_requests"] == int(RATE_RPS * DURATION_S)
    assert row["ttft_p95_ms"] < SLO_MARGIN * calibration["ttft_p95_ms"]


def test_a_mis_sized_deployment_is_flagged(timed_server, tmp_path, capsys):
    # The plan predicts what the one-slot server does at light load and puts the whole route on it.
    url, _ = timed_server(ttft_s=SLOT_TTFT_S, itl_s=SLOT_ITL_S, slots=1)
    e2e_s = SLOT_TTFT_S + (OUTPUT_LEN - 1) * SLOT_ITL_S
    light_load = {"ttft_p95_ms": 1e3 * SLOT_TTFT_S, "tpot_p95_ms": 1e3 * SLOT_ITL_S, "e2e_p95_ms": 1e3 * e2e_s,
                  "output_tok_per_s": OVERLOAD_RPS * OUTPUT_LEN}
    assert OVERLOAD_RPS > 3 / e2e_s  # the route really is beyond the server's capacity
    routes, plan = _files(tmp_path, light_load, OVERLOAD_RPS, assumptions_line=False)
    # Two seconds of load, then one of drain: the requests still queued for the slot are reported, not awaited.
    code = _verify(url, routes, plan, tmp_path / "prof", "--duration", "2", "--drain", "1")
    out = capsys.readouterr().out
    assert code == verify.EXIT_AT_RISK, out
    flagged = [line.split()[0] for line in out.splitlines() if line.endswith(verify.AT_RISK)]
    # Overload shows as TTFT past the SLO (requests wait for the slot), or as requests still running
    # when the drain ends.
    assert set(flagged) & {"ttft_p95_ms", "errors"}, out


def test_verify_refuses_bad_input_in_one_line(tmp_path, capsys, calibration_free_files):
    routes, plan = calibration_free_files
    code = main(["verify", "--plan", str(plan), "--routes", str(routes), "--route", "nope", "--base-url",
                 "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 2 and "no route 'nope'" in err and len(err.strip().splitlines()) == 1
    code = main(["verify", "--plan", str(plan), "--routes", str(routes), "--route", "tiny", "--base-url",
                 "http://127.0.0.1:9", "--replicas", "3"])
    assert code == 2 and "--replicas must be between 1 and the plan's 1" in capsys.readouterr().err
    for extra, said in ((["--scale", "0"], "--scale must be > 0"), (["--vocab-size", "1"], "--vocab-size must be"),
                        (["--record", str(tmp_path / "a-file" / "x.jsonl")], "--record")):
        (tmp_path / "a-file").write_text("")   # a file where the record's folder would be
        code = main(["verify", "--plan", str(plan), "--routes", str(routes), "--route", "tiny", "--base-url",
                     "http://127.0.0.1:9", "--prompt-format", "tokens", *extra])
        err = capsys.readouterr().err
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err


@pytest.fixture
def calibration_free_files(tmp_path):
    fake = {"ttft_p95_ms": 100.0, "output_tok_per_s": 10.0, "tpot_p95_ms": 10.0, "e2e_p95_ms": 200.0}
    return _files(tmp_path, fake, RATE_RPS, assumptions_line=True)


def test_assigned_requests_are_replayed_as_they_are_and_each_window_is_set_beside_its_prediction(
        timed_server, tmp_path, capsys):
    """verify --assigned (the requests the plan's router sent to one replica, `planner simulate --replica-out`):
    the heaviest window is replayed after its lead-in, and the printed and recorded per-window table holds the
    measured percentile beside the file's own predictions."""
    url, server = timed_server(ttft_s=SLOT_TTFT_S, itl_s=SLOT_ITL_S, slots=4)
    light_load = {"ttft_p95_ms": 1e3 * SLOT_TTFT_S, "tpot_p95_ms": 1e3 * SLOT_ITL_S,
                  "e2e_p95_ms": 1e3 * (SLOT_TTFT_S + (OUTPUT_LEN - 1) * SLOT_ITL_S), "output_tok_per_s": 40.0}
    routes, plan = _files(tmp_path, {k: 20 * v for k, v in light_load.items()}, RATE_RPS, assumptions_line=True)
    table = load_table(routes, ROUTES)
    table["slo_window_s"] = 2.0
    table.to_csv(routes, index=False)
    # 4 s of sparse requests, then a 2 s burst of 20, then 2 s sparse again; predictions are made-up constants.
    times = [0.0, 1.0, 2.0, 3.0] + [4.0 + 0.1 * k for k in range(20)] + [6.5, 7.5]
    assigned = tmp_path / "replica.csv"
    pd.DataFrame({"timestamp": times, "input_len": INPUT_LEN, "output_len": OUTPUT_LEN,
                  "predicted_ttft_ms": 33.0, "predicted_tpot_ms": 7.0, "replica": 2}).to_csv(assigned, index=False)
    record = tmp_path / "run.jsonl"
    code = main(["verify", "--plan", str(plan), "--routes", str(routes), "--route", "tiny", "--base-url", url,
                 "--assigned", str(assigned), "--window", "heaviest:2", "--duration", "2", "--drain", "5",
                 "--no-ignore-eos", "--out", str(tmp_path / "prof"), "--record", str(record)])
    out = capsys.readouterr().out
    assert code in (verify.EXIT_MEETS, verify.EXIT_DRIFT, verify.EXIT_AT_RISK), out
    assert "assigned:replica.csv heaviest 2 s from 4 s (+4 s lead-in)" in out
    assert sum(b["body"].get("stream", False) for b in server.bodies) == 4 + 20   # the lead-in (all 4 s before the burst), the burst; nothing after
    run = json.loads(record.read_text().splitlines()[-1])
    windows = run["windows_measured_vs_predicted"]
    assert sum(w["requests"] for w in windows) == 20
    # Its timeline says which requests the window judged: pooled with other replicas' replays of that window.
    assert run["judged_from_s"] == 4.0 and len(run["timeline"]) == 24
    assert verify.pooled_window([run], 2.0, 95.0)["requests"] == 20
    assert all(w["ttft_predicted_ms"] == pytest.approx(33.0) and w["tpot_predicted_ms"] == pytest.approx(7.0)
               for w in windows)
    assert all(w["ttft_measured_ms"] >= 1e3 * SLOT_TTFT_S * 0.9 for w in windows)
    assert "per window (p95, ms)" in out


def test_a_scaled_run_says_its_predictions_are_the_plans_at_1x(timed_server, tmp_path, capsys):
    url, _ = timed_server(ttft_s=SLOT_TTFT_S, itl_s=SLOT_ITL_S, slots=4)
    e2e_s = SLOT_TTFT_S + (OUTPUT_LEN - 1) * SLOT_ITL_S
    light_load = {"ttft_p95_ms": 1e3 * SLOT_TTFT_S, "tpot_p95_ms": 1e3 * SLOT_ITL_S, "e2e_p95_ms": 1e3 * e2e_s,
                  "output_tok_per_s": RATE_RPS * OUTPUT_LEN}
    routes, plan = _files(tmp_path, light_load, RATE_RPS, assumptions_line=False)
    _verify(url, routes, plan, tmp_path / "prof", "--scale", "2", "--duration", "1", "--drain", "2")
    out = capsys.readouterr().out
    assert "note: --scale 2: 'predicted' is the plan's figure at 1x" in out
    assert f"--request-rate {2 * RATE_RPS:.4g} --replicas 1" in out


def test_a_worst_window_needs_the_assigned_files_predictions(tmp_path, capsys, calibration_free_files):
    routes, plan = calibration_free_files
    code = main(["verify", "--plan", str(plan), "--routes", str(routes), "--route", "tiny", "--base-url",
                 "http://127.0.0.1:9", "--window", "worst:60"])
    err = capsys.readouterr().err
    assert code == 2 and "--window worst:SECONDS and at:START:SECONDS need --assigned" in err and err.count("\n") == 1
