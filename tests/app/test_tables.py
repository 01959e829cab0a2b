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


def test_the_fleet_table_names_the_routes_each_deployment_serves():
    deployments = pd.DataFrame([
        {"deployment": "d1", "kind": "shared", "model": "llama-3.1-8b", "engine": "vllm", "engine_version": "0.26.0",
         "engine_config": "tuned", "gpu": "h200", "precision": "fp8", "tp": 1, "slo": "p95 TTFT 300 ms",
         "routes": "chat 1.00; code 1.00", "replicas_min": 2, "replicas_max": 4, "replicas_by_hour": "",
         "reserved_replicas": 2, "gpus_max": 4, "pricing": "", "gpu_usd_per_month": 8146.8, "sim_attainment": 0.9962,
         "notes": ""},
        {"deployment": "d2", "kind": "batch", "model": "llama-3.1-8b", "engine": "vllm", "engine_version": "0.26.0",
         "engine_config": "default", "gpu": "h200", "precision": "fp8", "tp": 1, "slo": "", "routes": "nightly 1.00",
         "replicas_min": 1, "replicas_max": 1, "replicas_by_hour": "", "reserved_replicas": 0, "gpus_max": 1,
         "pricing": "", "gpu_usd_per_month": 235.46, "sim_attainment": None, "notes": ""},
    ])
    table = tables.fleet_table(deployments)
    assert list(table.columns) == list(tables.FLEET_HEADERS.values())
    assert list(table["routes (share of requests)"]) == ["chat 1.00; code 1.00", "nightly 1.00"]
    assert list(table["engine"]) == ["vllm 0.26.0 [tuned]", "vllm 0.26.0"]
    html = tables.styled(table, tables.FLEET_FORMATS).to_html()
    assert "99.6%" in html and "$8,147" in html and "None" not in html and "nan" not in html


def test_the_total_range_adds_one_curves_routes_in_step_and_different_curves_in_quadrature():
    curve = {"engine": "vllm", "engine_version": "0.26.0", "gpu": "h200", "model": "m", "precision": "bf16", "tp": 1,
             "engine_config": "default"}
    rows = [dict(curve, gpus=10, gpus_low=7, gpus_high=14), dict(curve, gpus=10, gpus_low=7, gpus_high=14),
            dict(curve, model="other", gpus=10, gpus_low=6, gpus_high=18)]
    total, low, high = tables.total_range(pd.DataFrame(rows), "gpus", "gpus_low", "gpus_high")
    assert total == 30
    # one curve's two routes move together (3 + 3 down, 4 + 4 up); the other curve apart (4 down, 8 up)
    assert low == 30 - math.hypot(6, 4) and high == 30 + math.hypot(8, 8)
    # narrower than every route at its extreme, never narrower than the widest single curve
    assert 20 < low < 30 - 6 and 30 + 8 < high < 46
    from fleetfacts.schema import PLAN
    assert set(tables.CURVE_COLUMNS) <= set(PLAN.names)  # a curve is named by the plan's own columns


def test_latency_beside_the_slo_reads_value_interval_and_target():
    from ui.tables import latency_line, latency_vs_slo

    row = {"status": "ok", "traffic": "online", "ttft_pred_ms": 205.4, "ttft_pred_ms_low": 150.2,
           "ttft_pred_ms_high": 260.0, "tpot_pred_ms": 8.44, "tpot_pred_ms_low": float("nan"),
           "tpot_pred_ms_high": float("nan")}
    route = {"slo_percentile": 95.0, "ttft_slo_ms": 300.0, "tpot_slo_ms": 30.0}
    assert latency_vs_slo(row, route) == "205 / 300 · 8.4 / 30"
    assert latency_vs_slo(row, route, interval=True) == "205 (150–260) / 300 · 8.4 / 30"
    assert latency_vs_slo(row, None) == "205 · 8.4"
    assert latency_line(row, route) == "p95 TTFT · TPOT, ms (90% interval) / SLO: 205 (150–260) / 300 · 8.4 / 30"
    assert latency_vs_slo({**row, "traffic": "batch"}, route) == ""
    assert latency_vs_slo({**row, "status": "infeasible"}, route) == ""
