"""What every part of the app shares: its constants, the cached computations (every input an argument), the session
state, and the plan as the page shows it (checked or screened).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd
import streamlit as st

from fleetfacts.bundle import EXAMPLES_DIR
from fleetfacts.errors import InputError
from fleetfacts.schema import DEFAULT_CONFIG
from planner.engine.curves import GroupKey
from planner.planning.catalog import Catalog, load_inputs
from planner.planning.fleet import FleetResult
from planner.planning.fleet_units import Levers
from planner.planning.plan import PlanResult
from planner.planning.route_table import load_routes
from planner.sizing.assumptions import Assumptions
from ui import charts, scenario, tables

log = logging.getLogger("fleetplan.app")
EXAMPLE_ROUTES = EXAMPLES_DIR / "routes.csv"
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


@st.cache_resource(show_spinner="Starting: fitting the bundled performance profiles (a few seconds, once per "
                                "server)…", show_time=True)
def bundled_inputs() -> Catalog:
    """Fitted curves and bundled price / engine-ops tables (loaded once per process)."""
    return load_inputs()


@st.cache_data(show_spinner=False)
def bundled_routes() -> pd.DataFrame:
    return scenario.resolve_logs(load_routes(EXAMPLE_ROUTES), EXAMPLES_DIR, "examples/routes.csv")


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


def checked(name: str, check) -> pd.DataFrame:
    """Run `check`; on InputError show what to fix and keep the last good table."""
    try:
        good = check()
    except InputError as err:
        st.error(f"{err}. The plan shows the last valid {name} table until this is fixed.")
        return st.session_state[f"good_{name}"]
    st.session_state[f"good_{name}"] = good
    return good


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


def route_cards(cards: Sequence[tuple[str, str, str]], section: str) -> None:
    """One bordered card per route (key `card_<section>_<i>`): its name, the line to buy (GPUs, engine, $/month)
    and a note."""
    for i, (title, line, note) in enumerate(cards):
        with st.container(border=True, key=f"card_{section}_{i}"):
            st.markdown(f"**{title}**  \n{line}")
            if note:
                st.caption(note)


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


def slugify(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name.strip().lower()) or "scenario"
