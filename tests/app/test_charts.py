"""ui.charts: chart tables keep provenance and per-GPU units; charts build valid Vega-Lite specs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetfacts.schema import PROFILE, validate_frame
from planner.planning.catalog import load_inputs
from planner.planning.plan import make_plan
from planner.planning.route_table import load_routes
from planner.sizing.assumptions import Assumptions
from planner.sizing.costs import breakeven_updates
from tests.conftest import bundled_catalog
from tests.planner import fakes
from tests.planner.fakes import online_route, write_synthetic_inputs, write_tuned_profile
from ui import charts
from ui.scenario import Settings, sensitivity_table

MODEL = "llama-3.1-8b"
REPO_ROUTES = Path(__file__).resolve().parents[2] / "examples" / "routes.csv"


@pytest.fixture(scope="module")
def inputs():
    return bundled_catalog()


@pytest.fixture(scope="module")
def result(inputs):
    return make_plan(load_routes(REPO_ROUTES), inputs, Assumptions())


def h200_keys(inputs):
    return [k for k in inputs.curves if k.model == MODEL and k.gpu == "h200"]


def test_shapes_prefer_the_most_measured_points(inputs):
    shapes = charts.available_shapes(inputs.profiles_df, MODEL)
    profiles = inputs.profiles_df
    measured = profiles[(profiles["model"] == MODEL) & (profiles["provenance"] == "measured")
                        & (profiles["mode"] == "offline")]
    top = measured.groupby(["input_len", "output_len"]).size().max()
    first = measured[(measured["input_len"] == shapes[0][0]) & (measured["output_len"] == shapes[0][1])]
    assert len(first) == top


def test_throughput_table_is_per_gpu_and_labelled(inputs):
    table = charts.throughput_table(inputs.curves, MODEL, 512, 256, "offline", h200_keys(inputs))
    assert set(table["provenance"]) <= {"predicted", "extrapolated"}
    assert (table["low"] <= table["tok_s_per_gpu"] + 1e-9).all() and (table["tok_s_per_gpu"] <= table["high"] + 1e-9).all()
    key = next(k for k in h200_keys(inputs) if k.engine == "vllm")
    row = table[table["series"] == key.label()].iloc[len(table) // 40]
    pred = inputs.curves[key].predict_offline(512, 256, int(row["load"]))
    assert row["tok_s_per_gpu"] == pytest.approx(pred.output_tok_per_s / key.tp)


def test_extrapolated_segments_join_the_predicted_ones():
    frame = pd.DataFrame({"series": ["a"] * 4, "engine": "vllm", "engine_version": "1", "gpu": "h200",
                          "precision": "bf16", "tp": 1, "load": [1.0, 2.0, 4.0, 8.0],
                          "tok_s_per_gpu": [1.0, 2.0, 3.0, 4.0], "low": 0.0, "high": 5.0,
                          "provenance": ["predicted", "predicted", "extrapolated", "extrapolated"]})
    bridged = charts._bridge_segments(frame)
    assert len(bridged) == 5
    at_four = bridged[bridged["load"] == 4.0]
    assert set(at_four["provenance"]) == {"predicted", "extrapolated"}


def test_profile_points_keep_their_provenance_and_source(inputs):
    points = charts.profile_points(inputs.profiles_df, MODEL, 512, 256)
    assert len(points) > 0
    assert set(points["provenance"]) <= {"measured", "published"}
    assert points["source"].str.len().min() > 0


def test_newest_versions_keeps_one_key_per_configuration(inputs):
    keys = [k for k in inputs.curves if k.model == MODEL]
    newest = charts.newest_versions(keys)
    slots = [(k.engine, k.gpu, k.precision, k.tp, k.config) for k in newest]
    assert len(slots) == len(set(slots)) and len(newest) < len(keys)


def test_head_to_head_compares_the_same_work(inputs):
    table = charts.head_to_head_table(inputs.curves, inputs.profiles_df)
    assert not table.empty
    for _, pair in table.groupby(["gpu", "model", "precision", "input_len", "output_len"]):
        assert sorted(pair["engine"]) == ["trtllm", "vllm"]
        trt = pair[pair["engine"] == "trtllm"].iloc[0]
        vllm = pair[pair["engine"] == "vllm"].iloc[0]
        assert trt["provenance"] == "published"
        assert trt["ratio"] == pytest.approx(trt["tok_s_per_gpu"] / vllm["tok_s_per_gpu"])
    assert (table.loc[table["engine"] == "vllm", "provenance"] == "measured").any()
    stats = charts.head_to_head_summary(table)
    assert stats["in_claimed_band"] + stats["above_claimed_band"] + stats["below_claimed_band"] == stats["shapes"]


def test_frontier_points_are_not_dominated(inputs):
    table = charts.frontier_table(inputs.curves, MODEL, 500, 250, h200_keys(inputs))
    for engine, group in table.groupby("engine"):
        front = group[group["frontier"]]
        for _, p in front.iterrows():
            better = group[(group["tok_s_per_gpu"] > p["tok_s_per_gpu"]) & (group["tpot_ms"] < p["tpot_ms"])]
            assert better.empty, engine


def legends(spec: dict) -> dict[tuple[str, str], list]:
    """(channel, field) -> the legend setting of every layer that encodes it ("default" when unset)."""
    found: dict[tuple[str, str], list] = {}
    for layer in spec.get("layer", [spec]):
        for channel, enc in layer.get("encoding", {}).items():
            if isinstance(enc, dict) and "field" in enc and channel in LEGEND_CHANNELS:
                found.setdefault((channel, enc["field"]), []).append(enc.get("legend", "default"))
    return found


LEGEND_CHANNELS = ("color", "shape", "strokeDash", "strokeWidth", "opacity", "size")


def assert_every_line_in_a_legend(spec: dict, line_field: str) -> None:
    """No channel is legend-less in one layer and legended in another (Vega-Lite's 'Conflicting
    legend property "disable"', which drops the legend), and the lines' colour has a legend."""
    for (channel, field), settings in legends(spec).items():
        assert None not in settings, f"{channel}:{field} has legend=None in a layer: {settings}"
    assert ("color", line_field) in legends(spec), f"no colour legend for {line_field}"


def test_throughput_chart_names_every_line_in_a_legend(inputs):
    keys = h200_keys(inputs)
    chart = charts.throughput_chart(charts.throughput_table(inputs.curves, MODEL, 512, 256, "offline", keys),
                                    charts.profile_points(inputs.profiles_df, MODEL, 512, 256))
    assert_every_line_in_a_legend(chart.to_dict(), "series")


def test_frontier_chart_names_its_engines_and_line_kinds(inputs):
    chart = charts.frontier_chart(charts.frontier_table(inputs.curves, MODEL, 500, 250, h200_keys(inputs)), 50.0)
    spec = chart.to_dict()
    assert_every_line_in_a_legend(spec, "engine")
    assert ("strokeWidth", "line") in legends(spec)  # thin: one configuration, thick: the engine's frontier


def test_pareto_per_route_marks_the_frontier_the_choice_and_the_slo(inputs, result):
    routes = load_routes(REPO_ROUTES).set_index("name")
    chat = routes.loc["chat"]
    table = charts.pareto_table(inputs.curves, result.options, "chat", MODEL, chat["input_len_mean"], chat["output_len_mean"])
    assert table["option"].nunique() > 1
    front = table[table["frontier"]]
    for _, p in front.iterrows():
        better = table[(table["tok_s_per_user"] > p["tok_s_per_user"]) & (table["tok_s_per_gpu"] > p["tok_s_per_gpu"])]
        assert better.empty
    points = charts.operating_points(result.options, result.plan, "chat")
    plan_row = result.plan.set_index("route").loc["chat"]
    chosen = points[points["recommended"]]
    assert len(chosen) == 1
    assert chosen["concurrency"].iloc[0] == pytest.approx(plan_row["in_flight_p99"])
    assert chosen["tok_s_per_user"].iloc[0] >= 1000 / chat["tpot_slo_ms"]  # the planned TPOT meets the SLO
    served = chat["rate_rps"] * chat["peak_to_mean"] * chat["output_len_mean"] / plan_row["gpus"]
    assert chosen["tok_s_per_gpu"].iloc[0] == pytest.approx(served, rel=1e-6)  # what it serves at the peak
    spec = charts.pareto_chart(table, points, float(chat["tpot_slo_ms"])).to_dict()
    assert_every_line_in_a_legend(spec, "option")
    assert "TPOT SLO" in str(spec) and "chosen" in str(spec)


@pytest.mark.parametrize("concurrency", [8, 64])
def test_the_pareto_points_are_predict_s_benchmark_closed_loop(inputs, result, capsys, concurrency):
    """A Pareto point's TTFT, TPOT and tok/s are `predict --concurrency C --closed-loop rounds --json`'s for the
    same curve and lengths."""
    from planner.cli import main
    chat = load_routes(REPO_ROUTES).set_index("name").loc["chat"]
    table = charts.pareto_table(inputs.curves, result.options, "chat", MODEL, chat["input_len_mean"], chat["output_len_mean"])
    curve = table[table["option"] == "vllm/0.26.0/h200/bf16/tp1"]
    point = curve.loc[[(curve["concurrency"] - concurrency).abs().idxmin()]]  # the swept concurrency nearest
    concurrency = int(point["concurrency"].iloc[0])
    assert main(["predict", "--gpu", "h200", "--engine", "vllm", "--engine-version", "0.26.0", "--model", MODEL,
                 "--precision", "bf16", "--tp", "1", "--input-len", f"{chat['input_len_mean']:g}", "--output-len",
                 f"{chat['output_len_mean']:g}", "--concurrency", str(concurrency), "--closed-loop", "rounds",
                 "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["tier"] == "closed-loop simulated"
    p = point.iloc[0]
    assert p["ttft_ms"] == pytest.approx(record["ttft_ms"], rel=1e-9)
    assert p["tpot_ms"] == pytest.approx(record["tpot_ms"], rel=1e-9)
    assert p["tok_s_per_gpu"] == pytest.approx(record["output_tok_per_s"], rel=1e-9)


def test_option_costs_flag_exactly_the_recommendations(result):
    table = charts.option_costs_table(result.options, result.plan)
    flagged = table[table["recommended"]].drop_duplicates("route")
    assert set(flagged["route"]) == set(result.plan.loc[result.plan["status"] == "ok", "route"])
    totals = table.groupby(["route", "option"])["usd_per_month"].sum()
    expected = table.groupby(["route", "option"])["total_usd_per_month"].first()
    np.testing.assert_allclose(totals.values, expected.values, rtol=1e-9)


def test_breakeven_lines_cross_where_the_costs_say(result):
    route = "chat"
    crossing = charts.engine_breakeven(result.options, route)
    table = charts.breakeven_table(result.options, route, [0.0, 1.0, 50.0])
    lines = {e: g.set_index("updates_per_month")["total_usd_per_month"] for e, g in table.groupby("engine")}
    assert len(lines) == 2
    ok = result.options[(result.options["route"] == route) & result.options["feasible"]]
    best = ok.sort_values("total_usd_per_month").groupby("engine").head(1)
    a, b = best.iloc[0], best.iloc[1]
    assert crossing == breakeven_updates(a["fixed_usd_per_month"], a["usd_per_update"],
                                         b["fixed_usd_per_month"], b["usd_per_update"])
    if crossing is not None:
        left, right = (lines[e] for e in sorted(lines))
        assert np.sign(left[0.0] - right[0.0]) != np.sign(left[50.0] - right[50.0])


def test_sensitivity_grows_with_traffic_and_price(inputs):
    routes = load_routes(REPO_ROUTES)
    table = sensitivity_table(routes, inputs, Settings(), growths=(1.0, 3.0), price_factors=(1.0, 1.5))
    at = table.set_index(["traffic_growth", "gpu_price_factor"])["total_usd_per_month"]
    assert at[(3.0, 1.0)] >= at[(1.0, 1.0)]
    assert at[(1.0, 1.5)] > at[(1.0, 1.0)]


def test_recommendation_table_keeps_provenance(result):
    table = charts.recommendation_table(result.plan)
    assert list(table["route"]) == list(result.plan["route"])
    assert "numbers are" in table.columns and table["numbers are"].notna().all()


def test_every_chart_builds_a_valid_spec(inputs, result):
    keys = h200_keys(inputs)
    h2h = charts.head_to_head_table(inputs.curves, inputs.profiles_df)
    sens = pd.DataFrame({"traffic_growth": [1.0, 2.0], "gpu_price_factor": [1.0, 1.0],
                         "total_usd_per_month": [1.0, 2.0], "gpus": [1.0, 2.0], "infeasible": [0.0, 0.0]})
    built = [
        charts.throughput_chart(charts.throughput_table(inputs.curves, MODEL, 512, 256, "offline", keys),
                                charts.profile_points(inputs.profiles_df, MODEL, 512, 256)),
        charts.head_to_head_chart(h2h),
        charts.frontier_chart(charts.frontier_table(inputs.curves, MODEL, 500, 250, keys), 50.0),
        charts.option_costs_chart(charts.option_costs_table(result.options, result.plan)),
        charts.breakeven_chart(charts.breakeven_table(result.options, "chat", [0, 1, 2]), 1.0, 1.5),
        charts.sensitivity_chart(sens),
        charts.hourly_gpus_chart(charts.hourly_gpus_table(HOURLY)),
        charts.waterfall_chart(charts.waterfall_bars(WATERFALL)),
    ]
    for chart in built:
        spec = chart.to_dict()
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
        encodings = str(spec)
        assert "tooltip" in encodings


# ---------------------------------------------------------------- engine config (tuned vs default settings)

@pytest.fixture(scope="module")
def tuned_result(tmp_path_factory):
    files = write_synthetic_inputs(tmp_path_factory.mktemp("tuned"))
    write_tuned_profile(files["profiles"])
    tuned_inputs = load_inputs(files["profiles"], files["prices"], files["ops"])
    routes = pd.DataFrame([online_route("chat", rate_rps=40, engines="vllm", gpus="h100")])
    return make_plan(routes, tuned_inputs, Assumptions())


def test_newest_versions_keeps_a_tuned_and_a_default_curve_apart():
    keys = [fakes.key(version="0.25.0"), fakes.key(version="0.26.0"), fakes.key(version="0.26.0", config="tuned")]
    assert set(charts.newest_versions(keys)) == set(keys[1:])


def test_the_recommended_tuned_option_is_flagged_and_named(tuned_result):
    costs = charts.option_costs_table(tuned_result.options, tuned_result.plan)
    assert set(costs.loc[costs["recommended"], "option"]) == {"vllm/0.26.0/h100/bf16/tp1/tuned"}
    assert "vllm/0.26.0/h100/bf16/tp1" in set(costs["option"])  # the default settings: a separate option
    assert charts.recommendation_table(tuned_result.plan)["engine"].iloc[0] == "vllm 0.26.0 [tuned]"


def h2h_profiles(*rows: dict) -> pd.DataFrame:
    shape = dict(gpu="h100", model=MODEL, precision="bf16", tp=1, mode="offline", input_len=128, output_len=128,
                 batch_size=512, date="2026-12-02", source="test")
    frame = pd.DataFrame([{**shape, **row} for row in rows]).astype(str).replace("nan", "")
    return validate_frame(frame, PROFILE, "test")


TRT_PUBLISHED = dict(engine="trtllm", engine_version="1.0.0", output_tok_per_s=9000, provenance="published")


def test_head_to_head_baseline_is_the_faster_config_and_says_so():
    profiles = h2h_profiles(TRT_PUBLISHED,
                            dict(engine="vllm", engine_version="0.26.0", output_tok_per_s=5000, provenance="measured"),
                            dict(engine="vllm", engine_version="0.26.0", config="tuned", output_tok_per_s=6000,
                                 provenance="measured"))
    base = charts.head_to_head_table({}, profiles).set_index("engine").loc["vllm"]
    assert (base["config"], base["tok_s_per_gpu"], base["ratio"]) == ("tuned", 6000, 1.5)


def test_head_to_head_predicted_baseline_compares_configs_not_overwrites():
    default = fakes.FakeCurve(fakes.key())
    tuned = fakes.FakeCurve(fakes.key(config="tuned"), t0=default.t0 / 2, a=default.a / 2)
    table = charts.head_to_head_table(fakes.fake_curves(default, tuned), h2h_profiles(TRT_PUBLISHED))
    base = table.set_index("engine").loc["vllm"]
    assert base["config"] == "tuned"
    assert base["tok_s_per_gpu"] == pytest.approx(tuned.saturated(128, 128).output_tok_per_s)


# ---------------------------------------------------------------- fleet: GPUs over the day, $ by lever

# A fleet's hourly_gpus (planner.planning.fleet): h100s all day, h200s only in hours 8-19.
HOURLY = pd.DataFrame([(h, "h100", 4) for h in range(24)] + [(h, "h200", 2) for h in range(8, 20)],
                      columns=["hour", "gpu", "gpus"])
# planner.planning.fleet.lever_waterfall's table: a saving, no change, a cost, a saving.
WATERFALL = pd.DataFrame({"step": ["route by route", "engineering once", "+ share", "+ mix", "+ pricing"],
                          "usd_per_month": [1000.0, 900.0, 900.0, 950.0, 700.0],
                          "change_usd_per_month": [np.nan, -100.0, 0.0, 50.0, -250.0]})


def test_hourly_gpus_has_every_hour_of_every_gpu_type_zero_where_none_runs():
    table = charts.hourly_gpus_table(HOURLY)
    assert len(table) == 24 * 2
    by_type = table.pivot(index="hour", columns="gpu", values="gpus")
    assert list(by_type.index) == list(range(24))
    assert (by_type["h100"] == 4).all()
    assert list(by_type["h200"]) == [0] * 8 + [2] * 12 + [0] * 4
    assert charts.hourly_gpus_table(HOURLY.iloc[:0]).empty


def test_waterfall_bars_run_from_each_total_to_the_next_and_end_on_the_fleet_total():
    bars = charts.waterfall_bars(WATERFALL)
    assert list(bars["step"]) == [*WATERFALL["step"], charts.FLEET_TOTAL_STEP]
    assert (bars["start"].iloc[0], bars["end"].iloc[0]) == (0.0, 1000.0)
    assert list(bars["start"].iloc[1:-1]) == list(WATERFALL["usd_per_month"].iloc[:-1])
    assert list(bars["end"].iloc[:-1]) == list(WATERFALL["usd_per_month"])
    assert (bars["start"].iloc[-1], bars["end"].iloc[-1]) == (0.0, 700.0)
    assert list(bars["kind"]) == ["total", "saving", "no change", "cost", "saving", "total"]
    assert list(bars["label"]) == ["$1,000", "-$100", "$0", "+$50", "-$250", "$700"]


# ---------------------------------------------------------------- issue 25: readable charts

def every_chart(inputs, result) -> list:
    keys = [k for k in inputs.curves if k.model == MODEL]
    h2h = charts.head_to_head_table(inputs.curves, inputs.profiles_df)
    sens = pd.DataFrame({"traffic_growth": [1.0, 2.0], "gpu_price_factor": [1.0, 1.0],
                         "total_usd_per_month": [1.0, 2.0], "gpus": [1.0, 2.0], "infeasible": [0.0, 0.0]})
    chat = load_routes(REPO_ROUTES).set_index("name").loc["chat"]
    pareto = charts.pareto_table(inputs.curves, result.options, "chat", MODEL, chat["input_len_mean"], chat["output_len_mean"])
    return [
        charts.throughput_chart(charts.throughput_table(inputs.curves, MODEL, 512, 256, "offline", keys),
                                charts.profile_points(inputs.profiles_df, MODEL, 512, 256)),
        charts.head_to_head_chart(h2h),
        charts.frontier_chart(charts.frontier_table(inputs.curves, MODEL, 500, 250, keys), 50.0),
        charts.pareto_chart(pareto, charts.operating_points(result.options, result.plan, "chat"), 50.0),
        charts.option_costs_chart(charts.option_costs_table(result.options, result.plan)),
        charts.breakeven_chart(charts.breakeven_table(result.options, "chat", [0, 1, 2]), 1.0, 1.5),
        charts.sensitivity_chart(sens),
        charts.hourly_gpus_chart(charts.hourly_gpus_table(HOURLY)),
        charts.waterfall_chart(charts.waterfall_bars(WATERFALL)),
    ]


def encodings(spec: dict):
    """Every (channel, encoding) of every layer of a spec (facets and layers walked)."""
    for layer in [spec, *spec.get("layer", []), spec.get("spec", {}), *spec.get("spec", {}).get("layer", [])]:
        for channel, enc in layer.get("encoding", {}).items():
            if isinstance(enc, dict):
                yield channel, enc


def test_every_line_legend_has_solid_swatches(inputs, result):
    """A legend swatch took the opacity of its marks (a 12% band): pale, unreadable colours."""
    for chart in every_chart(inputs, result):
        spec = chart.to_dict()
        legended = [(c, e) for c, e in encodings(spec) if c in ("color", "strokeDash", "strokeWidth") and "field" in e]
        assert legended, spec.get("title")
        for channel, enc in legended:
            assert enc.get("legend", {}).get("symbolOpacity") == 1.0, (channel, enc["field"], enc.get("legend"))


def test_an_engine_keeps_one_hue_across_charts(inputs, result):
    chat = load_routes(REPO_ROUTES).set_index("name").loc["chat"]
    throughput = charts.throughput_table(inputs.curves, MODEL, 512, 256, "offline")
    pareto = charts.pareto_table(inputs.curves, result.options, "chat", MODEL, chat["input_len_mean"], chat["output_len_mean"])
    points = charts.operating_points(result.options, result.plan, "chat")
    for chart, frame, field in ((charts.throughput_chart(throughput, throughput.iloc[:0].assign(source="")), throughput,
                                 "series"), (charts.pareto_chart(pareto, points), pareto, "option")):
        colour = next(e for c, e in encodings(chart.to_dict()) if c == "color" and e.get("field") == field)
        scale = dict(zip(colour["scale"]["domain"], colour["scale"]["range"], strict=True))
        engines = dict(zip(frame[field], frame["engine"], strict=True))
        assert set(engines) <= set(scale) and len(set(engines.values())) > 1, field
        for line, engine in engines.items():
            assert scale[line] in charts.ENGINE_SHADES[engine], (line, engine, scale[line])
    for engine, shades in charts.ENGINE_SHADES.items():  # the engine-coloured charts use the same hue
        assert charts.ENGINE_COLOURS[engine] == shades[0]


def test_the_chosen_pareto_point_is_labelled_and_its_place_explained(inputs, result):
    chat = load_routes(REPO_ROUTES).set_index("name").loc["chat"]
    table = charts.pareto_table(inputs.curves, result.options, "chat", MODEL, chat["input_len_mean"], chat["output_len_mean"])
    points = charts.operating_points(result.options, result.plan, "chat")
    chosen = points.loc[points["recommended"], "option"].iloc[0]
    spec = charts.pareto_chart(table, points, 50.0).to_dict()
    texts = [layer for layer in spec["layer"] if layer["mark"].get("type") == "text"
             and layer["encoding"].get("text", {}).get("field") == "label"]
    labels = [row["label"] for layer in texts for row in spec["datasets"][layer["data"]["name"]]]
    assert f"chosen: {chosen}" in labels
    note = charts.pareto_note(table, points)
    assert note.startswith(f"The chosen point ({chosen},") and "SLO percentile at its peak load" in note
    # A chosen point on the frontier needs no note.
    top = points.assign(tok_s_per_gpu=np.where(points["recommended"], table["tok_s_per_gpu"].max() + 1, 0.0),
                        tok_s_per_user=np.where(points["recommended"], table["tok_s_per_user"].max(), 0.0))
    assert charts.pareto_note(table, top) == ""


def test_route_names_in_chart_labels_have_control_characters_escaped(result):
    options = result.options.assign(route=result.options["route"].replace({"chat": "chat\x1b[2J\x00"}))
    plan = result.plan.assign(route=result.plan["route"].replace({"chat": "chat\x1b[2J\x00"}))
    table = charts.option_costs_table(options, plan)
    assert "chat\\x1b[2J\\x00" in set(table["route"])
    spec = str(charts.option_costs_chart(table).to_dict())
    assert "\x1b" not in spec and "\x00" not in spec


def test_the_compact_layout_puts_legends_below_and_narrows_facets(result):
    chart = charts.option_costs_chart(charts.option_costs_table(result.options, result.plan), width=150, compact=True)
    spec = charts.fit(chart, compact=True).to_dict()
    assert spec["config"]["legend"]["orient"] == "bottom" and spec["spec"]["width"] == 150
    assert spec["facet"]["row"]["header"]["labelOrient"] == "top"  # route names above the panels, not beside
    assert "config" not in charts.fit(chart, compact=False).to_dict() or \
        "legend" not in charts.fit(chart, compact=False).to_dict()["config"]


def test_a_cheaper_option_passed_over_is_marked_with_its_reason_in_the_cost_chart_and_the_pareto_note(inputs):
    """Issue 35, item 5: a feasible option cheaper than the recommendation says why it was passed over, in the
    cost chart's table (dashed outline, tooltip) and in the Pareto note when it is the option above the choice.
    The example's chat on TensorRT-LLM alone: 1.0's FP8 on the H100 (published throughput, no latency) is cheaper
    than 0.14's bf16 (latency measured), which the plan recommends."""
    routes = load_routes(REPO_ROUTES)
    routes.loc[routes["name"] == "chat", "engines"] = "trtllm"
    result = make_plan(routes, inputs, Assumptions())
    passed = charts.passed_over(result.options, result.plan)
    chosen = {r["route"]: float(r["total_usd_per_month"]) for r in result.plan.to_dict("records") if r["status"] == "ok"}
    feasible = result.options[result.options["feasible"].astype(bool)]
    for r in feasible.to_dict("records"):
        cheaper = r["route"] in chosen and r["total_usd_per_month"] < chosen[r["route"]]
        assert ((r["route"], r["option"]) in passed) == cheaper, r["option"]
        if cheaper and r["latency_basis"] == "unverified":
            assert passed[(r["route"], r["option"])] == charts.UNVERIFIED_REASON
    assert passed, "the example has cheaper options ranked behind for unverified latency"
    table = charts.option_costs_table(result.options, result.plan)
    marked = table[table["passed_over"] != ""]
    assert not marked.empty and not marked["recommended"].any()
    spec = json.dumps(charts.option_costs_chart(table).to_dict())
    assert "passed_over" in spec and "strokeDash" in spec
    (route, option), why = next(iter(passed.items()))
    row = load_routes(REPO_ROUTES).set_index("name").loc[route]
    curves = charts.pareto_table(inputs.curves, result.options, route, row["model"], row["input_len_mean"], row["output_len_mean"])
    points = charts.operating_points(result.options, result.plan, route)
    above = points.assign(tok_s_per_gpu=np.where(points["recommended"], 0.0, points["tok_s_per_gpu"]))
    best = curves.assign(tok_s_per_gpu=np.where(curves["option"] == option, 1e9, curves["tok_s_per_gpu"]))
    note = charts.pareto_note(best, above, {option: why})
    assert note.endswith(f"It was {why}.") and option in note
