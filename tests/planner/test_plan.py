"""The Planning API end to end: real curves fitted on synthetic profile files, prices and ops files."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetfacts.errors import InputError
from fleetfacts.schema import PLAN, validate_frame
from planner.planning.catalog import Catalog, load_inputs
from planner.planning.plan import make_plan
from planner.planning.plan_files import plan_csv_text, read_assumptions, read_plan, write_plan
from planner.planning.route_table import load_routes, validate_routes
from planner.sizing import costs
from planner.sizing.assumptions import Assumptions
from planner.sizing.options import plan_option
from planner.sizing.plan_row import PLAN_DECIMALS, plan_rows, rounded_plan
from tests.conftest import bundled_catalog
from tests.planner.fakes import batch_route, online_route, write_synthetic_inputs, write_tuned_profile


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_synthetic_inputs(tmp_path_factory.mktemp("inputs"))


@pytest.fixture(scope="module")
def inputs(files) -> Catalog:
    return load_inputs(files["profiles"], files["prices"], files["ops"])


def routes(*rows: dict) -> pd.DataFrame:
    return pd.DataFrame(list(rows))


def with_prices(inputs: Catalog, **usd: float) -> Catalog:
    prices = inputs.prices_df.copy()
    for gpu, value in usd.items():
        prices.loc[prices["gpu"] == gpu, "usd_per_gpu_hour"] = value
    return Catalog(inputs.curves, prices, inputs.ops_df, inputs.profiles_df)


def test_plan_recommends_the_cheapest_feasible_option(inputs):
    result = make_plan(routes(online_route(), batch_route()), inputs, Assumptions())
    plan, options = result.plan, result.options
    assert list(plan.columns) == PLAN.names and (plan["status"] == "ok").all()
    for _, row in plan.iterrows():
        mine = options[(options["route"] == row["route"]) & options["feasible"]]
        assert row["total_usd_per_month"] == pytest.approx(mine["total_usd_per_month"].min())
        assert row["gpus"] == row["replicas"] * row["tp"]
        assert row["total_usd_per_month"] == pytest.approx(row["gpu_usd_per_month"] + row["eng_usd_per_month"])


def test_runner_up_differs_in_engine_or_gpu_and_savings_add_up(inputs):
    plan = make_plan(routes(online_route(model_updates_per_month=2)), inputs).plan.iloc[0]
    best = (plan["engine"], plan["gpu"])
    engine, _, gpu, *_ = plan["runner_up"].split("/")
    assert (engine, gpu) != best
    assert plan["savings_usd_per_month"] == pytest.approx(plan["runner_up_total_usd_per_month"]
                                                          - plan["total_usd_per_month"])
    assert plan["savings_usd_per_month"] >= 0


def test_breakeven_is_where_the_two_options_cost_the_same(inputs):
    # At 40 req/s TensorRT-LLM needs half the GPUs but costs more per update: the choice flips at some rate.
    result = make_plan(routes(online_route(rate_rps=40, model_updates_per_month=0.5)), inputs,
                       Assumptions(adoption_amortise_months=0))
    plan = result.plan.iloc[0]
    u = plan["breakeven_updates_per_month"]
    assert not math.isnan(u)
    opts = result.options.set_index("option")
    best = opts.loc[plan_option(plan)]
    runner = opts.loc[plan["runner_up"]]
    assert costs.monthly_total_vs_updates(best, [u])[0] == pytest.approx(costs.monthly_total_vs_updates(runner, [u])[0])
    # and the option's line passes through its own total at the route's update rate
    assert costs.monthly_total_vs_updates(best, [0.5])[0] == pytest.approx(best["total_usd_per_month"])


def test_zero_updates_zero_update_cost(inputs):
    options = make_plan(routes(online_route(model_updates_per_month=0)), inputs).options
    assert (options["update_usd_per_month"].dropna() == 0).all()
    no_adoption = make_plan(routes(online_route()), inputs, Assumptions(adoption_amortise_months=0)).options
    assert (no_adoption["eng_usd_per_month"].dropna() == 0).all()


@settings(max_examples=15, deadline=None)
@given(factor=st.floats(1.0, 5.0), rate=st.floats(0.5, 80.0))
def test_a_higher_price_never_gives_a_lower_plan_cost(inputs, factor, rate):
    rows = routes(online_route(rate_rps=rate), batch_route())
    base = make_plan(rows, inputs).plan["total_usd_per_month"].sum()
    dearer = make_plan(rows, with_prices(inputs, h100=2.5 * factor, h200=4.0 * factor)).plan["total_usd_per_month"].sum()
    assert dearer >= base - 1e-6


@settings(max_examples=15, deadline=None)
@given(tpot=st.floats(10.0, 80.0), shrink=st.floats(0.5, 1.0), rate=st.floats(0.5, 80.0))
def test_a_tighter_slo_never_gives_fewer_gpus_per_option(inputs, tpot, shrink, rate):
    loose = make_plan(routes(online_route(rate_rps=rate, tpot_slo_ms=tpot)), inputs).options.set_index("option")
    tight = make_plan(routes(online_route(rate_rps=rate, tpot_slo_ms=tpot * shrink)), inputs).options.set_index("option")
    for option, row in tight.iterrows():
        if row["feasible"]:
            assert loose.loc[option, "feasible"] and row["gpus"] >= loose.loc[option, "gpus"]


def test_no_profile_for_the_model_is_an_infeasible_row_not_an_exception(inputs):
    no_transfer = dataclasses.replace(inputs, transfer_mode="off")  # transferred options: test_transfer.py
    plan = make_plan(routes(online_route(model="llama-3.1-70b")), no_transfer).plan.iloc[0]
    assert plan["status"] == "infeasible"
    assert plan["notes"] == "no profile for model llama-3.1-70b on any GPU"


def test_allow_lists_restrict_the_options(inputs):
    result = make_plan(routes(online_route(gpus="h200", engines="VLLM")), inputs)
    assert set(result.options["option"]) == {"vllm/0.26.0/h200/bf16/tp1"}
    plan = make_plan(routes(online_route(gpus="b200")), inputs).plan.iloc[0]
    assert plan["status"] == "infeasible" and "no profile for model llama-3.1-8b on any allowed GPU" in plan["notes"]
    assert make_plan(routes(online_route(tps="2")), inputs).plan.iloc[0]["status"] == "infeasible"


def test_unpriced_gpu_is_an_infeasible_option_with_a_reason(inputs):
    prices = inputs.prices_df[inputs.prices_df["gpu"] != "h200"]
    result = make_plan(routes(online_route()), Catalog(inputs.curves, prices, inputs.ops_df, inputs.profiles_df))
    h200 = result.options[result.options["gpu"] == "h200"].iloc[0]
    assert not h200["feasible"] and h200["reason"] == "no price for gpu h200 (on-demand)"
    assert result.plan.iloc[0]["status"] == "ok"


def test_missing_engine_ops_row_makes_the_option_infeasible(inputs):
    ops = inputs.ops_df[inputs.ops_df["engine"] != "trtllm"]
    result = make_plan(routes(online_route()), Catalog(inputs.curves, inputs.prices_df, ops, inputs.profiles_df))
    trt = result.options[result.options["engine"] == "trtllm"].iloc[0]
    assert not trt["feasible"] and "no engine-ops row for trtllm 1.0.0" in trt["reason"]


def test_an_slo_nothing_meets_names_the_closest_option(inputs):
    plan = make_plan(routes(online_route(tpot_slo_ms=2.0)), inputs).plan.iloc[0]
    assert plan["status"] == "infeasible"
    assert plan["notes"].startswith("no option meets the SLOs; closest: ")
    assert "misses p95 TPOT by" in plan["notes"] and "at concurrency 1" in plan["notes"]


def test_provider_and_pricing_type_assumptions(inputs):
    chosen = make_plan(routes(online_route()), inputs, Assumptions(provider="cloud-a")).plan.iloc[0]
    assert chosen["price_source"].startswith("cloud-a")
    spot = make_plan(routes(online_route()), inputs, Assumptions(pricing_type="spot")).plan.iloc[0]
    assert spot["status"] == "infeasible" and spot["notes"].startswith("missing price: no spot price")
    assert "SLO" not in spot["notes"]


def test_a_missing_price_is_named_even_where_the_slo_is_also_missed(inputs):
    """Issue 15 §3.3: no price anywhere is the cause, not the closest SLO miss."""
    plan = make_plan(routes(online_route(tpot_slo_ms=2.0)), inputs, Assumptions(pricing_type="spot")).plan.iloc[0]
    assert plan["notes"].startswith("missing price") and "misses" not in plan["notes"]


def test_batch_billing_per_use_is_cheaper_than_always_on(inputs):
    per_use = make_plan(routes(batch_route()), inputs).plan.iloc[0]
    always = make_plan(routes(batch_route()), inputs, Assumptions(batch_billing="always-on")).plan.iloc[0]
    assert per_use["gpu_usd_per_month"] < always["gpu_usd_per_month"]
    assert always["gpu_usd_per_month"] == pytest.approx(always["gpus"] * 2.5 * 730)


def test_usd_per_million_output_tokens(inputs):
    plan = make_plan(routes(online_route(rate_rps=10, output_len_mean=200)), inputs).plan.iloc[0]
    tokens = 10 * 200 * 730 * 3600
    assert plan["usd_per_1m_output_tok"] == pytest.approx(plan["total_usd_per_month"] / tokens * 1e6)


# ---------------------------------------------------------------- plan files

NAMES = ["=cmd()", "+SUM(A1)", "-2+3", "@x", "'=already", "'quoted", "plain route", "-1.5", "é ü"]


def test_plan_round_trips_including_formula_looking_names(inputs, tmp_path):
    rows = [online_route(name) for name in NAMES] + [online_route("nope", model="no-such-model")]
    result = make_plan(routes(*rows), inputs, Assumptions(engineer_usd_per_hour=150.0, provider="cloud-a"))
    path = tmp_path / "plan.csv"
    write_plan(result, path)
    assert path.read_text().startswith("route,status,")  # header on line 1, no comment lines
    assert "\n=cmd()" not in path.read_text()  # escaped for spreadsheets
    assert pd.read_csv(path).shape == (len(rows), len(PLAN.names))
    plan, assumptions = read_plan(path)
    rounded = rounded_plan(result.plan).astype(object)
    pd.testing.assert_frame_equal(plan, validate_frame(rounded.where(rounded.notna(), None), PLAN, "rounded"))
    assert assumptions == result.assumptions
    side = json.loads((tmp_path / "plan.assumptions.json").read_text())
    assert side["assumptions"]["engineer_usd_per_hour"] == 150.0
    assert {s["kind"] for s in side["price_sources"]} == {"price"}
    assert side["coverage"] == f"{len(NAMES)} of {len(rows)} routes; nope infeasible"


def test_plan_files_round_numbers_for_people(inputs, tmp_path):
    result = make_plan(routes(online_route(), batch_route()), inputs)
    write_plan(result, tmp_path / "plan.csv")
    text = (tmp_path / "plan.csv").read_text()
    frame = pd.read_csv(tmp_path / "plan.csv")
    for column, digits in PLAN_DECIMALS.items():
        values = frame[column].dropna()
        assert (values == values.round(digits)).all(), column
    assert "e-" not in text and not re.search(r"\.\d{5,}", text)


def test_a_legacy_plan_with_assumptions_on_line_1_still_reads(inputs, tmp_path):
    result = make_plan(routes(online_route()), inputs, Assumptions(engineer_usd_per_hour=175.0))
    legacy = tmp_path / "old.csv"
    body = plan_csv_text(result)
    legacy.write_text(f"# fleetplan-assumptions: {json.dumps(result.assumptions.to_dict())}\n{body}")
    plan, assumptions = read_plan(legacy)
    assert assumptions.engineer_usd_per_hour == 175.0 and plan["route"].iloc[0] == "chat"
    assert read_assumptions(legacy) == assumptions


def test_a_killed_write_leaves_the_old_plan(inputs, tmp_path, monkeypatch):
    """Issue 14 §7: the plan is written to a temp file and renamed; a failure mid-write keeps the old file."""
    path = tmp_path / "plan.csv"
    write_plan(make_plan(routes(online_route()), inputs), path)
    before = path.read_bytes()

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(InputError, match="no output was replaced"):  # outputs commit together, naming the path
        write_plan(make_plan(routes(online_route(rate_rps=50.0)), inputs), path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.assumptions.json", "plan.csv"]  # no temp left


@settings(max_examples=30, deadline=None)
@given(name=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20))
def test_any_route_name_round_trips(inputs, tmp_path_factory, name):
    if not name.strip():
        return
    result = make_plan(routes(online_route(name)), inputs)
    path = tmp_path_factory.mktemp("rt") / "plan.csv"
    write_plan(result, path)
    assert read_plan(path)[0]["route"].iloc[0] == name


def test_assumptions_round_trip_and_validation():
    a = Assumptions(hours_per_month=720, provider="lambda", batch_billing="always-on")
    assert Assumptions.from_dict(a.to_dict()) == a
    with pytest.raises(InputError, match="unknown key"):
        Assumptions.from_dict({"hours_per_year": 8760})
    with pytest.raises(InputError, match="utilisation_cap"):
        Assumptions(utilisation_cap=1.5)
    with pytest.raises(InputError, match="pricing_type"):
        Assumptions(pricing_type="cheap")
    with pytest.raises(InputError, match="expected a number"):
        Assumptions.from_dict({"hours_per_month": "lots"})
    assert "assumption: set your loaded engineering rate" in dict((n, w) for n, _, w in a.describe())[
        "engineer_usd_per_hour"]


def test_a_plan_written_before_an_assumption_retired_still_reads():
    older = {**Assumptions().to_dict(), "default_service_cv2": 1.0}   # the G/G/c sizing's, gone since issue 22
    assert Assumptions.from_dict(older) == Assumptions()
    assert "default_service_cv2" not in Assumptions().to_dict()


def test_reading_something_that_is_not_a_plan(tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_text("name,model\nx,y\n")
    with pytest.raises(InputError, match="route"):
        read_plan(plain)
    bare = tmp_path / "bare.csv"
    bare.write_text("route,status\nx,ok\n")
    assert read_plan(bare)[1] is None  # a plan without its assumptions file: the plan, no assumptions
    with pytest.raises(InputError, match="no assumptions beside this plan"):
        read_assumptions(bare)
    (tmp_path / "bare.assumptions.json").write_text("[1]")
    with pytest.raises(InputError, match="not a plan assumptions file"):
        read_plan(bare)
    broken = tmp_path / "broken.csv"
    broken.write_text("# fleetplan-assumptions: {nope\nroute,status\nx,ok\n")
    with pytest.raises(InputError, match="not valid JSON"):
        read_plan(broken)
    with pytest.raises(InputError, match="file not found"):
        read_plan(tmp_path / "missing.csv")


# ---------------------------------------------------------------- bad routes

def write_routes(tmp_path, *rows: dict, drop: tuple[str, ...] = ()) -> str:
    path = tmp_path / "routes.csv"
    pd.DataFrame(list(rows)).drop(columns=list(drop)).to_csv(path, index=False)
    return str(path)


@pytest.mark.parametrize("row,drop,message", [
    (online_route(rate_rps=-3), (), "line 2, column 'rate_rps': expected a value > 0"),
    (online_route(rate_rps=None), (), "line 2, column 'rate_rps': a value is required for a online route"),
    (online_route(ttft_slo_ms=None, tpot_slo_ms=None), ("ttft_slo_ms", "tpot_slo_ms"),
     "line 2, column 'ttft_slo_ms': an online route needs at least one latency SLO"),
    (batch_route(deadline_hours=None), ("deadline_hours",), "line 2, column 'deadline_hours': a value is required"),
    (batch_route(num_requests=None), (), "line 2, column 'num_requests'"),
    (online_route(tps="two"), (), "line 2, column 'tps'"),
    (online_route(traffic="sometimes"), (), "line 2, column 'traffic': expected one of online, batch"),
    (online_route(slo_percentile=100), (), "line 2, column 'slo_percentile': expected a percentile below 100"),
])
def test_bad_routes_name_the_line_and_column(tmp_path, row, drop, message):
    path = write_routes(tmp_path, row, drop=drop)
    with pytest.raises(InputError, match=message.replace("(", r"\(")) as err:
        load_routes(path)
    assert str(err.value).startswith(path)


def test_bad_route_on_a_later_line_and_duplicate_names(tmp_path):
    path = write_routes(tmp_path, online_route("a"), online_route("b", arrival_cv=-1))
    with pytest.raises(InputError, match="line 3, column 'arrival_cv'"):
        load_routes(path)
    with pytest.raises(InputError, match="line 3, column 'name': duplicate route name 'a'"):
        validate_routes(routes(online_route("a"), online_route("a")))


def test_make_plan_validates_frames_too(inputs):
    with pytest.raises(InputError, match="column 'deadline_hours'"):
        make_plan(routes(batch_route(deadline_hours=None)), inputs)


def test_make_plan_accepts_the_typed_frame_from_load_routes(tmp_path, inputs):
    typed = load_routes(write_routes(tmp_path, online_route(), batch_route()))
    assert (make_plan(typed, inputs).plan["status"] == "ok").all()


def test_a_curve_that_cannot_predict_is_an_infeasible_option(inputs):
    from planner.engine.curves import NoCurveError
    from tests.planner.fakes import FakeCurve, key

    class Refusing(FakeCurve):
        def predict_concurrency(self, input_len, output_len, concurrency):
            raise NoCurveError("cannot predict this shape")

    curves = {key(gpu="h100"): Refusing(key(gpu="h100"))}
    result = make_plan(routes(online_route()), Catalog(curves, inputs.prices_df, inputs.ops_df, inputs.profiles_df))
    assert result.plan.iloc[0]["status"] == "infeasible"
    assert "cannot predict this shape" in result.plan.iloc[0]["notes"]


# ---------------------------------------------------------------- engine config (tuned vs default settings)

@pytest.fixture(scope="module")
def tuned_inputs(tmp_path_factory) -> Catalog:
    files = write_synthetic_inputs(tmp_path_factory.mktemp("tuned"))
    write_tuned_profile(files["profiles"])
    return load_inputs(files["profiles"], files["prices"], files["ops"])


VLLM_H100 = dict(engines="vllm", gpus="h100")


def test_a_tuned_and_a_default_profile_are_two_options(tuned_inputs):
    options = make_plan(routes(online_route(**VLLM_H100)), tuned_inputs).options.set_index("option")
    default, tuned = options.loc["vllm/0.26.0/h100/bf16/tp1"], options.loc["vllm/0.26.0/h100/bf16/tp1/tuned"]
    assert (default["engine_config"], tuned["engine_config"]) == ("default", "tuned")
    assert tuned["replica_output_tok_per_s"] > default["replica_output_tok_per_s"]
    assert tuned["usd_per_update"] == default["usd_per_update"]  # engine-ops costs: engine and version only


def test_the_plan_says_which_settings_its_recommendation_assumes(tuned_inputs, tmp_path):
    result = make_plan(routes(online_route(rate_rps=40, **VLLM_H100)), tuned_inputs)
    row = result.plan.iloc[0]
    assert row["engine_config"] == "tuned"  # the faster settings, same price: cheaper
    assert plan_option(row) in set(result.options.loc[result.options["feasible"], "option"])
    write_plan(result, tmp_path / "plan.csv")
    assert read_plan(tmp_path / "plan.csv")[0]["engine_config"].iloc[0] == "tuned"


def test_simulating_a_plan_uses_the_curve_of_its_config(tuned_inputs):
    from planner.planning.plan_check import simulate_plan

    route = routes(online_route(rate_rps=40, **VLLM_H100))
    plan = make_plan(route, tuned_inputs).plan
    assert plan["engine_config"].iloc[0] == "tuned"
    (tuned,) = simulate_plan(route, plan_rows(plan), tuned_inputs.curves, n_requests=200)
    assert tuned.option == "vllm/0.26.0/h100/bf16/tp1/tuned"
    # A plan written before the engine_config column existed means the default settings.
    old_plan = plan_rows(plan.drop(columns="engine_config"))
    (old,) = simulate_plan(route, old_plan, tuned_inputs.curves, n_requests=200)
    assert old.option == "vllm/0.26.0/h100/bf16/tp1"


def test_a_configs_allow_list_keeps_a_route_on_the_settings_it_can_deploy(tuned_inputs):
    route = online_route(rate_rps=40, configs="Default", **VLLM_H100)
    result = make_plan(routes(route), tuned_inputs)
    assert set(result.options["option"]) == {"vllm/0.26.0/h100/bf16/tp1"}
    assert result.plan.iloc[0]["engine_config"] == "default"
    only_tuned = make_plan(routes(online_route(configs="tuned", **VLLM_H100)), tuned_inputs).options
    assert set(only_tuned["option"]) == {"vllm/0.26.0/h100/bf16/tp1/tuned"}
    nothing = make_plan(routes(online_route(configs="fast", **VLLM_H100)), tuned_inputs).plan.iloc[0]
    assert nothing["status"] == "infeasible" and "configs=fast" in nothing["notes"]


# ---------------------------------------------------------------- issue 14 item 2: long-context routes

def _long_route(name: str, input_len: float) -> dict:
    return {"name": name, "model": "llama-3.1-8b", "traffic": "online", "rate_rps": 1.0, "peak_to_mean": 2.0,
            "input_len_mean": input_len, "output_len_mean": 250.0, "ttft_slo_ms": 50000.0, "tpot_slo_ms": 200.0}


def test_a_long_context_route_inside_the_window_is_planned_on_physics_not_extrapolation():
    """64k prompts: the H100 curves are measured there, the H200 ones continue by their physics prior; either way
    the plan is not an extrapolation of a short fit, and its throughput range is one a team can buy on."""
    plan = make_plan(pd.DataFrame([_long_route("long", 64000.0)]), bundled_catalog()).plan.iloc[0]
    assert plan.status == "ok"
    low, high = plan.replica_output_tok_per_s_low, plan.replica_output_tok_per_s_high
    assert 0 < low <= plan.replica_output_tok_per_s <= high
    assert high / low < 2.0
    # a 64k prefill alone takes seconds (H100 measured at batch 1: 3.3 s bf16, 2.8 s FP8); the short
    # fits extrapolated put it near 1 s
    assert plan.ttft_pred_ms > 2000.0, plan.ttft_pred_ms


def test_a_route_beyond_the_models_context_window_is_infeasible_with_the_window_named():
    from fleetfacts.specs import context_window
    window, _ = context_window("llama-3.1-8b")
    plan = make_plan(pd.DataFrame([_long_route("huge", window + 1.0)]), bundled_catalog()).plan.iloc[0]
    assert plan.status == "infeasible"
    assert f"context window of {window:,} tokens" in plan.notes and "max_position_embeddings" in plan.notes
