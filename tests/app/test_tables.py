"""ui.tables: the decision columns apart from the details, break-even text, no "None" on screen."""

from __future__ import annotations

import math

import pandas as pd

from ui import tables


def test_break_even_is_a_number_never_or_empty():
    plan = pd.DataFrame({"status": ["ok", "ok", "ok", "infeasible"],
                         "runner_up": ["b", "b", "", ""],
                         "breakeven_updates_per_month": [3.25, math.nan, math.nan, math.nan]})
    assert tables.breakeven_text(plan) == ["3.2", "never", "", ""]


def test_styled_shows_missing_values_as_empty_cells_and_formats_money():
    frame = pd.DataFrame({"route": ["a", "b"], "engine": ["vllm", None], "GPUs": [2, math.nan],
                          "$/month": [1234.5, math.nan]})
    html = tables.styled(frame).to_html()
    assert "None" not in html and "nan" not in html
    assert "$1,234" in html and ">2<" in html


def test_comparison_formats_cover_gpus_and_dollars():
    frame = pd.DataFrame(columns=["route", "now: engine / GPU", "now: GPUs", "now: $/month"])
    assert tables.comparison_formats(frame) == {"now: GPUs": tables.COUNT, "now: $/month": tables.DOLLARS}


def test_styled_tables_neutralise_formulas_in_their_data():
    """The table toolbar's CSV export takes the cell data: a formula-looking name must be text there."""
    frame = pd.DataFrame({"route": ["=HYPERLINK(\"x\")", "+cmd|' /C calc'!A0", "@SUM(1)", "\t=1", "chat"],
                          "GPUs": [1, 2, 3, 4, 5]})
    data = tables.styled(frame).data
    assert list(data["route"]) == ["'=HYPERLINK(\"x\")", "'+cmd|' /C calc'!A0", "'@SUM(1)", "'\t=1", "chat"]
    assert list(data["GPUs"]) == [1, 2, 3, 4, 5]
