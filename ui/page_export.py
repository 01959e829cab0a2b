"""The app's downloads, saved scenarios, links and the comparison with a saved plan.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from fleetfacts.errors import InputError
from planner.planning.catalog import Catalog
from planner.planning.exports import baseline_diff, printable, workbook_bytes
from planner.planning.fleet import FleetResult, fleet_csv_text
from planner.planning.plan import PlanResult
from planner.sizing.plan_row import plan_rows
from ui import scenario, tables
from ui.page_base import Shown, slugify


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
    st.file_uploader("Compare with a saved plan (plan CSV, e.g. last quarter's)", type=["csv"], key="baseline_upload",
                     max_upload_size=scenario.MAX_UPLOAD_BYTES // 2**20)
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
