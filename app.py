"""Fleetplan what-if app: `streamlit run app.py`.

Routes, prices and engine update costs in; recommended engine, GPU and fleet
per route out, with charts and a CSV export.  This file only arranges widgets:
every number comes from `planner` (plan, scenario, charts), called through
small cached functions with every input passed as an argument.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import urlencode

import numpy as np
import pandas as pd
import streamlit as st

from fleetfacts.errors import FleetplanError, InputError
from fleetfacts.schema import DEFAULT_CONFIG, ENGINE_OPS, PRICES, ROUTES
from planner.engine.curves import GroupKey
from planner.planning.catalog import Catalog, load_inputs
from planner.planning.exports import baseline_diff, markdown_text, printable, workbook_bytes
from planner.planning.fleet import FleetResult, Levers, fleet_csv_text, lever_steps
from planner.planning.fleet_size import check_fleet_size
from planner.planning.plan import PlanResult, fleet_tradeoff, plan_coverage
from planner.planning.route_table import load_routes, validate_routes
from planner.sizing.assumptions import Assumptions
from planner.sizing.plan_row import plan_rows
from ui import answer, charts, scenario, tables

log = logging.getLogger("fleetplan.app")

EXAMPLE_ROUTES = Path(__file__).resolve().parent / "examples" / "routes.csv"
ASSUMED = Assumptions()
CHEAPEST = ""  # provider choice meaning "the cheapest provider listed for each GPU"
# Routes editor: the columns a capacity review changes; the rest behind "all columns".
EDITOR_COLUMNS = ("name", "model", "traffic", "rate_rps", "peak_to_mean", "num_requests", "deadline_hours",
                  "input_len_mean", "output_len_mean", "slo_percentile", "ttft_slo_ms", "tpot_slo_ms", "e2e_slo_ms",
                  "model_updates_per_month", "engines", "gpus", "precisions", "configs")
GROWTH_RANGE = (0.1, 10.0)
PRICE_RANGE = (0.25, 4.0)
PROVENANCE_NOTE = ("**measured**: run by this project (command recorded) · **published**: vendor or project "
                   "documents (URL and date) · **predicted**: fitted curve inside the measured range, with an "
                   "interval · **extrapolated**: outside it, wider interval — treat with care")


T = TypeVar("T")


def picked(widget: Callable[..., object], label: str, options: Sequence[T], **kwargs: Any) -> T:
    """`widget(label, options, **kwargs)` (st.selectbox, st.radio) typed as what it returns: one of `options`.

    Streamlit types these widgets with an overload for empty options (`Sequence[Never]` -> None); under
    python_version 3.10 typing has no Never, so mypy picks that overload for every call. Pass non-empty options.
    """
    return cast(T, widget(label, options, **kwargs))


# ---------------------------------------------------------------- cached computations

@st.cache_resource(show_spinner="Starting: fitting the bundled performance profiles (a few seconds, once per "
                                "server)…", show_time=True)
def bundled_inputs() -> Catalog:
    """Fitted curves and bundled price / engine-ops tables (loaded once per process)."""
    return load_inputs()


@st.cache_data(show_spinner=False)
def bundled_routes() -> pd.DataFrame:
    return scenario.resolve_logs(load_routes(EXAMPLE_ROUTES), EXAMPLE_ROUTES.parent, "examples/routes.csv")


@st.cache_data(max_entries=256, show_spinner=False)
def replan(routes: pd.DataFrame, prices: pd.DataFrame, ops: pd.DataFrame,
           settings: scenario.Settings, checked: bool) -> tuple[PlanResult, float]:
    """The plan of the scenario: screened on one replica's share (milliseconds) or with the simulation check, as the CLI
    plans (seconds; cached, so each input combination is checked once per process)."""
    return scenario.timed_plan(routes, bundled_inputs(), settings, None, prices, ops, checked)


@st.cache_data(max_entries=32, show_spinner=False)
def optimised_fleet(routes: pd.DataFrame, prices: pd.DataFrame, ops: pd.DataFrame, settings: scenario.Settings,
                    levers: Levers) -> tuple[FleetResult, pd.DataFrame]:
    """The fleet `python -m planner fleet` makes with `levers` (simulation check included) and its $ by lever,
    on the scenario's checked plan (cached: each input combination is optimised once per process)."""
    baseline, _ = replan(routes, prices, ops, settings, True)
    return scenario.fleet_scenario(routes, bundled_inputs(), settings, levers, baseline, prices=prices, ops=ops)


@st.cache_data(max_entries=64, show_spinner="Re-planning the sensitivity grid…")
def sensitivity(routes: pd.DataFrame, prices: pd.DataFrame, ops: pd.DataFrame, settings: scenario.Settings) -> pd.DataFrame:
    return scenario.sensitivity_table(routes, bundled_inputs(), settings, None, prices, ops)


@st.cache_data(max_entries=64, show_spinner=False)
def throughput_data(model: str, input_len: int, output_len: int, mode: str, gpus: tuple[str, ...],
                    newest: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    inputs = bundled_inputs()
    keys = curve_keys(inputs, model, gpus, newest)
    points = charts.profile_points(inputs.profiles_df, model, input_len, output_len, mode)
    points = points[points["series"].isin({k.label() for k in keys})]
    return charts.throughput_table(inputs.curves, model, input_len, output_len, mode, keys), points


def curve_keys(inputs: Catalog, model: str, gpus: tuple[str, ...], newest: bool) -> list[GroupKey]:
    keys = [k for k in inputs.curves if k.model == model and (not gpus or k.gpu in gpus)]
    return charts.newest_versions(keys) if newest else keys


@st.cache_data(show_spinner=False)
def head_to_head_data() -> pd.DataFrame:
    inputs = bundled_inputs()
    return charts.head_to_head_table(inputs.curves, inputs.profiles_df)


@st.cache_data(max_entries=64, show_spinner=False)
def frontier_data(model: str, input_len: float, output_len: float, gpus: tuple[str, ...],
                  newest: bool) -> pd.DataFrame:
    inputs = bundled_inputs()
    keys = curve_keys(inputs, model, gpus, newest)
    return charts.frontier_table(inputs.curves, model, input_len, output_len, keys)


# ---------------------------------------------------------------- state

def init_state(inputs: Catalog) -> None:
    """First run of a session: bundled tables, and settings from the link's query string."""
    ss = st.session_state
    if ss.get("initialised"):
        return
    ss.initialised = True
    ss.routes_base = ss.good_routes = bundled_routes()
    ss.prices_base = ss.good_prices = inputs.prices_df
    ss.ops_base = ss.good_ops = inputs.ops_df
    ss.saved = {}
    ss.scenario_name = "current"
    settings, warnings = scenario.settings_from_query(st.query_params.to_dict())
    ss.link_warnings = warnings + put_settings(settings, inputs, "link")
    ss.compact = st.query_params.get("layout") == "phone"


def put_settings(settings: scenario.Settings, inputs: Catalog, where: str) -> list[str]:
    """Set the sidebar widgets' values (before they are drawn) from `settings`; returns a warning
    per allow-list value that no profile has (it is dropped, never silently)."""
    ss = st.session_state
    options = allowed_options(inputs)
    settings, warnings = scenario.drop_unknown(settings, options, where)
    ss.provider = settings.provider if settings.provider in providers(ss.good_prices) else CHEAPEST
    ss.pricing_type = settings.pricing_type
    ss.engineer_usd_per_hour = float(settings.engineer_usd_per_hour if settings.engineer_usd_per_hour is not None
                                     else ASSUMED.engineer_usd_per_hour)
    ss.traffic_growth = float(np.clip(settings.traffic_growth, *GROWTH_RANGE))
    ss.gpu_price_factor = float(np.clip(settings.gpu_price_factor, *PRICE_RANGE))
    for name in scenario.ALLOW_SETTINGS:
        ss[name] = list(getattr(settings, name))
    for name in scenario.BOOL_SETTINGS:
        ss[name] = bool(getattr(settings, name))
    return warnings


def current_settings() -> scenario.Settings:
    ss = st.session_state
    rate = None if ss.engineer_usd_per_hour == ASSUMED.engineer_usd_per_hour else float(ss.engineer_usd_per_hour)
    return scenario.Settings(provider=ss.provider, pricing_type=ss.pricing_type, engineer_usd_per_hour=rate,
                             engines=tuple(ss.engines), gpus=tuple(ss.gpus), precisions=tuple(ss.precisions),
                             configs=tuple(ss.configs),
                             traffic_growth=float(ss.traffic_growth), gpu_price_factor=float(ss.gpu_price_factor),
                             allow_prerelease=bool(ss.allow_prerelease),
                             allow_unverified_latency=bool(ss.allow_unverified_latency))


def providers(prices: pd.DataFrame) -> list[str]:
    return sorted(prices["provider"].unique())


def pricing_types(prices: pd.DataFrame, provider: str) -> list[str]:
    """The pricing types with at least one price row for `provider` (CHEAPEST: any provider), in the
    schema's order; never empty (on-demand when the table has no rows at all)."""
    rows = prices if provider == CHEAPEST else prices[prices["provider"] == provider]
    listed = set(rows["pricing_type"])
    return [t for t in scenario.PRICING_TYPES if t in listed] or [scenario.PRICING_TYPES[0]]


def allowed_options(inputs: Catalog) -> dict[str, list[str]]:
    keys = list(inputs.curves)
    return {"engines": sorted({k.engine for k in keys}), "gpus": sorted({k.gpu for k in keys}),
            "precisions": sorted({k.precision for k in keys}),
            "configs": sorted({k.config or DEFAULT_CONFIG for k in keys})}


def set_base(name: str, frame: pd.DataFrame) -> None:
    """Replace an editable table's contents (its pending edits are dropped)."""
    st.session_state[f"{name}_base"] = frame
    st.session_state.pop(f"{name}_editor", None)


def new_upload(key: str):
    """The uploaded file of widget `key` if it was not handled yet, else None."""
    upload = st.session_state.get(key)
    if upload is None or st.session_state.get(f"{key}_seen") == upload.file_id:
        return None
    st.session_state[f"{key}_seen"] = upload.file_id
    return upload


# ---------------------------------------------------------------- sidebar

def sidebar(inputs: Catalog) -> bool:
    """Scenario, prices and allow-list controls; returns whether "save for comparison" was pressed."""
    with st.sidebar:
        what_if, prices, allowed, scenario_box = (st.container() for _ in range(4))
    with scenario_box:  # drawn last, run first: loading a scenario sets the other widgets
        st.header("Scenario")
        scenario_loader(inputs)
        st.text_input("Scenario name", key="scenario_name")
        save = st.button("Save scenario for comparison", key="save_scenario", width="stretch")
    with what_if:
        st.toggle("Compact layout (phone)", key="compact",
                  help="One card per route instead of wide tables, legends below the charts. On by default with "
                       "`?layout=phone` in the address.")
        st.header("What if")
        st.slider("Traffic growth (× every route's load)", *GROWTH_RANGE, step=0.05, key="traffic_growth",
                  format="%.2f×")
        st.slider("GPU price (× every listed price)", *PRICE_RANGE, step=0.05, key="gpu_price_factor",
                  format="%.2f×")
    with prices:
        price_controls()
    with allowed:
        allow_controls(inputs)
    return save


def scenario_loader(inputs: Catalog) -> None:
    st.file_uploader("Load a scenario file", type=["json"], key="scenario_upload",
                     help="A file saved with 'Download scenario' below the plan.")
    upload = new_upload("scenario_upload")
    if upload is None:
        return
    try:
        loaded = scenario.scenario_from_json(upload.getvalue(), upload.name)
    except InputError as err:
        st.error(f"{err}. The current scenario is unchanged.")
        return
    set_base("routes", loaded.routes)
    set_base("prices", inputs.prices_df if loaded.prices is None else loaded.prices)
    set_base("ops", inputs.ops_df if loaded.ops is None else loaded.ops)
    dropped = put_settings(loaded.settings, inputs, upload.name)
    st.session_state.scenario_name = loaded.name
    st.success(f"Loaded scenario '{loaded.name}' ({len(loaded.routes)} routes).")
    for warning in dropped:
        st.warning(warning)


def price_controls() -> None:
    st.header("Prices")
    prices = st.session_state.good_prices
    if st.session_state.get("provider") not in [CHEAPEST, *providers(prices)]:
        st.session_state.provider = CHEAPEST
    st.selectbox("Provider", [CHEAPEST, *providers(prices)], key="provider",
                 format_func=lambda p: p or "cheapest listed per GPU")
    types = pricing_types(prices, st.session_state.provider)
    if st.session_state.get("pricing_type") not in types:
        st.session_state.pricing_type = types[0]
    st.selectbox("Pricing type", types, key="pricing_type",
                 help="Only the pricing types the prices table lists for this provider.")
    st.number_input("Engineer $/hour", min_value=0.0, max_value=10_000.0, step=10.0, key="engineer_usd_per_hour",
                    help=f"Loaded engineering rate for model updates and engine adoption. Default "
                         f"{ASSUMED.engineer_usd_per_hour:g} is an assumption: set your own.")


def allow_controls(inputs: Catalog) -> None:
    st.header("Allowed (empty = all)")
    options = allowed_options(inputs)
    st.multiselect("Engines", options["engines"], key="engines")
    st.multiselect("GPUs", options["gpus"], key="gpus")
    st.multiselect("Precisions", options["precisions"], key="precisions")
    st.multiselect("Engine settings", options["configs"], key="configs",
                   help="A profile's config: `default` (the engine's own settings) or a named set such as "
                        "`tuned`, whose settings its env.json records. A plan on `tuned` assumes you deploy them.")
    st.toggle("Allow pre-release engine builds", key="allow_prerelease",
              help="Development and pre-release builds (e.g. TensorRT-LLM 0.20+main) are not recommended unless "
                   "allowed, as `python -m planner plan --allow-prerelease`.")
    st.toggle("Allow unverified latency", key="allow_unverified_latency",
              help="Online routes: options with no latency measurement behind them (measured or transferred) rank "
                   "behind those with one, since their TTFT is the engine model's alone and optimistic. On: ranked by "
                   "cost alone, as `python -m planner plan --allow-unverified-latency`.")


# ---------------------------------------------------------------- inputs

def routes_section(inputs: Catalog) -> pd.DataFrame:
    """Routes: edit in place, import a CSV or derive one from a request log; returns the valid table."""
    st.subheader("Routes")
    edit, import_csv, from_log = st.tabs(["Edit routes", "Import routes CSV", "From a request log"])
    with import_csv:
        routes_importer()
    with from_log:
        request_log_importer(inputs)
    with edit:
        st.caption("Each row is one route. Change a rate, an SLO (ms, at `slo_percentile`) or the model updates "
                   "per month and the plan below re-computes. Allow-lists are ';'-separated (empty = all).")
        show_all = st.toggle("Show all columns", key="routes_all_columns")
        edited = st.data_editor(st.session_state.routes_base, key="routes_editor", num_rows="dynamic", placeholder="",
                                hide_index=True, column_config=routes_column_config(),
                                column_order=None if show_all else EDITOR_COLUMNS)
        edits = scenario.edits_by_route(st.session_state.routes_base, edited)
        if edits:
            st.caption("Edited here: " + "; ".join(f"{printable(r)} ({printable(c)})" for r, c in edits.items())
                       + ". Their notes describe the rows before the edit (marked so in the plan's files).")
        edited = scenario.with_stale_notes_marked(st.session_state.routes_base, edited, edits)
    routes = checked("routes", lambda: scenario.check_routes(edited, "routes table"))
    for warning in scenario.ignored_fields(routes):
        st.warning(warning)
    return routes


def routes_column_config() -> dict:
    """The routes editor's columns, typed by the schema; the route's name pinned, so it stays in view while a
    row's other cells are edited (on a phone the grid scrolls sideways)."""
    config = {}
    for col in ROUTES.columns:
        if col.kind == "enum":
            config[col.name] = st.column_config.SelectboxColumn(col.name, options=list(col.choices), help=col.doc)
        elif col.kind in ("int", "float"):
            config[col.name] = st.column_config.NumberColumn(col.name, help=col.doc)
        else:
            config[col.name] = st.column_config.TextColumn(col.name, help=col.doc, pinned=col.name == "name")
    return config


def checked(name: str, check) -> pd.DataFrame:
    """Run `check`; on InputError show what to fix and keep the last good table."""
    try:
        good = check()
    except InputError as err:
        st.error(f"{err}. The plan shows the last valid {name} table until this is fixed.")
        return st.session_state[f"good_{name}"]
    st.session_state[f"good_{name}"] = good
    return good


def routes_importer() -> None:
    st.file_uploader("Routes CSV (the format of examples/routes.csv)", type=["csv"], key="routes_upload")
    upload = new_upload("routes_upload")
    if upload is None:
        show_message("routes_upload")
        return
    try:
        frame = scenario.check_routes_count(
            validate_routes(scenario.read_csv_upload(upload.getvalue(), ROUTES, upload.name), upload.name),
            upload.name)
        frame = scenario.resolve_logs(frame, EXAMPLE_ROUTES.parent, upload.name, uploaded_logs())
    except InputError as err:
        remember_message("routes_upload", "error", f"{err}. The routes table is unchanged.")
    else:
        set_base("routes", frame)
        remember_message("routes_upload", "success", f"Imported {len(frame)} routes from {upload.name}.")
    show_message("routes_upload")


def remember_message(key: str, kind: str, text: str, warnings: Sequence[str] = ()) -> None:
    st.session_state[f"{key}_message"] = (kind, text, tuple(warnings))


def show_message(key: str) -> None:
    kind, text, warnings = st.session_state.get(f"{key}_message", (None, "", ()))
    if kind == "error":
        st.error(text)
    elif kind == "success":
        st.success(text)
    for warning in warnings:
        st.warning(warning)


def uploaded_logs() -> dict[str, Path]:
    """This session's uploaded request logs: file name -> where it is kept (the latest upload of each name)."""
    return st.session_state.setdefault("uploaded_logs", {})


def keep_uploaded_log(upload) -> Path:
    """Keeps an uploaded request log for the session (its routes replay it; a routes file names it), in a folder
    of this session's own."""
    folder = st.session_state.setdefault("log_folder", tempfile.mkdtemp(prefix="fleetplan-logs-"))
    path = scenario.save_uploaded_log(upload.getvalue(), upload.name, Path(folder))
    uploaded_logs()[path.name] = path
    return path


def request_log_importer(inputs: Catalog) -> None:
    st.caption("A request log becomes one route per `route` in it: mean rate, burstiness (arrival CV), burst "
               "descriptors and length percentiles are measured from the log, and the plan replays its own "
               "timestamps (peak_to_mean 1 for a log shorter than a day). Formats: the Azure LLM trace "
               "(TIMESTAMP, ContextTokens, GeneratedTokens) or a gateway export (timestamp, route, "
               "prompt_tokens, completion_tokens) as CSV or JSON Lines. The log names no SLOs: set them here.")
    st.file_uploader("Request log", type=["csv", "jsonl", "json"], key="log_upload",
                     help="Kept for this session: a routes CSV imported afterwards whose `log` column names this file "
                          "replays it.")
    fresh = new_upload("log_upload")
    if fresh is not None:
        try:
            keep_uploaded_log(fresh)
        except InputError as err:
            remember_message("log_upload", "error", f"{err}. The routes table is unchanged.")
    models = sorted({k.model for k in inputs.curves})
    cols = st.columns(4)
    model = cols[0].selectbox("Model it serves", models, key="log_model",
                              index=models.index("llama-3.1-8b") if "llama-3.1-8b" in models else 0)
    ttft = cols[1].number_input("TTFT SLO, ms", min_value=1.0, value=1000.0, step=50.0, key="log_ttft")
    tpot = cols[2].number_input("TPOT SLO, ms", min_value=1.0, value=50.0, step=5.0, key="log_tpot")
    pct = cols[3].selectbox("SLO percentile", [95.0, 99.0], key="log_pct")
    upload = st.session_state.get("log_upload")
    if st.button("Add the log's routes", key="log_add", disabled=upload is None) and upload is not None:
        try:
            saved = keep_uploaded_log(upload)
            derived, lines = scenario.routes_from_log_upload(saved, model, ttft_slo_ms=ttft, tpot_slo_ms=tpot,
                                                             slo_percentile=pct)
            merged = scenario.check_routes_count(scenario.merge_routes(st.session_state.good_routes, derived),
                                                 upload.name)
        except InputError as err:
            remember_message("log_upload", "error", f"{err}. The routes table is unchanged.")
        else:
            set_base("routes", merged)
            remember_message("log_upload", "success", "Added: " + " · ".join(lines))
    show_message("log_upload")


def costs_section() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Prices and per-engine-version update costs: edit or upload; returns the valid tables."""
    with st.expander("Prices and engine update costs (edit or upload)"):
        prices_tab, ops_tab = st.tabs(["GPU prices", "Engine update costs"])
        with prices_tab:
            prices = table_editor("prices", PRICES, "GPU prices: one row per GPU, provider and pricing type.")
        with ops_tab:
            ops = table_editor("ops", ENGINE_OPS, "What one model update costs per engine version: engineer hours "
                                                  "(× the engineer rate) and build GPU-hours (× the GPU price).")
    return prices, ops


def table_editor(name: str, schema, caption: str) -> pd.DataFrame:
    st.caption(caption)
    st.file_uploader(f"Replace with a {schema.name} CSV", type=["csv"], key=f"{name}_upload")
    upload = new_upload(f"{name}_upload")
    if upload is not None:
        try:
            set_base(name, scenario.read_csv_upload(upload.getvalue(), schema, upload.name))
            remember_message(f"{name}_upload", "success", f"Loaded {upload.name}.")
        except InputError as err:
            remember_message(f"{name}_upload", "error", f"{err}. The {schema.name} table is unchanged.")
    show_message(f"{name}_upload")
    edited = st.data_editor(st.session_state[f"{name}_base"], key=f"{name}_editor", num_rows="dynamic", placeholder="",
                            hide_index=True, height=260)
    return checked(name, lambda: scenario.validate_table(edited, schema, f"{schema.name} table"))


# ---------------------------------------------------------------- plan

@dataclass(frozen=True)
class Shown:
    """The plan on the page: how long it took (NaN: an earlier plan kept after an error) and, when the
    simulation check did not confirm it, why not ('' = checked by simulation, as `python -m planner plan`)."""

    result: PlanResult
    seconds: float
    unchecked: str = ""


SCREEN_ONLY = "sized on one replica's share only: the fleet simulation check has not run on these inputs"


def plan(routes: pd.DataFrame, prices: pd.DataFrame, ops: pd.DataFrame,
         settings: scenario.Settings, checked: bool = True) -> Shown | None:
    """Re-plan (cached); on a planning error show it and keep the last good plan, labelled for what it is."""
    try:
        result, seconds = replan(routes, prices, ops, settings, checked)
    except InputError as err:
        return failed_plan(str(err), checked)
    except Exception as err:  # the UI edge: a planner bug must not show a traceback in the room
        log.exception("planning failed")
        return failed_plan(f"Planning failed ({type(err).__name__}: {err})", checked)
    shown = Shown(result, seconds, "" if checked else SCREEN_ONLY)
    st.session_state.good_result = shown
    return shown


def failed_plan(message: str, checked: bool) -> Shown | None:
    """The last plan that worked after `message` (an error) is shown; a failed simulation check labels it."""
    good = st.session_state.get("good_result")
    st.error(f"{message}. Showing the last plan that worked" + (
        " (screened only, NOT checked by simulation)." if good is not None and good.unchecked else "."))
    if good is None:
        return None
    reason = f"the simulation check failed: {message}" if checked and good.unchecked else good.unchecked
    return dataclasses.replace(good, seconds=math.nan, unchecked=reason)


def checked_plan(routes: pd.DataFrame, prices: pd.DataFrame, ops: pd.DataFrame, settings: scenario.Settings,
                 head) -> Shown | None:
    """The plan the CLI makes (simulation check included).  A combination of inputs not checked yet
    first shows the screened plan, labelled unchecked, while the check runs; then the checked one."""
    ss = st.session_state
    key = input_key(routes, prices, ops, settings)
    if key not in ss.setdefault("checked_keys", set()):
        pending = head.empty()
        with pending.container(), st.spinner(f"Planning {len(routes)} routes: sizing every engine, GPU and "
                                             "precision for each (the first plan of a session takes a few seconds)…",
                                             show_time=True):
            quick = plan(routes, prices, ops, settings, checked=False)
        if quick is not None:
            with pending.container():
                st.warning(UNCHECKED_NOTE)
                st.dataframe(tables.styled(tables.decision_table(quick.result.plan)), hide_index=True,
                             placeholder="")
        with st.spinner(f"Checking the plan by simulation ({len(routes)} routes: continuous batching on each "
                        f"route's traffic)…", show_time=True):
            shown = plan(routes, prices, ops, settings, checked=True)
        pending.empty()
        ss.checked_keys.add(key)
        return shown
    return plan(routes, prices, ops, settings, checked=True)


UNCHECKED_NOTE = ("**Screened plan, not yet checked by simulation**: the replica counts below come from one "
                  "replica simulated with its share of the load; the fleet simulation check (as `python -m planner plan` runs it) is running and "
                  "replaces them in a few seconds.")


def input_key(routes: pd.DataFrame, prices: pd.DataFrame, ops: pd.DataFrame, settings: scenario.Settings) -> str:
    """A digest of everything a plan depends on (which checked plans this session has seen)."""
    digest = hashlib.sha256()
    for frame in (routes, prices, ops):
        digest.update(pd.util.hash_pandas_object(frame.astype(str), index=False).values.tobytes())
    digest.update(repr(settings).encode())
    return digest.hexdigest()


# ---------------------------------------------------------------- the answer: what to buy

def headline_fleet(shown: Shown, routes: pd.DataFrame, prices: pd.DataFrame, ops: pd.DataFrame,
                   settings: scenario.Settings) -> FleetResult | None:
    """The optimised fleet the page leads with: with the Fleet tab's levers when they were optimised on these
    inputs, else with the default levers, optimised now when there are at most answer.FLEET_AUTO_MAX_ROUTES
    routes.  None (the route-by-route plan leads) when the plan on the page is not the checked plan of these
    inputs, when there are more routes and no fleet was optimised, or when no fleet could be made."""
    if shown.unchecked or not math.isfinite(shown.seconds):
        return None
    ss = st.session_state
    done = ss.setdefault("fleet_keys", set())
    base = input_key(routes, prices, ops, settings)
    levers = ss.setdefault("answer_levers", Levers())
    if base + levers.describe() not in done:
        levers = Levers()
        if base + levers.describe() not in done and len(routes) > answer.FLEET_AUTO_MAX_ROUTES:
            return None
    with st.spinner(f"Optimising the fleet ({len(routes)} routes together: shared deployments, engineering once, "
                    "each deployment checked by simulation)…", show_time=True):
        try:
            fleet, _ = optimised_fleet(routes, prices, ops, settings, levers)
        except Exception as err:  # the UI edge: the plan still answers; say why there is no fleet
            log.exception("fleet optimisation failed")
            st.warning(f"No optimised fleet ({printable(str(err))}): the answer is the route-by-route plan.")
            return None
    done.add(base + levers.describe())
    return fleet


def answer_section(shown: Shown, fleet: FleetResult | None, settings: scenario.Settings, started: float
                   ) -> tuple[answer.Answer, answer.Answer | None]:
    """What to buy, as the headline: the optimised fleet when there is one (the route-by-route plan then shown
    as the alternative), else the plan.  Returns the answer and the alternative (None when the plan leads)."""
    result = shown.result
    plan_view = answer.plan_answer(result.plan, not shown.unchecked)
    now = plan_view if fleet is None else answer.fleet_answer(fleet, result.plan)
    st.subheader("What to buy: " + ("the optimised fleet" if fleet is not None else "route by route"))
    change = answer_change(now)
    answer_cards(now, change, shown.unchecked if fleet is None else FLEET_UNCHECKED)
    if fleet is None:
        st.caption(f"Totals cover {printable(plan_coverage(result.rows))} · {tables.range_text(result.plan)} · "
                   + check_text(shown.unchecked))
    else:
        st.caption(f"Totals cover {answer.coverage_text(now)} · {fleet_note(fleet.summary)} · "
                   + fleet_check_text(now.checked))
    timing = answer_timing(time.monotonic() - started, shown.seconds, fleet is not None)
    st.caption(f"{timing} · {change_scope(change, now.kind)} · prices: "
               f"{settings.provider or 'cheapest provider per GPU'}, {settings.pricing_type}"
               f"{f', ×{settings.gpu_price_factor:g}' if settings.gpu_price_factor != 1 else ''} · traffic "
               f"×{settings.traffic_growth:g} · engineer ${result.assumptions.engineer_usd_per_hour:,.0f}/h")
    if fleet is not None:
        alternative_section(result.plan, fleet, plan_view, now)
    return now, (plan_view if fleet is not None else None)


def answer_timing(elapsed_s: float, plan_s: float, with_fleet: bool) -> str:
    """How long this answer took to appear after the change (the wait the user had), and what of it the plan
    took; a plan computed earlier on the same inputs comes from the cache."""
    if not math.isfinite(plan_s):
        return f"last good plan · answer in {elapsed_s:.1f} s"
    if plan_s > elapsed_s:
        return f"answer in {elapsed_s:.1f} s (plan from the cache; it took {plan_s:.1f} s when computed)"
    return f"answer in {elapsed_s:.1f} s (plan {plan_s:.1f} s" + (", then the fleet)" if with_fleet else ")")


FLEET_UNCHECKED = "the fleet's deployments were not simulated"


def answer_cards(now: answer.Answer, change: dict[str, float] | None, unchecked: str) -> None:
    """The answer's totals as five cards, each with its change against the previous answer."""
    t = now.totals
    mark = "" if now.checked else " · NOT CHECKED"
    unchecked_help = None if now.checked else f"Not checked by simulation ({unchecked})."
    cols = st.columns(5)
    cols[0].metric(f"Fleet $/month{mark}", f"${t['total_usd_per_month']:,.0f}", border=True,
                   delta_color="inverse", delta=money_delta(change, "total_usd_per_month"), help=unchecked_help)
    cols[1].metric(f"GPUs{mark}", f"{t['gpus']:,.0f}", border=True, delta_color="inverse",
                   delta=f"{change['gpus']:+,.0f}" if change and change["gpus"] else None,
                   help=unchecked_help or (f"At the busiest hour: {', '.join(f'{n} {g}' for g, n in now.gpus_by_type.items())}"
                                           " (batch jobs included)." if now.gpus_by_type else None))
    cols[2].metric(f"GPU $/month{mark}", f"${t['gpu_usd_per_month']:,.0f}", border=True, delta_color="inverse",
                   delta=money_delta(change, "gpu_usd_per_month"), help=unchecked_help)
    cols[3].metric("Engineering $/month", f"${t['eng_usd_per_month']:,.0f}", border=True, delta_color="inverse",
                   delta=money_delta(change, "eng_usd_per_month"),
                   help="Model updates (engineer hours × rate + build GPU-hours) plus amortised engine adoption"
                        + (", counted once per engine and model." if now.kind == answer.FLEET else "."))
    cols[4].metric("Routes planned", f"{len(now.planned)} of {len(now.routes)}",
                   border=True, delta=planned_delta(change), delta_color="normal",
                   help="Against the previous answer: red and down when fewer routes are planned (one turned "
                        "infeasible or was removed); the $ and GPU changes compare only routes planned in both.")


def alternative_section(plan: pd.DataFrame, fleet: FleetResult, plan_view: answer.Answer,
                        now: answer.Answer) -> None:
    """The route-by-route plan as the alternative (smaller, labelled so) and per route what the fleet changes."""
    with st.container(border=True, key="alternative"):
        st.markdown("**Alternative, not the recommendation: route by route**, every route on its own cheapest "
                    "option as `python -m planner plan` (the table *Route by route* below). "
                    + ("Checked by simulation." if plan_view.checked else "**NOT checked by simulation.**"))
        cols = st.columns(3)
        cols[0].metric("Route by route $/month", f"${plan_view.totals['total_usd_per_month']:,.0f}",
                       help="Every route on its own recommendation, engineering counted per route.")
        cols[1].metric("Route by route GPUs", f"{plan_view.totals['gpus']:,.0f}")
        cols[2].metric("Fleet saves $/month", f"${plan_view.totals['total_usd_per_month'] - now.totals['total_usd_per_month']:,.0f}",
                       help="Route by route $/month minus the optimised fleet's.")
        st.caption(f"Route by route totals cover {printable(plan_coverage(plan_rows(plan)))} · {tables.range_text(plan)}")
    st.markdown("**Plan → fleet, per route**")
    table = answer.plan_fleet_table(plan, fleet)
    if st.session_state.get("compact"):
        route_cards(answer.plan_fleet_cards(table), "fleet")
    else:
        text, number = st.column_config.TextColumn, st.column_config.NumberColumn
        st.container(key="plan_to_fleet_box").dataframe(
            tables.styled(table, answer.PLAN_FLEET_FORMATS), hide_index=True, key="plan_to_fleet", placeholder="",
            column_order=answer.PLAN_FLEET_COLUMNS[:-1],  # why they differ: in full below, never cut off
            column_config={"route": text(width=115), "plan: engine / GPU": text(width=230),
                           "plan: GPUs": number("plan GPUs", width=70), "plan: $/month": number("plan $/mo", width=80),
                           "fleet: deployment": text("fleet dep.", width=70),
                           "fleet: engine / GPU": text(width=230), "fleet: GPUs": number("fleet GPUs", width=75),
                           "fleet: GPU $/month": number("fleet GPU $/mo", width=105)})
        st.markdown(answer.why_text(table))
    st.caption(" ".join(part for part in (
        answer.fleet_gpus_note(table, fleet),
        "A shared deployment's GPUs and GPU $ serve every route on it; the fleet counts engineering once per engine "
        "and model (the route-by-route plan once per route).") if part))


def minute_by_minute(result: PlanResult, routes: pd.DataFrame) -> None:
    """One online route judged on its fleet: its SLO windows minute by minute (requests, TTFT and TPOT at the SLO
    percentile for the recommended fleet and one replica fewer, the SLO, windows in breach)."""
    judged = [route for route, timeline in result.timelines.items() if not timeline.empty]
    if not judged:
        st.info("No online route was judged window by window (offline routes, or none feasible).")
        return
    route = str(st.selectbox("Route", judged, key="minutes_route", format_func=printable))
    slos = routes.set_index("name") if "name" in routes.columns else pd.DataFrame()
    r = slos.loc[route] if route in slos.index else pd.Series(dtype=object)
    verdict = answer.window_verdicts(result.plan).get(route)
    if verdict:
        st.markdown(f"**{markdown_text(route)}**: {markdown_text(verdict)}")
    choices = answer.sizing_choices(result.plan, route)
    if not choices.empty:
        st.table(choices.set_index("sizing"))  # three short rows: HTML, readable on a phone
    width = COMPACT_CHART_WIDTH if st.session_state.compact else charts.WINDOW_CHART_WIDTH
    chart = charts.window_timeline_chart(result.timelines[route], _cell_number(r.get("ttft_slo_ms")),
                                         _cell_number(r.get("tpot_slo_ms")),
                                         _cell_number(r.get("slo_percentile")) or 95.0, width=width)
    show_chart(chart)
    st.caption("The planned load (the route's log at its own timestamps, else an hour of arrivals at its peak "
               "rate) on the recommended fleet and on one replica fewer, simulated behind the assumed router; "
               "red points: windows whose percentile misses the SLO (fleetfacts.slo).")
    tradeoff = fleet_tradeoff(result.timelines[route])
    if len(tradeoff) > 1:
        st.markdown("**Cost against breach minutes**, from the whole-log count (what sizing on the whole run's "
                    "percentile buys) up to the recommendation:")
        show_chart(charts.fleet_tradeoff_chart(tradeoff, width=width))


def _cell_number(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def route_cards(cards: Sequence[tuple[str, str, str]], section: str) -> None:
    """One bordered card per route (key `card_<section>_<i>`): its name, the line to buy (GPUs, engine, $/month)
    and a note."""
    for i, (title, line, note) in enumerate(cards):
        with st.container(border=True, key=f"card_{section}_{i}"):
            st.markdown(f"**{title}**  \n{line}")
            if note:
                st.caption(note)


def fleet_check_text(checked: bool) -> str:
    """What the totals' caption says of the fleet's simulation check."""
    return ("checked by simulation, as `python -m planner fleet`" if checked
            else "**NOT checked by simulation**: the fleet's deployments were not simulated")


def answer_change(now: answer.Answer) -> dict[str, float] | None:
    """The change from the previous, different answer in this session (answer.answer_change)."""
    ss = st.session_state
    if ss.get("last_answer") != now:
        ss.prev_answer = ss.get("last_answer")
        ss.last_answer = now
    return answer.answer_change(now, ss.get("prev_answer"))


def change_scope(change: dict[str, float] | None, kind: str = answer.PLAN) -> str:
    """What the cards' changes compare."""
    if change is None:
        return "changes are against the previous answer of the same kind (fleet or route by route)"
    if kind == answer.FLEET:
        if not change["common"]:
            return ("the $ and GPU changes show only when the fleet plans the same routes as before (a route gained "
                    "or lost is in 'Routes planned')")
        return f"changes are against the previous fleet, over the same {change['common']:.0f} routes"
    return (f"changes are against the previous plan, over the {change['common']:.0f} routes planned in both"
            + (" (a route gained or lost is in 'Routes planned', not in the $)" if change["planned"] else ""))


def check_text(unchecked: str) -> str:
    """What the totals' caption says of the simulation check."""
    if not unchecked:
        return "checked by simulation, as `python -m planner plan`"
    return (f"**NOT checked by simulation** ({printable(unchecked)}): sized on one replica's share, which can differ from "
            "`python -m planner plan`")


def planned_delta(change: dict[str, float] | None) -> str | None:
    """'-1' when a route turned infeasible (st.metric shows it red and down), '+1' when one became feasible."""
    if not change or not change["planned"]:
        return None
    return f"{change['planned']:+.0f}"


def money_delta(change: dict[str, float] | None, name: str) -> str | None:
    """'+$1,234' or '-$1,234' with an ASCII sign: st.metric reads a leading '-' (not U+2212) as a
    decrease, so with delta_color="inverse" a cost that falls shows green and down."""
    if not change or abs(change[name]) < 0.5:
        return None
    return f"{'+' if change[name] > 0 else '-'}${abs(change[name]):,.0f}"


def recommendation_section(result: PlanResult, routes: pd.DataFrame, alternative: bool = False) -> None:
    """The route-by-route plan: the recommendation per route, or the alternative when the fleet leads."""
    st.subheader("Route by route (the alternative): each route on its own option" if alternative
                 else "Recommendation per route")
    text = st.column_config.TextColumn
    if st.session_state.compact:
        route_cards(answer.plan_cards(result.plan), "plan")
    else:
        st.container(key="decisions_box").dataframe(
            tables.styled(tables.decision_table(result.plan, routes)), hide_index=True, key="recommendation",
            placeholder="",
            column_config={"route": text(width=115), "runner-up": text(width=125),
                           "latency vs SLO": text("TTFT · TPOT ms / SLO", width=150, help=tables.LATENCY_HELP),
                           "GPUs": text(width=50), "GPU": text(width=60), "$/month": text(width=80),
                           "saves $/month": text("saves $/mo", width=80),
                           "range": text(width=95, help=tables.RANGE_HELP),
                           "break-even": text("break-even /mo", width=95, help=tables.BREAKEVEN_HELP)})
    if not st.session_state.compact:
        verdicts = answer.window_verdicts(result.plan)
        slos = {str(r["name"]): r for r in routes.to_dict("records")}
        for r in result.plan.to_dict("records"):
            route = str(r["route"])
            line = "; ".join(part for part in (tables.latency_line(r, slos.get(route)), verdicts.get(route, ""))
                             if part)
            if line:
                st.markdown(f"**{markdown_text(route)}**: {markdown_text(line)}")
    with st.expander("Details per route: precision, TP, replicas, GPU and $/month ranges, $ per 1M tokens, provenance, throughput, notes"):
        st.dataframe(tables.styled(tables.details_table(result.plan)), hide_index=True, placeholder="",
                     key="recommendation_details", column_config={"notes": text(width="large")})
        st.markdown("**What each option rests on** (feasible options, cheapest first):")
        for route, sources in answer.option_sources(result.options).items():
            st.markdown(f"- **{markdown_text(route)}**: {printable(sources)}")
    for wide in tables.wide_ranges(result.plan):
        st.markdown(f":orange-badge[{tables.WIDE_BADGE}] **{markdown_text(str(wide['route']))}**: {wide['range']}. Why: {wide['cause']}. "
                    f"To narrow it, measure that option: `{wide['fix']}`")
    st.caption(PROVENANCE_NOTE)
    rows = {name: i + 1 for i, name in enumerate(routes["name"])}
    for r in result.plan[result.plan["status"] != "ok"].itertuples():
        st.error(f"Route '{printable(str(r.route))}' (row {rows.get(r.route, '?')}) cannot be planned: "
                 f"{printable(str(r.notes))}. "
                 f"To fix: {scenario.infeasible_hint(str(r.notes), result.options[result.options['route'] == r.route])}")


# ---------------------------------------------------------------- charts

# Width of each panel of the cost-by-option chart in the compact layout: fits a 390 px phone beside its labels.
COMPACT_FACET_WIDTH = 150
# A single-panel chart's plot width on a phone (390 px less the page's padding and the axis labels).
COMPACT_CHART_WIDTH = 250


def show_chart(chart) -> None:
    """An Altair chart at the page's width; in the compact layout its legends go below it (charts.fit).  A
    concatenation of panels keeps its panels' own width: stretched, each panel would take the page's width and
    its axes would stick out of it."""
    fitted = charts.fit(chart, bool(st.session_state.compact))
    if charts.stretches(chart):
        st.altair_chart(fitted, width="stretch")
    else:
        st.altair_chart(fitted, width="content")


def legend_columns() -> int:
    """Legend columns of the charts with a legend entry per line: one on a phone."""
    return 1 if st.session_state.compact else 2

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
def pareto_data(options: pd.DataFrame, plan: pd.DataFrame, route: str, input_len: float,
                output_len: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    table = charts.pareto_table(bundled_inputs().curves, options, route, input_len, output_len)
    return table, charts.operating_points(options, plan, route)


def pareto(result: PlanResult, routes: pd.DataFrame) -> None:
    route = st.selectbox("Route", list(routes["name"]), key="pareto_route", format_func=printable)
    row = routes.set_index("name").loc[route]
    table, points = pareto_data(result.options, result.plan, route, float(row["input_len_mean"]),
                                float(row["output_len_mean"]))
    if table.empty:
        st.info(f"No feasible option for '{printable(route)}' to draw.")
        return
    slo = float(row["tpot_slo_ms"])
    slo_note = (f" The red line is the TPOT SLO as speed per user (a p{row['slo_percentile']:g} bound, the curves "
                "are means): an option runs at or right of it." if math.isfinite(slo) else " The route has no TPOT SLO.")
    st.caption(f"Throughput per GPU against speed per user for the {charts.MAX_OPTIONS_PER_ROUTE} cheapest feasible "
               f"options of '{printable(route)}', as concurrency rises, at {row['input_len_mean']:.0f} in / "
               f"{row['output_len_mean']:.0f} out (predicted mean TPOT). The grey band is the Pareto frontier; "
               f"dots are where the plan runs each option, the ringed one is the choice; a dashed curve is "
               f"extrapolated or published, not measured.{slo_note}")
    show_chart(charts.pareto_chart(table, points, slo, legend_columns=legend_columns(),
                                   compact=bool(st.session_state.compact)))
    passed = {option: why for (r, option), why in charts.passed_over(result.options, result.plan).items() if r == route}
    note = charts.pareto_note(table, points, passed)
    if note:
        st.caption(note)


# ---------------------------------------------------------------- fleet: all routes together

# The fleet's levers: checkbox label, help, default (planner.planning.fleet.Levers' defaults).
LEVERS = {
    "share": ("Share deployments", "Routes of one model may share a deployment held at the strictest of their "
              "SLOs.", Levers().share),
    "mix": ("GPU mix", "A route's requests, split by prompt and output length, may go to different GPUs and "
            "engines.", Levers().mix),
    "autoscale": ("Autoscale by hour", "Replicas follow each route's hourly profile (its diurnal column or a day "
                  "of log); cold starts are billed.", Levers().autoscale),
    "pricing": ("Pricing mix", "Reserved GPUs for the base load where cheaper, on-demand for the rest, spot for "
                "batch jobs.", Levers().pricing),
}


def fleet_view(routes: pd.DataFrame, prices: pd.DataFrame, ops: pd.DataFrame, settings: scenario.Settings) -> None:
    st.caption("One program over all routes (as `python -m planner fleet`): deployments shared between routes, "
               "engineering counted once per engine and model, and the levers chosen here; every shared "
               "deployment is checked by simulating its mixed traffic. With up to "
               f"{answer.FLEET_AUTO_MAX_ROUTES} routes the default levers' fleet is made on every edit (seconds) and "
               "leads the page; other levers, or more routes, run when you press the button, once per combination "
               "of inputs and levers, and the fleet you optimise here then leads the page.")
    try:
        check_fleet_size(len(routes), "routes table")
    except InputError as err:
        st.error(f"No fleet: {err}.")
        return
    levers = lever_controls()
    key = input_key(routes, prices, ops, settings) + levers.describe()
    done = st.session_state.setdefault("fleet_keys", set())
    pressed = st.button("Optimise the fleet", key="optimise_fleet", type="primary")
    if not pressed and key not in done:
        st.info("Press **Optimise the fleet** for the fleet of these routes and levers." + (
            " The inputs or levers changed since the last fleet." if done else ""))
        return
    with st.spinner(f"Optimising the fleet ({len(routes)} routes, {len(lever_steps(levers))} fleets: one per "
                    f"lever step, each checked by simulation)…", show_time=True):
        found = fleet_or_error(routes, prices, ops, settings, levers)
    if found is None:
        return
    done.add(key)
    if levers != st.session_state.get("answer_levers", Levers()):  # the page's answer is this fleet from now on
        st.session_state.answer_levers = levers
        st.rerun()
    fleet_sections(*found)


def lever_controls() -> Levers:
    cols = st.columns(len(LEVERS))
    chosen = st.session_state.get("answer_levers", Levers())
    on = {name: col.checkbox(label, value=getattr(chosen, name), key=f"fleet_{name}", help=text)
          for col, (name, (label, text, _)) in zip(cols, LEVERS.items(), strict=True)}
    return Levers(**on)


def fleet_or_error(routes: pd.DataFrame, prices: pd.DataFrame, ops: pd.DataFrame, settings: scenario.Settings,
                   levers: Levers) -> tuple[FleetResult, pd.DataFrame] | None:
    """The optimised fleet (cached); an input or infeasibility error is shown, not raised."""
    try:
        return optimised_fleet(routes, prices, ops, settings, levers)
    except FleetplanError as err:
        st.error(f"No fleet: {err}.")
    except Exception as err:  # the UI edge: a planner bug must not show a traceback in the room
        log.exception("fleet optimisation failed")
        st.error(f"The fleet optimisation failed ({type(err).__name__}: {err}).")
    return None


def fleet_sections(result: FleetResult, waterfall: pd.DataFrame) -> None:
    s = result.summary
    cols = st.columns(4)
    cols[0].metric("Optimised fleet $/month", f"${s['total_usd_per_month']:,.0f}", border=True,
                   help=f"GPUs ${s['gpu_usd_per_month']:,.0f} + engineering ${s['eng_usd_per_month']:,.0f}")
    cols[1].metric("Route by route $/month", f"${s['per_route_usd_per_month']:,.0f}", border=True,
                   help="Every route on its own recommendation (the plan above), engineering counted per route.")
    cols[2].metric("Savings $/month", f"${s['savings_usd_per_month']:,.0f}", border=True)
    by_type = ", ".join(f"{n} {g}" for g, n in s["gpus_by_type"].items()) or "none"
    cols[3].metric("GPUs at the busiest hour", f"{sum(s['gpus_by_type'].values()):,}", border=True,
                   help=f"{by_type}. Batch jobs' GPUs included (they may run at the busiest hour).")
    st.caption(fleet_note(s))
    left, right = st.columns(2)
    with left:
        st.markdown("**GPUs online over the day**")
        show_chart(charts.hourly_gpus_chart(charts.hourly_gpus_table(result.hourly_gpus)))
        st.caption("Online deployments only: batch jobs run within their deadlines, not on the clock. Without "
                   "the autoscale lever the fleet is the same every hour.")
    with right:
        st.markdown("**$ per month by lever**")
        show_chart(charts.waterfall_chart(charts.waterfall_bars(waterfall)))
        st.caption("From every route on its own option, to engineering counted once per engine and model (no "
                   "lever), then each lever added in turn; each step is a full fleet optimisation.")
    st.markdown("**Deployments: which routes share which**")
    deployments = result.deployments.assign(pricing=[answer.price_brief(str(p)) for p in result.deployments["pricing"]])
    view = tables.styled(tables.fleet_table(deployments), tables.FLEET_FORMATS)
    if st.session_state.compact:  # the cards carry pricing and notes
        route_cards(answer.deployment_cards(result.deployments), "deployment")
    else:
        deployment_tables(view)
        st.markdown(answer.deployment_terms_text(result.deployments))
    st.caption("Pricing without its sources (they are in the fleet CSV's `pricing` column).")
    name = st.session_state.scenario_name or "scenario"
    st.download_button("Download fleet CSV", fleet_csv_text(result).encode("utf-8"),
                       file_name=f"fleet-{slugify(name)}.csv", mime="text/csv", key="download_fleet",
                       on_click="ignore", help="The same file as `python -m planner fleet --out`: one row per "
                                               "deployment (schema FLEET), header on line 1.")


def deployment_tables(view) -> None:
    """The fleet's deployments in two tables that each fit a 1440 px window: what runs, then its terms."""
    text, number = st.column_config.TextColumn, st.column_config.NumberColumn
    st.container(key="fleet_deployments_box").dataframe(
        view, hide_index=True, key="fleet_deployments", placeholder="", column_order=tables.FLEET_DECISION,
        column_config={"deployment": text("dep.", width=50), "routes (share of requests)": text(width=190),
                       "kind": text(width=110), "engine": text(width=150), "GPU": text(width=50),
                       "TP": number(width=35), "replicas (fewest)": number("replicas min", width=85),
                       "replicas (most)": number("replicas max", width=85), "GPUs (most)": number("GPUs", width=55),
                       "GPU $/month": number(width=90), "simulated within SLO": number("within SLO", width=75)})
    st.container(key="fleet_terms_box").dataframe(
        view, hide_index=True, key="fleet_terms", placeholder="", column_order=tables.FLEET_TERMS,
        column_config={"deployment": text("dep.", width=50), "model": text(width=130),
                       "reserved": number("reserved replicas", width=130), "precision": text(width=80),
                       "SLO held": text(width=250)})


def fleet_note(s: dict) -> str:
    notes = [f"levers: {s['levers']}", f"{s['deployments']} deployments"]
    if s["sim_attainment"] is not None:
        notes.append(f"lowest simulated share of requests within SLO: {s['sim_attainment']:.1%}")
    if s["kept_route_by_route"]:
        notes.append("the program's fleet was not cheaper once simulated: every route kept on its own option")
    if s["unplanned_routes"]:
        notes.append(f"not in the fleet (no feasible option): {printable(', '.join(s['unplanned_routes']))}")
    notes.append(f"solved in {s['solve_s']:.1f} s")
    return " · ".join(notes)


# ---------------------------------------------------------------- export, share, compare

def export_section(shown: Shown, fleet: FleetResult | None, routes: pd.DataFrame, prices: pd.DataFrame,
                   ops: pd.DataFrame, settings: scenario.Settings, inputs: Catalog) -> None:
    """The downloads. Where the page leads with the optimised fleet, that fleet is the primary file and the
    workbook's first sheet; the route-by-route plan CSV is offered as the alternative it is."""
    st.subheader("Take it away")
    name = st.session_state.scenario_name or "scenario"
    result = shown.result
    if shown.unchecked:  # the files say it too: every row's notes, and the file names
        result = scenario.unchecked_plan(result, shown.unchecked)
        name = f"{name}-NOT-CHECKED"
        st.warning(f"The downloads hold a plan **not checked by simulation** ({printable(shown.unchecked)}); "
                   "every row's notes and the file names say so.")
    diff = baseline_section(result)
    row = st.container(horizontal=True, key="downloads")  # buttons as wide as their labels, never cut off
    left = middle = scenario_col = row
    right = st.container()
    if fleet is not None:
        left.download_button("Download the recommendation (fleet CSV)", fleet_csv_text(fleet).encode("utf-8"),
                             file_name=f"fleet-{slugify(name)}.csv", mime="text/csv", key="download_recommendation",
                             type="primary", on_click="ignore",
                             help="The optimised fleet this page leads with: the same file as `python -m planner "
                                  "fleet --out`, one row per deployment (schema FLEET).")
    left.download_button("Download route-by-route plan CSV" if fleet is not None else "Download plan CSV",
                         scenario.plan_csv_bytes(result), file_name=f"plan-{slugify(name)}.csv",
                         mime="text/csv", key="download_plan", type="secondary" if fleet is not None else "primary",
                         on_click="ignore",
                         help=("The alternative to the fleet: each route on its own cheapest option. " if fleet
                               is not None else "") + "The same file as `python -m planner plan --out`: a plain "
                              "CSV (header on line 1, rounded), safe to open in a spreadsheet; `python -m planner` "
                              "reads it back.")
    middle.download_button("Download workbook (.xlsx)",
                           workbook_bytes(result, diff, None if fleet is None else fleet.deployments),
                           file_name=f"plan-{slugify(name)}.xlsx", key="download_xlsx", on_click="ignore",
                           mime="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                           help=("Sheets: fleet (the recommendation's deployments), " if fleet is not None
                                 else "Sheets: ") + "plan, totals per route and their sum, assumptions, price and "
                                "profile sources (and the baseline difference when a baseline is loaded).")
    saved = scenario.Scenario(name, routes, settings, None if prices.equals(inputs.prices_df) else prices,
                           None if ops.equals(inputs.ops_df) else ops)
    scenario_col.download_button("Download scenario", scenario.scenario_to_json(saved),
                                 file_name=f"{slugify(name)}.json", mime="application/json", key="download_scenario",
                                 on_click="ignore")
    query = scenario.settings_to_query(settings)
    right.markdown("**Share the key settings:** this page's address now carries them"
                   + (f": `?{urlencode(query)}`" if query else " (all defaults)."))


def baseline_section(result: PlanResult) -> pd.DataFrame | None:
    """Load a saved plan CSV and show the differences per route (engine, GPUs, $/month); returns them."""
    st.file_uploader("Compare with a saved plan (plan CSV, e.g. last quarter's)", type=["csv"], key="baseline_upload")
    upload = st.session_state.get("baseline_upload")
    if upload is None:
        return None
    try:
        baseline = scenario.read_plan_upload(upload.getvalue(), upload.name)
    except InputError as err:
        st.error(f"{err}. No baseline is compared.")
        return None
    diff = baseline_diff(result.rows, plan_rows(baseline))
    st.caption(f"Differences against {upload.name}, per route; the fleet row sums only the routes planned in both.")
    # A static table: it wraps long cells at the page's width, so nothing is cut off (a grid cell would be).
    st.container(key="baseline_box").table(tables.styled(tables.diff_table(diff), tables.DIFF_FORMATS), hide_index=True)
    return diff


def slugify(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name.strip().lower()) or "scenario"


def compare_section(result: PlanResult, save: bool) -> None:
    ss = st.session_state
    name = ss.scenario_name or "scenario"
    if save:
        ss.saved[name] = result.plan
        st.toast(f"Saved '{name}' for comparison.")
    if not ss.saved:
        return
    st.subheader("Scenarios side by side")
    plans = {**ss.saved, "now": result.plan}
    table = scenario.compare_plans(plans)
    st.container(key="comparison_box").table(tables.styled(table, tables.comparison_formats(table)), hide_index=True)
    if st.button("Clear saved scenarios", key="clear_saved"):
        ss.saved = {}
        st.rerun()


def show_link_warnings() -> None:
    for warning in st.session_state.get("link_warnings", []):
        st.warning(warning)


# ---------------------------------------------------------------- page

# The answer bar stays under Streamlit's header (3.75rem) while the page scrolls, so an edit's effect on the
# totals is in view beside the routes editor; the alternative's numbers are smaller than the answer's cards.
# Streamlit wraps a keyed container in a layout wrapper of its own size, so the wrapper is what sticks.
STICKY_CSS = """<style>
[data-testid="stLayoutWrapper"]:has(> .st-key-answer_bar), .st-key-answer_bar {position: sticky; top: 3.75rem;
  z-index: 990; background: #ffffff;}
.st-key-answer_bar {padding: 0.4rem 0; border-bottom: 1px solid rgba(49, 51, 63, 0.2);}
.st-key-answer_bar p {margin: 0; font-size: 0.95rem;}
.st-key-answer_bar [data-testid="stMarkdownContainer"] {margin-bottom: 0;}
.st-key-alternative [data-testid="stMetricValue"] {font-size: 1.4rem;}
</style>"""

def main() -> None:
    st.set_page_config(page_title="Fleetplan: GPU fleet what-if", page_icon="🧮", layout="wide")
    st.markdown(STICKY_CSS, unsafe_allow_html=True)
    try:
        inputs = bundled_inputs()
    except InputError as err:
        st.error(f"The bundled data could not be loaded: {err}")
        st.stop()
    started = time.monotonic()  # the answer's caption says how long the user waited for it
    init_state(inputs)
    st.title("Fleetplan: GPU fleet what-if")
    st.caption("Which engine, GPU and how many GPUs each LLM route needs, and what it costs per month. "
               "Change anything on the left or in the tables and the plan re-computes.")
    show_link_warnings()
    bar = st.container(key="answer_bar")  # stays at the top while scrolling (STICKY_CSS)
    head = st.container()
    save = sidebar(inputs)
    settings = current_settings()
    routes = routes_section(inputs)
    prices, ops = costs_section()
    shown = checked_plan(routes, prices, ops, settings, head)
    if shown is None:
        st.info("Fix the error above to see a plan.")
        st.stop()
    result = shown.result
    with head:
        fleet = headline_fleet(shown, routes, prices, ops, settings)
        now, alternative = answer_section(shown, fleet, settings, started)
        recommendation_section(result, routes, alternative=fleet is not None)
    with bar:
        st.markdown(answer.bar_text(now, alternative, compact=bool(st.session_state.compact)))
    charts_section(result, routes, prices, ops, settings)
    export_section(shown, fleet, routes, prices, ops, settings, inputs)
    compare_section(result, save)
    st.query_params.from_dict({**scenario.settings_to_query(settings),
                               **({"layout": "phone"} if st.session_state.compact else {})})


main()
