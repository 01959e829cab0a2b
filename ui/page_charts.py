"""The app's chart tabs: cost by option, break-even, sensitivity, throughput curves, head to head, latency frontier,
Pareto, fleet, request lengths, prefix reuse.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st

from planner.planning.exports import markdown_text, printable
from planner.planning.plan import PlanResult
from ui import charts, lengths, prefix_view, scenario
from ui.page_answer import minute_by_minute
from ui.page_base import (
    COMPACT_FACET_WIDTH,
    bundled_inputs,
    frontier_data,
    head_to_head_data,
    legend_columns,
    picked,
    sensitivity,
    show_chart,
    throughput_data,
)
from ui.page_fleet import fleet_view


def charts_section(result: PlanResult, routes: pd.DataFrame, prices: pd.DataFrame, ops: pd.DataFrame,
                   settings: scenario.Settings) -> None:
    st.subheader("Why this plan")
    sections = {
        "Cost by option": lambda: cost_by_option(result),
        "Minute by minute": lambda: minute_by_minute(result, routes),
        "Break-even": lambda: breakeven(result, routes),
        "Sensitivity": lambda: sensitivity_chart(routes, prices, ops, settings),
        "Throughput curves": lambda: throughput_curves(result, routes),
        "Engine head-to-head": head_to_head,
        "Latency vs throughput": lambda: latency_frontier(result, routes),
        "Pareto per route": lambda: pareto(result, routes),
        "Fleet": lambda: fleet_view(routes, prices, ops, settings),
        "Request lengths": lambda: request_lengths(result, routes),
        "Prefix reuse": lambda: prefix_reuse(result, routes),
    }
    # Only the open tab runs (a re-plan stays fast); switching tabs reruns the page.
    for tab, draw in zip(st.tabs(list(sections), key="chart_tab", on_change="rerun"), sections.values(), strict=True):
        if tab.open:
            with tab:
                draw()


def cost_by_option(result: PlanResult) -> None:
    st.caption(f"Monthly cost of the {charts.MAX_OPTIONS_PER_ROUTE} cheapest feasible options per route "
               "(solid: GPUs, light: engineering). The black outline is the recommendation; a dashed one, a cheaper "
               "option passed over (why: below, and in its tooltip).")
    table = charts.option_costs_table(result.options, result.plan)
    if table.empty:
        st.info("No feasible option on any route.")
        return
    compact = bool(st.session_state.compact)
    show_chart(charts.option_costs_chart(table, width=COMPACT_FACET_WIDTH if compact else 560, compact=compact))
    for (route, option), why in charts.passed_over(result.options, result.plan).items():
        st.markdown(f"- **{markdown_text(route)}**: {printable(option)} is cheaper than the recommendation "
                    f"(dashed outline) but was {markdown_text(why)}.")


def breakeven(result: PlanResult, routes: pd.DataFrame) -> None:
    route = st.selectbox("Route", list(result.plan["route"]), key="breakeven_route", format_func=printable)
    now = float(routes.set_index("name")["model_updates_per_month"].get(route, 0.0))
    crossing = charts.engine_breakeven(result.options, route)
    top = max(8.0, 2 * now, 1.5 * crossing if crossing else 0.0)
    table = charts.breakeven_table(result.options, route, list(np.linspace(0, top, 41)))
    if table["engine"].nunique() < 2:
        st.info(f"Only one engine is feasible for '{printable(route)}'; there is nothing to break even against.")
    st.caption("Monthly total vs model updates per month for the cheapest feasible option of each engine: "
               "GPU cost plus amortised adoption is the intercept, the cost of one update the slope. Where "
               "the lines cross is the decision.")
    show_chart(charts.breakeven_chart(table, now, crossing))


def sensitivity_chart(routes: pd.DataFrame, prices: pd.DataFrame, ops: pd.DataFrame, settings: scenario.Settings) -> None:
    st.caption("Fleet total re-planned for traffic growth and GPU price relative to the current scenario "
               "(the ringed point). Each point is a full re-plan: the engine and GPU may change along a line. "
               "Sized on one replica's share (no fleet simulation check, so the grid stays fast): the ringed point can differ "
               "from the checked plan above.")
    table = sensitivity(routes, prices, ops, settings)
    show_chart(charts.sensitivity_chart(table))


def curve_controls(result: PlanResult, routes: pd.DataFrame, key: str) -> tuple[str, tuple[str, ...], bool]:
    """Model and GPU pickers shared by the curve charts; defaults from the plan."""
    inputs = bundled_inputs()
    models = sorted({k.model for k in inputs.curves})
    planned = [m for m in routes["model"] if m in models]
    model = picked(st.selectbox, "Model", models, index=models.index(planned[0]) if planned else 0,
                   key=f"{key}_model")
    gpus_for_model = sorted({k.gpu for k in inputs.curves if k.model == model})
    chosen = [g for g in result.plan["gpu"].dropna().unique() if g in gpus_for_model] or gpus_for_model[:1]
    gpus = st.multiselect("GPUs", gpus_for_model, default=chosen, key=f"{key}_gpus_{model}")
    newest = st.toggle("Newest version of each engine only", value=True, key=f"{key}_newest",
                       help="Per engine settings (config): a tuned profile is kept beside the default one.")
    return model, tuple(gpus), newest


def throughput_curves(result: PlanResult, routes: pd.DataFrame) -> None:
    left, right = st.columns([2, 1])
    with left:
        model, gpus, newest = curve_controls(result, routes, "curves")
    with right:
        mode = picked(st.radio, "x axis", ["offline", "concurrency"], horizontal=True, key="curves_mode",
                      format_func=lambda m: "batch size" if m == "offline" else "concurrency")
    shapes = charts.available_shapes(bundled_inputs().profiles_df, model, mode) or \
        charts.available_shapes(bundled_inputs().profiles_df, model, "offline")
    if not shapes:
        st.info(f"No profile points for {model}.")
        return
    shape = picked(st.selectbox, "Input / output tokens", shapes, key=f"curves_shape_{model}_{mode}",
                   format_func=lambda s: f"{s[0]} in / {s[1]} out")
    fitted, points = throughput_data(model, shape[0], shape[1], mode, gpus, newest)
    st.caption("Lines: fitted iteration-time model (dashed where extrapolated) with its ~90% band. Points: "
               "circles measured by this project, squares published. Tokens/s are per GPU.")
    show_chart(charts.throughput_chart(fitted, points, mode, legend_columns=legend_columns(),
                                       compact=bool(st.session_state.compact)))


def head_to_head() -> None:
    table = head_to_head_data()
    if table.empty:
        st.info("No shape has both a published TensorRT-LLM point and a vLLM curve on the same GPU and model.")
        return
    stats = charts.head_to_head_summary(table)
    lo, hi = charts.CLAIMED_RATIO
    st.markdown(
        f"**TensorRT-LLM (published, newest version per shape) vs vLLM (measured here where the shape was run, "
        f"else predicted):** median **×{stats['median_ratio']:.2f}** tokens/s per GPU over {stats['shapes']:.0f} "
        f"shapes (range ×{stats['min_ratio']:.2f}–×{stats['max_ratio']:.2f}; vLLM measured on "
        f"{stats['baseline_measured']:.0f}). The common claim of ×{lo:.1f}–×{hi:.1f} holds on "
        f"{stats['in_claimed_band']:.0f}, is exceeded on {stats['above_claimed_band']:.0f} and not reached on "
        f"{stats['below_claimed_band']:.0f}.")
    pairs = sorted(table.groupby(["gpu", "model", "precision"]).groups, key=lambda g: (g[1], g[2] != "fp8", g[0]))
    pair = st.selectbox("Same GPU, model and precision", pairs, format_func=lambda p: " / ".join(p), key="h2h_pair")
    chosen = table[(table["gpu"] == pair[0]) & (table["model"] == pair[1]) & (table["precision"] == pair[2])]
    show_chart(charts.head_to_head_chart(chosen))
    st.caption("Faded bars are predicted or extrapolated, not measured. Published TensorRT-LLM figures are "
               "NVIDIA's offline max-throughput runs; vLLM's is the best batch measured at that shape.")
    with st.expander("Numbers and sources"):
        st.dataframe(chosen, hide_index=True, placeholder="")


def latency_frontier(result: PlanResult, routes: pd.DataFrame) -> None:
    route = st.selectbox("Shape of route", list(routes["name"]), key="frontier_route", format_func=printable)
    row = routes.set_index("name").loc[route]
    model, gpus, newest = curve_controls(result, routes.set_index("name").loc[[route]].reset_index(), "frontier")
    table = frontier_data(model, float(row["input_len_mean"]), float(row["output_len_mean"]), gpus, newest)
    if table.empty:
        st.info(f"No curve for {model} on the chosen GPUs.")
        return
    st.caption(f"Predicted mean TPOT vs tokens/s per GPU as concurrency rises, at {row['input_len_mean']:.0f} in / "
               f"{row['output_len_mean']:.0f} out. Thick: each engine's frontier; thin: each configuration. "
               "Dashed: a curve extrapolated or published, not measured. Curves fitted without latency "
               "measurements say so in the tooltip.")
    show_chart(charts.frontier_chart(table, float(row["tpot_slo_ms"]), compact=bool(st.session_state.compact)))


@st.cache_data(max_entries=64, show_spinner=False)
def pareto_data(options: pd.DataFrame, plan: pd.DataFrame, route: str, model: str, input_len: float,
                output_len: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    table = charts.pareto_table(bundled_inputs().curves, options, route, model, input_len, output_len)
    return table, charts.operating_points(options, plan, route)


def pareto(result: PlanResult, routes: pd.DataFrame) -> None:
    route = st.selectbox("Route", list(routes["name"]), key="pareto_route", format_func=printable)
    row = routes.set_index("name").loc[route]
    table, points = pareto_data(result.options, result.plan, route, str(row["model"]), float(row["input_len_mean"]),
                                float(row["output_len_mean"]))
    if table.empty:
        st.info(f"No feasible option for '{printable(route)}' to draw.")
        return
    slo = float(row["tpot_slo_ms"])
    slo_note = (f" The red line is the TPOT SLO as speed per user (a p{row['slo_percentile']:g} bound, the curves "
                "are means): an option runs at or right of it." if math.isfinite(slo) else " The route has no TPOT SLO.")
    st.caption(f"Throughput per GPU against speed per user for the {charts.MAX_OPTIONS_PER_ROUTE} cheapest feasible "
               f"options of '{printable(route)}', as concurrency rises, at {row['input_len_mean']:.0f} in / "
               f"{row['output_len_mean']:.0f} out: each point is a benchmark's clients at that concurrency, simulated "
               "request by request (mean TPOT; the tooltip gives the mean TTFT), as `predict --concurrency C "
               "--closed-loop rounds` gives it. The grey band is the Pareto frontier; "
               f"dots are where the plan runs each option, the ringed one is the choice; a dashed curve is "
               f"extrapolated or published, not measured.{slo_note}")
    show_chart(charts.pareto_chart(table, points, slo, legend_columns=legend_columns(),
                                   compact=bool(st.session_state.compact)))
    passed = {option: why for (r, option), why in charts.passed_over(result.options, result.plan).items() if r == route}
    note = charts.pareto_note(table, points, passed)
    if note:
        st.caption(note)


@st.cache_data(max_entries=16, show_spinner=False)
def route_lengths_data(route_row: dict, plan_row: dict | None) -> lengths.RouteLengths | None:
    return lengths.route_lengths(route_row, plan_row, bundled_inputs().curves)


def request_lengths(result: PlanResult, routes: pd.DataFrame) -> None:
    """A route's logged prompt and output lengths against the recommended curve's measured ones and the prompts
    no replica brings within its TTFT target (ui.lengths)."""
    logged = scenario.planning_logs(routes)
    logged = logged[logged["log"].fillna("").astype(str).str.len() > 0] if "log" in logged.columns else logged.iloc[:0]
    if logged.empty:
        st.info("No route has a request log: its lengths are the routes table's quantiles.")
        return
    route = str(st.selectbox("Route", list(logged["name"]), key="lengths_route", format_func=printable))
    plan = result.plan.set_index("route")
    plan_row = plan.loc[route].to_dict() if route in plan.index else None
    found = route_lengths_data(logged.set_index("name").loc[route].to_dict() | {"name": route}, plan_row)
    if found is None:
        st.info("This route has no request log.")
        return
    show_chart(lengths.lengths_chart(found))
    st.table(lengths.quantile_table(found))
    st.caption(" ".join(part for part in (
        "Orange: lengths beyond the longest the recommended curve's profiles measured (predicted by the physics "
        "prior); dashed rules: that length and the longest prompt an idle replica brings within the TTFT target.",
        lengths.idle_text(found)) if part))


@st.cache_data(max_entries=16, show_spinner="Simulating the route's fleet behind each router…")
def route_prefix_data(route_row: dict, plan_row: dict, replicas: int) -> prefix_view.PrefixView | None:
    return prefix_view.route_prefix(route_row, plan_row, bundled_inputs().curves, replicas)


@st.cache_data(max_entries=16, show_spinner="Sizing the route's fleet with a host KV tier…")
def route_tier_data(route_row: dict, plan_row: dict, gib: float, attainment: float) -> prefix_view.TierFleet | None:
    return prefix_view.tier_fleet(route_row, plan_row, bundled_inputs().curves, gib, attainment)


def prefix_reuse(result: PlanResult, routes: pd.DataFrame) -> None:
    """A planned online route's prefix reuse, the hit rate behind each router and what the planned router saves
    (ui.prefix_view); a route without prefix structure gets one line."""
    plan = result.plan[(result.plan["status"] == "ok") & (result.plan["traffic"] == "online")].set_index("route")
    if plan.empty:
        st.info("No online route is planned: there is no prefix cache to show.")
        return
    rows = scenario.planning_logs(routes).set_index("name") if "log" in routes.columns else routes.set_index("name")
    names = [str(n) for n in plan.index if n in rows.index]
    structured = [n for n in names if prefix_view.declares_prefixes(rows.loc[n])]
    route = str(st.selectbox("Route", names, index=names.index(structured[0]) if structured else 0,
                             key="prefix_route", format_func=printable))
    route_row = rows.loc[route].to_dict() | {"name": route}
    if not prefix_view.declares_prefixes(route_row):
        st.info(f"'{printable(route)}' has no prefix structure (no request log, no shared_prefix_tokens): every "
                "prompt is prefilled in full.")
        return
    plan_row = plan.loc[route].to_dict()
    planned = int(plan_row["replicas"])
    replicas = int(st.number_input("Replicas simulated", 1, max(planned, prefix_view.MAX_SIMULATED_REPLICAS), planned,
                                   key=f"prefix_replicas_{route}_{planned}",
                                   help=f"The plan runs {planned}; another count re-simulates the route's load behind "
                                        "each router (seconds)."))
    found = route_prefix_data(route_row, plan_row, replicas)
    if found is None:
        st.info(f"'{printable(route)}' has no prefix structure: its request log has neither `hash_ids` nor "
                "`session_id`, so every prompt is prefilled in full.")
        return
    st.markdown(prefix_view.reuse_text(found))
    table = prefix_view.hit_rate_table(found)
    compact = bool(st.session_state.compact)
    show_chart(prefix_view.hit_rate_chart(table, prefix_view.COMPACT_CHART_WIDTH if compact else prefix_view.CHART_WIDTH))
    st.caption(f"Grey: the load's own reuse. Blue: the share of prompt tokens found in the replicas' prefix caches "
               f"when {replicas} {'replica serves' if replicas == 1 else 'replicas serve'} the route's load behind each router (fleet simulation, as `predict "
               "--log ... --replicas N --router R`); outlined: the plan's router. Prefill saved = hit rate × the "
               "prompt tokens/s the load offers." + ("" if found.hit_rates else
                                                    " No fitted curve for the plan's option: no fleet simulated."))
    with st.expander("Numbers"):
        st.dataframe(table, hide_index=True, placeholder="", column_config={
            "hit_rate": st.column_config.NumberColumn("hit rate", format="percent"),
            "prefill_tok_per_s_saved": st.column_config.NumberColumn("prefill tok/s saved", format="%.0f")})
    st.markdown(prefix_view.router_text(found))
    st.markdown(prefix_view.memory_text(found))
    if found.plan_host_gib <= 0 and not math.isnan(found.plan_hit_rate):
        gib = float(st.number_input("What if: host KV tier, GiB per replica", 0.0, 4096.0, 0.0, step=16.0,
                                    key=f"prefix_tier_{route}",
                                    help="Size the plan's option with this much host memory per replica holding "
                                         "a copy of the prefix blocks the GPU caches (vLLM's CPU KV offloading): an "
                                         "assumption, not measured. The plan prices one with `plan --host-kv-gib`."))
        if gib > 0:
            fleet = route_tier_data(route_row, plan_row, gib, result.assumptions.slo_attainment)
            if fleet is not None:
                st.markdown(prefix_view.tier_text(found, fleet))
