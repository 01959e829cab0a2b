"""Issue 34: every online route is sized and reported on its SLO windows, on one load, by one verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetfacts.slo import judge
from measure import verify
from planner.cli import main
from planner.planning import fleet_check
from planner.planning.plan import _route_log, make_plan
from planner.planning.plan_check import simulate_plan
from planner.planning.route_table import load_routes
from planner.sizing.assumptions import Assumptions
from planner.sizing.sizing import fleet_latency, search_fleet
from planner.traffic.routes import Route
from planner.traffic.workload import route_log_requests, route_requests
from tests.conftest import bundled_catalog, cli_fits_bundled_once

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ROUTES = EXAMPLES / "routes.csv"
FP8_H200 = {"engines": "vllm", "gpus": "h200", "precisions": "fp8", "tps": "1"}


def code_route(**changes) -> pd.DataFrame:
    routes = load_routes(ROUTES)
    row = routes[routes["name"] == "code-completion"].copy()
    for column, value in {**FP8_H200, **changes}.items():
        row[column] = value
    return row.reset_index(drop=True)


@pytest.fixture(scope="module")
def code_plan():
    routes = code_route(peak_to_mean=1.0)
    return routes, make_plan(routes, bundled_catalog(), Assumptions(), check_by_simulation=True)


def test_a_log_route_replays_its_own_timestamps_and_peak_to_mean_scales_its_whole_log():
    route = Route.from_row(code_route(peak_to_mean=1.0).iloc[0].to_dict())
    log = route_log_requests(route)
    assert log is not None
    own = route_requests(route, log)
    t = np.sort(log[0]) - np.min(log[0])
    np.testing.assert_allclose(own.arrival_s, t)
    busier = route_requests(Route.from_row(code_route(peak_to_mean=2.0).iloc[0].to_dict()), log)
    np.testing.assert_allclose(busier.arrival_s, t / 2.0)


def test_the_code_log_is_replayed_at_one_rate_on_every_path(code_plan):
    """plan (the fleet search), simulate, fleet's check and measure verify all replay the same arrivals."""
    routes, _ = code_plan
    route = Route.from_row(routes.iloc[0].to_dict())
    log, _ = _route_log(route)
    planned = route_requests(route, log).arrival_s
    sims = simulate_plan(routes, [], bundled_catalog().curves)  # nothing planned: nothing simulated
    assert sims == []
    fleet_times = fleet_check._log(route)
    assert fleet_times is not None
    np.testing.assert_allclose(fleet_times.arrival_s, planned)
    stream = fleet_check.Stream(route, route.peak_rps)
    np.testing.assert_allclose(fleet_check._stream_requests(stream, 1.0, 1e9, 0).arrival_s, planned)
    row = routes.iloc[0].to_dict()
    row["log"] = str(EXAMPLES / row["log"])
    share = verify.share_of(row, {"replicas": 1}, 1)
    replayed = verify.replayed_requests(row["log"], share, 1e9, 10**6, float(row["rate_rps"]))
    sent = np.array([r.send_at_s for r in replayed])
    np.testing.assert_allclose(sent, planned)


def test_the_plan_row_reports_the_fleet_simulation_that_decided_its_replicas(code_plan):
    routes, result = code_plan
    row = result.rows[0]
    assert row.ok and row.latency_tier == "fleet simulated"
    route = Route.from_row(routes.iloc[0].to_dict())
    log, _ = _route_log(route)
    curve = next(c for c in bundled_catalog().curves.values()
                 if (c.key.engine, c.key.gpu, c.key.precision, c.key.model) == ("vllm", "h200", "fp8", route.model)
                 and c.key.config == row.engine_config and c.key.engine_version == row.engine_version)
    check = fleet_latency(curve, route, row.replicas, route_requests(route, log)).check(route.targets(0.99))
    assert check.ok and row.windows_in_breach == 0
    assert row.windows == check.windows
    assert row.ttft_worst_window_ms == pytest.approx(check.worst_ttft_ms, abs=0.05)
    assert row.tpot_worst_window_ms == pytest.approx(check.worst_tpot_ms, abs=0.05)
    assert row.slo_attainment == pytest.approx(check.attainment, abs=1e-4)
    fewer = fleet_latency(curve, route, row.replicas - 1, route_requests(route, log)).check(route.targets(0.99))
    assert not fewer.ok  # the fewest that hold: one replica less breaks a window or the attainment


def test_simulate_gives_the_plans_verdict_on_the_same_arrivals(code_plan, tmp_path, capsys):
    routes, result = code_plan
    sims = simulate_plan(routes, result.rows, bundled_catalog().curves)
    (sim,) = sims
    row = result.rows[0]
    assert sim.check is not None and sim.check.ok
    assert sim.check.windows == row.windows
    assert sim.check.worst_ttft_ms == pytest.approx(row.ttft_worst_window_ms, abs=0.05)
    routes_csv, plan_csv = tmp_path / "routes.csv", tmp_path / "plan.csv"
    routes.assign(log=str(EXAMPLES / routes["log"].iloc[0])).to_csv(routes_csv, index=False)
    with cli_fits_bundled_once():
        assert main(["plan", "--routes", str(routes_csv), "--out", str(plan_csv)]) == 0
        capsys.readouterr()
        assert main(["simulate", "--routes", str(routes_csv), "--plan", str(plan_csv), "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["slo_holds"] is True and record["windows"] == row.windows
    assert record["tpot_worst_window_ms"] == pytest.approx(row.tpot_worst_window_ms, abs=0.05)


def test_a_burstier_hour_needs_at_least_as_many_replicas_and_holds_every_window():
    catalog = bundled_catalog()
    counts = []
    for p2m in (1.0, 1.5):
        routes = code_route(peak_to_mean=p2m)
        row = make_plan(routes, catalog, Assumptions(), check_by_simulation=True).rows[0]
        assert row.windows_in_breach == 0
        counts.append(row.replicas)
    assert counts[1] >= counts[0]


def test_round_robin_never_needs_fewer_replicas_than_least_outstanding(code_plan):
    routes, _ = code_plan
    route = Route.from_row(routes.iloc[0].to_dict())
    log, _ = _route_log(route)
    load = route_requests(route, log)
    curve = next(c for c in bundled_catalog().curves.values()
                 if (c.key.engine, c.key.gpu, c.key.precision, c.key.model, c.key.config)
                 == ("vllm", "h200", "fp8", route.model, "default"))
    jsq = search_fleet(curve, route, load, 2, 0.99, "least-outstanding")
    rr = search_fleet(curve, route, load, 2, 0.99, "round-robin")
    assert jsq.replicas is not None and rr.replicas is not None
    assert rr.replicas >= jsq.replicas


def test_verify_judges_the_measured_requests_by_the_same_verdict():
    """measure verify's per-window verdict is fleetfacts.slo.judge on the requests' send times and latencies."""
    from measure.loadgen import LoadResult, RequestResult

    results = tuple(RequestResult(ok=True, start_s=float(s), end_s=float(s) + 1.0, ttft_s=0.9 if 60 <= s < 120 else 0.1,
                                  itl_s=(), output_tokens=11) for s in np.arange(0, 180, 0.5))
    route = {"ttft_slo_ms": 300.0, "tpot_slo_ms": 200.0, "e2e_slo_ms": None, "slo_percentile": 95.0,
             "slo_window_s": 60.0}
    check = verify.window_check(LoadResult(results, 181.0), route)
    assert check.windows == 3 and check.windows_in_breach == 1 and check.start_s[check.worst_window] == 60
    t = np.array([r.start_s for r in results])
    same = judge(t, np.array([r.ttft_s for r in results]), np.array([r.tpot_s for r in results]),
                 np.array([r.e2e_s for r in results]), check.targets)
    np.testing.assert_allclose(same.ttft_ms, check.ttft_ms)
    lines = [v.verdict for v in verify.window_verdicts(check, {"windows_in_breach": 0}, route)]
    assert lines[-1].startswith(verify.AT_RISK)


def test_verify_window_replays_the_heaviest_minute_after_a_lead_in():
    from measure.loadgen import RequestSpec

    times = list(np.arange(0, 600, 2.0)) + list(np.arange(300, 360, 0.2))
    specs = tuple(RequestSpec(10, 5, float(t)) for t in sorted(times))
    start = verify.heaviest_start([r.send_at_s for r in specs], 60)
    assert 299 <= start <= 300
    kept, lead = verify.window_of(specs, start, 60)
    assert lead == verify.WINDOW_LEAD_IN_S
    assert min(r.send_at_s for r in kept) >= 0 and max(r.send_at_s for r in kept) < 60 + lead
    assert sum(1 for r in kept if r.send_at_s >= lead) == sum(1 for t in times if start <= t < start + 60)
    assert verify.parse_window("heaviest:60") == 60
    with pytest.raises(Exception, match="heaviest:SECONDS"):
        verify.parse_window("busiest:60")


def test_replica_out_writes_the_requests_the_router_sent_to_the_busiest_minutes_busiest_replica(code_plan, tmp_path,
                                                                                               capsys):
    """simulate --replica-out: what a one-GPU check of the planned fleet replays (measure verify --assigned)."""
    routes, result = code_plan
    out = _replica_out(code_plan, tmp_path, capsys)
    written = pd.read_csv(out)
    sim = simulate_plan(routes, [r for r in result.rows if r.route == "code-completion"],
                        bundled_catalog().curves)[0]
    r, check = sim.result, sim.check
    replica = int(written["replica"].iloc[0])
    mine = r.replica == replica
    np.testing.assert_allclose(written["timestamp"], r.arrival_s[mine])
    np.testing.assert_allclose(written["predicted_ttft_ms"], r.ttft_s[mine] * 1000)
    w = check.busiest_window
    busy = (r.arrival_s >= check.start_s[w]) & (r.arrival_s <= check.end_s[w])
    per_replica = np.bincount(r.replica[busy], minlength=r.replicas)
    assert per_replica[replica] == per_replica.max() and 0 < len(written) < r.n
    # What verify --assigned judges on those requests is the one verdict on the simulation's own numbers.
    frame = verify.assigned_requests(out)
    route_row = routes.iloc[0].to_dict()
    predicted = verify.predicted_check(frame, 0.0, np.inf, route_row)
    direct = judge(r.arrival_s[mine], r.ttft_s[mine], r.tpot_s[mine], r.e2e_s[mine], verify.route_targets(route_row))
    np.testing.assert_allclose(predicted.ttft_ms, direct.ttft_ms)
    np.testing.assert_allclose(predicted.tpot_ms, direct.tpot_ms)


def test_replica_out_needs_one_online_route_and_assigned_files_are_checked(code_plan, tmp_path, capsys):
    routes, result = code_plan
    routes_csv, plan_csv = tmp_path / "routes.csv", tmp_path / "plan.csv"
    routes.to_csv(routes_csv, index=False)
    result.plan.to_csv(plan_csv, index=False)
    assert main(["simulate", "--routes", str(routes_csv), "--plan", str(plan_csv), "--route", "nope",
                 "--replica-out", str(tmp_path / "r.csv")]) == 2
    assert "--replica-out needs --route naming one planned online route" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,input_len,output_len\n0,10,10\n")
    with pytest.raises(Exception, match="missing column.*predicted_ttft_ms"):
        verify.assigned_requests(bad)


def test_the_cost_against_breach_trade_off_runs_from_the_whole_log_count_to_the_recommendation(code_plan):
    from planner.planning.plan import fleet_tradeoff

    _, result = code_plan
    row = result.plan.set_index("route").loc["code-completion"]
    tradeoff = fleet_tradeoff(result.timelines["code-completion"]).set_index("replicas")
    low = min(int(row["whole_log_replicas"]), int(row["replicas"]) - 1)
    assert list(tradeoff.index) == list(range(low, int(row["replicas"]) + 1))
    chosen = tradeoff.loc[int(row["replicas"])]
    assert chosen["recommended"] and chosen["windows_in_breach"] == row["windows_in_breach"] == 0
    assert chosen["usd_per_month"] == pytest.approx(row["total_usd_per_month"])
    whole = tradeoff.loc[int(row["whole_log_replicas"])]
    assert whole["windows_in_breach"] == row["whole_log_windows_in_breach"]
    assert whole["usd_per_month"] == pytest.approx(row["whole_log_usd_per_month"])
    assert tradeoff["usd_per_month"].is_monotonic_increasing


def test_a_big_fleets_timeline_holds_a_few_fleet_sizes_with_both_ends_and_one_fewer():
    """A fleet of thousands whose whole-log count is far below: 8 sizes, not every count between (each one is a
    fleet simulation); a small fleet keeps every count."""
    from planner.planning.plan import TIMELINE_FLEETS, timeline_counts

    assert timeline_counts(2, 5) == [2, 3, 4, 5]
    big = timeline_counts(120, 3100)
    assert len(big) == TIMELINE_FLEETS and big == sorted(set(big))
    assert {120, 3099, 3100} <= set(big)


def _replica_out(code_plan, tmp_path, capsys, *extra: str):
    """`simulate --replica-out` of the code route's plan (its routes and plan written to tmp_path): the file."""
    routes, result = code_plan
    routes_csv, plan_csv, out = tmp_path / "routes.csv", tmp_path / "plan.csv", tmp_path / "replica.csv"
    routes.to_csv(routes_csv, index=False)
    result.plan.to_csv(plan_csv, index=False)
    assert main(["simulate", "--routes", str(routes_csv), "--plan", str(plan_csv), "--route", "code-completion",
                 "--replica-out", str(out), *extra]) == 0
    capsys.readouterr()
    return out


def test_replica_out_of_the_worst_window_picks_the_replica_faring_worst_there(code_plan, tmp_path, capsys):
    """simulate --replica-window worst: the window the plan's worst-window columns come from, and in it the replica
    whose requests have the highest TTFT at the route's percentile."""
    routes, result = code_plan
    out = _replica_out(code_plan, tmp_path, capsys, "--replica-window", "worst")
    written = pd.read_csv(out)
    sim = simulate_plan(routes, [r for r in result.rows if r.route == "code-completion"],
                        bundled_catalog().curves)[0]
    r, check = sim.result, sim.check
    w = check.worst_window
    inside = (r.arrival_s >= check.start_s[w]) & (r.arrival_s <= check.end_s[w])
    pct = check.targets.percentile
    scores = [np.nanpercentile(r.ttft_s[inside & (r.replica == k)], pct) if (inside & (r.replica == k)).any()
              else -np.inf for k in range(r.replicas)]
    assert int(written["replica"].iloc[0]) == int(np.argmax(scores))
    np.testing.assert_allclose(written["timestamp"], r.arrival_s[r.replica == int(np.argmax(scores))])


def test_the_worst_window_of_an_assigned_file_is_where_its_predictions_are_highest():
    times = list(np.arange(0.0, 300.0, 1.0))
    ttft = [50.0] * len(times)
    for k in range(120, 140):  # a slow stretch from 120 s
        ttft[k] = 900.0
    start = verify.worst_start(times, ttft, 60.0, 95.0)
    assert 80.0 <= start <= 120.0  # a window holding the whole slow stretch (20 of its 60 requests)
    assert verify.window_kind("worst:60") == "worst" and verify.parse_window("worst:60") == 60


def test_replica_out_with_a_replica_field_writes_every_replicas_share_and_the_fleet_window(code_plan, tmp_path,
                                                                                          capsys):
    """simulate --replica-out 'replica-{replica}.csv': one file per replica (together every request, each once) and
    the fleet's worst window to replay in each, which `verify --window at:START:SECONDS` takes."""
    routes, result = code_plan
    routes_csv, plan_csv = tmp_path / "routes.csv", tmp_path / "plan.csv"
    routes.to_csv(routes_csv, index=False)
    result.plan.to_csv(plan_csv, index=False)
    assert main(["simulate", "--routes", str(routes_csv), "--plan", str(plan_csv), "--route", "code-completion",
                 "--replica-out", str(tmp_path / "replica-{replica}.csv"), "--replica-window", "worst"]) == 0
    err = capsys.readouterr().err
    sim = simulate_plan(routes, [r for r in result.rows if r.route == "code-completion"],
                        bundled_catalog().curves)[0]
    r, check = sim.result, sim.check
    files = sorted(tmp_path.glob("replica-*.csv"))
    assert len(files) == r.replicas > 1
    written = pd.concat([pd.read_csv(f) for f in files])
    assert len(written) == r.n and sorted(written["replica"].unique()) == list(range(r.replicas))
    start = check.start_s[check.worst_window]
    window = re.search(r"--window (at:[\d.]+:[\d.]+)", err).group(1)
    assert verify.window_kind(window) == "at" and verify.window_at(window) == pytest.approx(start, abs=1e-3)
    assert verify.parse_window(window) == pytest.approx(check.end_s[check.worst_window] - start, abs=1e-3)
    # Each replica's requests of that window, pooled, are the fleet's window the verdict judged.
    inside = [(f["timestamp"] >= start) & (f["timestamp"] < start + verify.parse_window(window))
              for f in map(pd.read_csv, files)]
    assert sum(int(k.sum()) for k in inside) == int(np.sum((r.arrival_s >= start)
                                                         & (r.arrival_s < start + verify.parse_window(window))))


def test_an_at_window_is_a_start_and_a_length():
    assert verify.parse_window("at:1551.5:60") == 60 and verify.window_at("at:1551.5:60") == 1551.5
    for bad in ("at:60", "at:-1:60", "at:x:60", "at:10:0"):
        with pytest.raises(Exception, match="at:START:SECONDS"):
            verify.parse_window(bad)


def test_replays_of_one_window_pool_into_the_fleets_percentile():
    # Two replicas' records: each judged from its 30 s lead-in for 60 s; requests before or after are left out.
    one = {"judged_from_s": 30.0, "timeline": [[10.0, 9999.0, 1.0], [31.0, 100.0, 10.0], [50.0, 300.0, None],
                                               [95.0, 9999.0, 99.0]]}
    two = {"judged_from_s": 30.0, "timeline": [[30.0, 200.0, 20.0], [89.9, 400.0, 40.0]]}
    pooled = verify.pooled_window([one, two], 60.0, 50.0)
    assert pooled == {"requests": 4.0, "ttft_ms": 250.0, "tpot_ms": 20.0}
    with pytest.raises(Exception, match="record 1: no per-request timeline"):
        verify.pooled_window([{"judged_from_s": 0.0}], 60.0, 50.0)
