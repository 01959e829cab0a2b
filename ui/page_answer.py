"""The app's answer: what to buy (the optimised fleet or the plan), the alternative, the route-by-route recommendation
and its minute-by-minute view.
"""

from __future__ import annotations

import math
import time

import pandas as pd
import streamlit as st

from planner.planning.exports import markdown_text, printable
from planner.planning.fleet import FleetResult
from planner.planning.fleet_units import Levers
from planner.planning.plan import PlanResult, fleet_tradeoff, plan_coverage
from planner.sizing.plan_row import plan_rows
from ui import answer, charts, scenario, tables
from ui.page_base import (
    COMPACT_CHART_WIDTH,
    PROVENANCE_NOTE,
    Shown,
    input_key,
    log,
    optimised_fleet,
    route_cards,
    show_chart,
)


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
