"""Fleetplan what-if app: `streamlit run app.py`.

Routes, prices and engine update costs in; recommended engine, GPU and fleet
per route out, with charts and a CSV export.  This file lays out the page; its
sections are ui/page_*.py (base: constants, cached computations, state and the
plan as shown; inputs; answer; fleet; charts; export), and every number comes
from `planner`, called through small cached functions with every input passed
as an argument.
"""

from __future__ import annotations

import time

import streamlit as st

from fleetfacts.errors import InputError
from ui import answer, scenario
from ui.page_answer import answer_section, headline_fleet, recommendation_section
from ui.page_base import bundled_inputs, checked_plan, current_settings, init_state
from ui.page_charts import charts_section
from ui.page_export import compare_section, export_section, show_link_warnings
from ui.page_inputs import costs_section, routes_section, sidebar

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
