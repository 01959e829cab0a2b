"""Issue 14 items 12 and 13: hostile uploads give a message naming the problem, never a stack trace."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.test_app import APP, ROUTES_CSV, TIMEOUT_S, assert_clean

HEADER = ROUTES_CSV.splitlines()[0] + b"\n"


@pytest.fixture
def app() -> AppTest:
    return AppTest.from_file(APP, default_timeout=TIMEOUT_S).run()


def _messages(at: AppTest) -> list[str]:
    return [e.value for e in at.error] + [w.value for w in at.warning] + [i.value for i in at.info]


def _no_trace(at: AppTest) -> None:
    assert_clean(at)
    for text in _messages(at):
        assert "Traceback" not in text and "Error:" not in text.split(".")[0], text
        assert "OverflowError" not in text and "math range error" not in text, text


def test_a_header_only_routes_csv_says_it_has_no_routes_on_this_and_later_reruns(app):
    app.file_uploader(key="routes_upload").set_value(("empty.csv", HEADER, "text/csv")).run()
    _no_trace(app)
    assert any("no routes" in m for m in _messages(app)), _messages(app)
    app.run()
    _no_trace(app)


def test_a_scenario_with_no_routes_says_so_and_keeps_working(app):
    doc = {"format": "fleetplan-scenario", "version": 1, "name": "x", "routes": [], "settings": {}}
    app.file_uploader(key="scenario_upload").set_value(("x.json", json.dumps(doc).encode(), "application/json"))
    app.run()
    _no_trace(app)
    app.run()
    _no_trace(app)


@pytest.mark.parametrize("num_requests", ["1e8", "1e30"])
def test_a_huge_batch_job_is_refused_or_planned_without_a_trace(app, num_requests):
    row = ROUTES_CSV.splitlines()[2].replace(b",100000,", f",{num_requests},".encode(), 1) + b"\n"
    app.file_uploader(key="routes_upload").set_value(("big.csv", HEADER + row, "text/csv")).run()
    _no_trace(app)
    if num_requests == "1e30":
        assert any("num_requests" in m and "1e+09" in m for m in _messages(app)), _messages(app)


def test_a_deeply_nested_scenario_is_refused_with_a_message(app):
    deep = b"[" * 100_000 + b"]" * 100_000
    app.file_uploader(key="scenario_upload").set_value(("deep.json", deep, "application/json")).run()
    _no_trace(app)
    assert any("deep.json" in m for m in _messages(app)), _messages(app)


# A NUL byte in a file name is refused by Streamlit's own runtime before app.py runs (and no browser
# sends one): out of the app's reach, so not tested here.
@pytest.mark.parametrize("name", ["a" * 300 + ".csv", "../../etc/x.csv", "sp ace;$(x).csv"])
def test_odd_log_file_names_and_year_9999_timestamps_give_messages(app, name):
    log = b"timestamp,prompt_tokens,completion_tokens\n" + b"".join(
        f"9999-12-31T23:59:{s:02d}Z,100,10\n".encode() for s in range(5))
    app.file_uploader(key="log_upload").set_value((name, log, "text/csv")).run()
    app.button(key="log_add").click().run()
    _no_trace(app)
    assert any("bad timestamp" in m for m in _messages(app)), _messages(app)


def test_a_20k_route_upload_is_refused_with_the_bound_named_and_never_planned(app):
    """The refusal comes before any planning: the routes table the app plans keeps its rows (how long the
    refusal takes is benchmarks/input_bounds.py's to print)."""
    from ui.scenario import MAX_APP_ROUTES
    before = len(app.session_state["routes_base"])
    row = ROUTES_CSV.splitlines()[1]
    rows = b"".join(row.replace(b"chat,", f"chat{i},".encode(), 1) + b"\n" for i in range(20_000))
    app.file_uploader(key="routes_upload").set_value(("many.csv", HEADER + rows, "text/csv")).run()
    _no_trace(app)
    assert any(f"up to {MAX_APP_ROUTES}" in m for m in _messages(app)), _messages(app)
    assert len(app.session_state["routes_base"]) == before < MAX_APP_ROUTES


@pytest.mark.parametrize("name", ["esc\x1b[31mred", "nul\x00byte"])
def test_a_route_named_with_esc_or_nul_plans_downloads_and_shows_escaped(app, downloads, name):
    """Issue 25 item 1: the workbook download built on the raw name (openpyxl refuses control characters)."""
    import io

    import openpyxl

    from tests.app.test_app import NO_EDITS, shown
    app.session_state["routes_editor"] = {**NO_EDITS, "edited_rows": {0: {"name": name}}}
    app.run()
    _no_trace(app)
    escaped = name.replace("\x1b", "\\x1b").replace("\x00", "\\x00")
    book = openpyxl.load_workbook(io.BytesIO(downloads["plan-current.xlsx"]))
    assert [c.value for c in book["plan"]["A"]][1] == escaped
    assert escaped in set(book["totals"]["A"][i].value for i in range(1, 5))
    assert shown(app, "runner-up")["route"].iloc[0] == escaped


def _texts(at: AppTest) -> list[str]:
    """Every table (as CSV) and message the page shows."""
    return [d.value.to_csv() for d in at.dataframe] + _messages(at) + [s.value for s in at.success]


@pytest.mark.parametrize("upload", [False, True])
def test_route_logs_show_relative_to_the_examples_never_the_machines_absolute_path(app, upload):
    """Issue 25: the `log` column showed the machine's absolute path of the bundled trace."""
    from tests.conftest import REPO
    if upload:
        app.file_uploader(key="routes_upload").set_value(("routes.csv", ROUTES_CSV, "text/csv")).run()
    app.toggle(key="routes_all_columns").set_value(True).run()
    _no_trace(app)
    editor = next(d.value for d in app.dataframe if "log" in d.value.columns and "rate_rps" in d.value.columns)
    assert "traces/azure_llm_2023_code.csv" in set(editor["log"])
    assert not [t for t in _texts(app) if str(REPO) in t]
    details = next(d.value for d in app.dataframe if "notes" in d.value.columns and "route" in d.value.columns)
    notes = details.loc[details["route"] == "code-completion", "notes"].iloc[0]
    assert "could not be read" not in str(notes), notes  # still sized on its log
