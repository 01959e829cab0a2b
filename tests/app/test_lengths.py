"""The request-length view (ui.lengths, the "Request lengths" tab) on the bundled long-prompt example."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from streamlit.testing.v1 import AppTest

from planner.latency import idle_ttft_infeasible
from planner.planning.plan import make_plan
from planner.planning.route_table import load_routes
from planner.sizing.assumptions import Assumptions
from tests.conftest import bundled_catalog
from ui import lengths

REPO = Path(__file__).resolve().parents[2]
LONG_ROUTES = REPO / "examples" / "routes-long-h100.csv"
TIGHT_TTFT_MS = 2000.0  # some of the example's prompts cannot make it on an idle H100 (tests/planner/test_idle_ttft.py)


def test_the_lengths_of_the_long_example_against_its_curve_and_ttft_target(tmp_path):
    routes = pd.read_csv(LONG_ROUTES).assign(ttft_slo_ms=TIGHT_TTFT_MS,
                                             log=str(REPO / "examples" / "traces" / "synthetic_long_prompts.csv"))
    routes.to_csv(tmp_path / "routes.csv", index=False)
    table = load_routes(tmp_path / "routes.csv")
    catalog = bundled_catalog()
    plan_row = make_plan(table, catalog, Assumptions()).plan.iloc[0].to_dict()
    found = lengths.route_lengths(table.iloc[0].to_dict(), plan_row, catalog.curves)
    curve = next(c for k, c in catalog.curves.items() if k.gpu == "h100" and k.engine_version == plan_row["engine_version"]
                 and k.model == "llama-3.1-8b" and k.precision == "bf16" and k.tp == 1 and k.config == "default")
    assert found is not None and found.measured_input_max == curve.covered.input_len[1]
    assert found.idle_infeasible == int(idle_ttft_infeasible(curve, found.input_len, TIGHT_TTFT_MS).sum()) > 0
    assert f"{found.idle_infeasible:,} requests" in lengths.idle_text(found)
    quantiles = lengths.quantile_table(found)
    assert quantiles.loc["prompt", "max"] == found.input_len.max()
    assert quantiles.loc["output", "beyond it (physics)"] == np.count_nonzero(found.output_len > curve.covered.output_len[1])
    hist = lengths.histogram_table(found.output_len, found.measured_output_max)
    assert hist["requests"].sum() == found.output_len.size and set(hist["region"]) == {"measured", "physics"}
    assert lengths.lengths_chart(found).to_dict()["hconcat"]


def test_a_route_without_a_log_has_no_lengths_view():
    row = load_routes(REPO / "examples" / "routes.csv").query("log.isna() or log == ''", engine="python")
    assert lengths.route_lengths(row.iloc[0].to_dict(), None, {}) is None


def test_the_request_lengths_tab_renders_for_the_long_example():
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    at.file_uploader(key="routes_upload").set_value(("routes-long-h100.csv", LONG_ROUTES.read_bytes(), "text/csv")).run()
    at.session_state["chart_tab"] = "Request lengths"
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    charts = at.get("vega_lite_chart")
    assert len(charts) == 1 and "log" in json.dumps(json.loads(charts[0].proto.spec))
    assert any("p95" in t.value.columns for t in at.table)
