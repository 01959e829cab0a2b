"""One latency truth (issues 22, 34): the plan reports, for each online route, what the latency door's fleet tier
predicts for its replicas behind the router on the route's one load, which is what `predict --request-rate <peak>
--replicas <replicas>` prints; the screen (size_online) takes the fewest replicas the door says meet the SLOs at one
replica's share."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetfacts.errors import InputError
from planner.cli import main
from planner.latency import (
    TIER_ANALYTIC,
    TIER_FLEET,
    TIER_REPLAYED,
    TIER_SIMULATED,
    Closed,
    Lengths,
    OpenLoop,
    Replay,
    predict,
)
from planner.planning.plan import make_plan
from planner.planning.route_table import validate_routes
from planner.sizing import sizing
from planner.sizing.assumptions import Assumptions
from planner.traffic.routes import Route
from planner.traffic.workload import route_log_requests
from tests.conftest import bundled_catalog

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_ROUTES = REPO / "examples" / "routes.csv"


@pytest.fixture(scope="module")
def catalog():
    return bundled_catalog()


def _vllm_h200_routes(precision: str) -> pd.DataFrame:
    """The example's online routes, held to vLLM on one H200 at `precision` (the H200 round trip's routes)."""
    routes = pd.read_csv(EXAMPLE_ROUTES, keep_default_na=False)
    routes = routes[routes["traffic"] == "online"].copy()
    routes = routes[routes["model"] == "llama-3.1-8b"]
    routes[["engines", "gpus", "precisions", "tps"]] = ["vllm", "h200", precision, "1"]
    routes["log"] = routes["log"].map(lambda p: str(REPO / "examples" / p) if p else "")
    return validate_routes(routes.reset_index(drop=True), "routes")


def _predict_cli(capsys, row: pd.Series, route: Route) -> dict:
    args = ["predict", "--gpu", row.gpu, "--engine", row.engine, "--engine-version", str(row.engine_version),
            "--config", row.engine_config, "--model", route.model, "--precision", row.precision, "--tp",
            str(int(row.tp)), "--request-rate", repr(route.peak_rps), "--replicas", str(int(row.replicas)), "--json"]
    if route.log:
        args += ["--log", route.log]
    else:
        args += ["--input-len", str(round(route.input_len)), "--output-len", str(round(route.output_len)),
                 "--arrival-cv", repr(route.arrival_cv)]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def _bundled_routes() -> pd.DataFrame:
    routes = pd.read_csv(EXAMPLE_ROUTES, keep_default_na=False)
    routes["log"] = routes["log"].map(lambda p: str(REPO / "examples" / p) if p else "")
    return validate_routes(routes, "routes")


@pytest.mark.parametrize("routes", ["fp8", "bf16", "bundled"])
def test_the_plan_reports_what_predict_prints_for_its_fleet(catalog, capsys, bundled_fitted_once, routes):
    routes = _bundled_routes() if routes == "bundled" else _vllm_h200_routes(routes)
    plan = make_plan(routes, catalog, Assumptions(), check_by_simulation=True).plan
    online = plan[plan["traffic"] == "online"]
    assert set(online["route"]) >= {"chat", "code-completion"}
    for _, row in online.iterrows():
        assert row.status == "ok", row.notes
        route = Route.from_row(routes[routes["name"] == row.route].iloc[0].to_dict())
        printed = _predict_cli(capsys, row, route)
        assert row.latency_tier == TIER_FLEET
        for metric in ("ttft", "tpot", "e2e"):
            # rel 1e-4: a log's rate_rps is rounded to 4 digits in the routes file, predict scales the log exactly
            assert row[f"{metric}_pred_ms"] == pytest.approx(printed[f"{metric}_p95_ms"], rel=1e-4), metric
            assert row[f"{metric}_pred_ms_low"] <= row[f"{metric}_pred_ms"] <= row[f"{metric}_pred_ms_high"]


def test_sizing_takes_the_fewest_replicas_the_door_says_meet_the_slos(catalog):
    routes = _vllm_h200_routes("bf16")
    for _, raw in routes.iterrows():
        route = Route.from_row(raw.to_dict())
        curve = next(c for k, c in catalog.curves.items() if (k.engine, k.gpu, k.precision, k.tp, k.model, k.config)
                     == ("vllm", "h200", "bf16", 1, route.model, "default"))
        log = route_log_requests(route)
        sized = sizing.size_online(curve, route, 1, log=log)
        assert sized.feasible
        assert sizing.share_latency(curve, route, sized.replicas, log).meets(route)
        if sized.replicas > 1:
            assert not sizing.share_latency(curve, route, sized.replicas - 1, log).meets(route)


def test_a_route_one_replica_carries_gets_one_and_ten_times_its_rate_gets_more(catalog):
    routes = _vllm_h200_routes("fp8")
    chat = routes[routes["name"] == "chat"].reset_index(drop=True)
    plan = make_plan(chat, catalog, Assumptions(), check_by_simulation=True).plan
    assert plan.loc[0, "replicas"] == 1           # 10 req/s of 500/250: a few % of an H200's FP8 capacity
    busy = chat.assign(rate_rps=chat["rate_rps"] * 10)
    busy_plan = make_plan(busy, catalog, Assumptions(), check_by_simulation=False).plan
    assert busy_plan.loc[0, "replicas"] > 1
    assert busy_plan.loc[0, "ttft_pred_ms"] <= chat.loc[0, "ttft_slo_ms"]


# ---------------------------------------------------------------- the door itself

def _curve(catalog):
    return next(c for k, c in catalog.curves.items() if (k.engine, k.gpu, k.precision, k.tp, k.model, k.config)
                == ("vllm", "h200", "bf16", 1, "llama-3.1-8b", "default"))


def test_latency_grows_with_load_and_every_figure_has_its_interval(catalog):
    curve = _curve(catalog)
    light, heavy = (predict(curve, OpenLoop(rate), Lengths.fixed(512, 256)) for rate in (2.0, 30.0))
    assert light.tier == heavy.tier == TIER_SIMULATED
    for metric in ("ttft", "tpot", "e2e"):
        assert light.value(metric, 95) < heavy.value(metric, 95)
        low, high = heavy.interval(metric, 95)
        assert low < heavy.value(metric, 95) < high
    # A percentile the report does not carry comes from its requests.
    assert light.value("ttft", 50) <= light.value("ttft", 97.5) <= light.value("ttft", 99)


def test_a_replayed_log_runs_at_the_rate_asked_and_a_share_takes_every_nth_request(catalog):
    t = np.cumsum(np.random.default_rng(0).exponential(1.0, size=400))
    load = Replay.of_log(t, (np.full(400, 300), np.full(400, 50)), rate_rps=8.0)
    assert load.rate_rps == pytest.approx(8.0)
    report = predict(_curve(catalog), load)
    assert report.tier == TIER_REPLAYED and report.value("ttft", 95) > 0
    third = Replay.of_log(t, (np.arange(400) + 1, np.full(400, 50)), rate_rps=8.0, replicas=3)
    assert list(third.input_len[:3]) == [1, 4, 7] and third.rate_rps == pytest.approx(8.0 / 3, rel=0.1)


def test_a_share_of_a_bursty_stream_is_less_bursty_and_poisson_stays_poisson():
    assert OpenLoop(12.0, 1.0).share(4) == OpenLoop(3.0, 1.0)
    bursty = OpenLoop(12.0, 13.0).share(4)
    assert bursty.rate_rps == 3.0 and 1.0 < bursty.arrival_cv < 13.0
    assert bursty.arrival_cv == pytest.approx(math.sqrt(1 + (13.0**2 - 1) / 4))


def test_a_closed_loop_is_the_analytic_tier_and_bad_loads_are_refused(catalog):
    curve = _curve(catalog)
    report = predict(curve, Closed(16), Lengths.fixed(512, 256))
    assert report.tier == TIER_ANALYTIC and math.isfinite(report.value("ttft", 50))
    with pytest.raises(InputError, match="request rate"):
        OpenLoop(0.0)
    with pytest.raises(InputError, match="lengths"):
        predict(curve, OpenLoop(1.0))


def test_deploy_context_covers_the_longest_request_of_the_routes_log(catalog):
    routes = _vllm_h200_routes("fp8")
    plan = make_plan(routes, catalog, Assumptions(), check_by_simulation=False).plan
    code = plan[plan["route"] == "code-completion"].iloc[0]
    route = Route.from_row(routes[routes["name"] == "code-completion"].iloc[0].to_dict())
    _, (inputs, outputs) = route_log_requests(route)
    assert code.max_model_len == int(np.max(inputs + outputs))
    assert code.max_model_len > route.input.at_percentile(99) + route.output.at_percentile(99)


def test_a_routes_file_naming_a_missing_log_is_one_line_naming_file_line_and_column(tmp_path, capsys):
    routes = tmp_path / "routes.csv"
    routes.write_text(EXAMPLE_ROUTES.read_text(encoding="utf-8"), encoding="utf-8")   # its log is not beside it
    assert main(["plan", "--routes", str(routes), "--out", str(tmp_path / "plan.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "routes.csv, line 4, column 'log'" in err and "not found" in err
    assert not (tmp_path / "plan.csv").exists()
