"""The app's inputs: the sidebar (scenario, prices, allow-lists) and the routes, request-log and cost tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd
import streamlit as st

from fleetfacts.errors import InputError
from fleetfacts.schema import ENGINE_OPS, PRICES, ROUTES
from planner.planning.catalog import Catalog
from planner.planning.exports import printable
from planner.planning.route_table import validate_routes
from ui import scenario
from ui.page_base import (
    ASSUMED,
    CHEAPEST,
    EDITOR_COLUMNS,
    GROWTH_RANGE,
    PRICE_RANGE,
    allowed_options,
    checked,
    new_upload,
    pricing_types,
    providers,
    put_settings,
    set_base,
)
from ui.uploads import EXAMPLES_DIR, MAX_APP_LOG_BYTES, MAX_APP_LOG_ROWS, MAX_SESSION_LOGS, SessionLogs

# The browser's limit on a table or scenario upload, MiB (the app checks it again: scenario.check_upload_size).
TABLE_UPLOAD_MIB = scenario.MAX_UPLOAD_BYTES // 2**20


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
    st.file_uploader("Load a scenario file", type=["json"], key="scenario_upload", max_upload_size=TABLE_UPLOAD_MIB,
                     help="A file saved with 'Download scenario' below the plan.")
    upload = new_upload("scenario_upload")
    if upload is None:
        return
    try:
        loaded = scenario.scenario_from_json(upload.getvalue(), upload.name)
        loaded = dataclasses.replace(loaded, routes=scenario.resolve_logs(loaded.routes, EXAMPLES_DIR, upload.name,
                                                                          session_logs()))
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
    routes = checked("routes", lambda: scenario.check_routes(edited, "routes table", session_logs()))
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


def routes_importer() -> None:
    st.file_uploader("Routes CSV (the format of examples/routes.csv)", type=["csv"], key="routes_upload",
                     max_upload_size=TABLE_UPLOAD_MIB)
    upload = new_upload("routes_upload")
    if upload is None:
        show_message("routes_upload")
        return
    try:
        frame = scenario.check_routes_count(
            validate_routes(scenario.read_csv_upload(upload.getvalue(), ROUTES, upload.name), upload.name),
            upload.name)
        frame = scenario.resolve_logs(frame, EXAMPLES_DIR, upload.name, session_logs())
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


def session_logs() -> SessionLogs:
    """This session's uploaded request logs (ui.uploads.SessionLogs: a folder of its own, removed with the session)."""
    if "uploaded_logs" not in st.session_state:
        st.session_state.uploaded_logs = SessionLogs()
    return st.session_state.uploaded_logs


def request_log_importer(inputs: Catalog) -> None:
    st.caption("A request log becomes one route per `route` in it: mean rate, burstiness (arrival CV), burst "
               "descriptors and length percentiles are measured from the log, and the plan replays its own "
               "timestamps (peak_to_mean 1 for a log shorter than a day). Formats: the Azure LLM trace "
               "(TIMESTAMP, ContextTokens, GeneratedTokens) or a gateway export (timestamp, route, "
               "prompt_tokens, completion_tokens) as CSV or JSON Lines. The log names no SLOs: set them here.")
    st.file_uploader("Request log", type=["csv", "jsonl", "json"], key="log_upload",
                     max_upload_size=MAX_APP_LOG_BYTES // 2**20,
                     help=f"Kept for this session only: a routes CSV imported afterwards whose `log` column names this "
                          f"file replays it. Up to {MAX_APP_LOG_BYTES // 2**20} MiB and {MAX_APP_LOG_ROWS:,} "
                          f"requests ({MAX_SESSION_LOGS} logs a session).")
    fresh = new_upload("log_upload")
    if fresh is not None:
        try:
            session_logs().keep(fresh.getvalue(), fresh.name)
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
            saved = session_logs().keep(upload.getvalue(), upload.name)
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
    st.file_uploader(f"Replace with a {schema.name} CSV", type=["csv"], key=f"{name}_upload",
                     max_upload_size=TABLE_UPLOAD_MIB)
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
