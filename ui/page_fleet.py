"""The app's Fleet tab: every route in one optimised fleet, its levers, deployments and waterfall.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from fleetfacts.errors import FleetplanError, InputError
from planner.planning.fleet import FleetResult, fleet_csv_text, lever_steps
from planner.planning.fleet_size import check_fleet_size
from planner.planning.fleet_units import Levers
from ui import answer, charts, scenario, tables
from ui.page_answer import fleet_note
from ui.page_base import input_key, log, optimised_fleet, route_cards, show_chart, slugify

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
