"""scripts/output_diff.py (issue 36, item 6): outputs at another commit compared modulo renamed columns."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "output_diff.py"
spec = importlib.util.spec_from_file_location("output_diff", SCRIPT)
assert spec is not None and spec.loader is not None
output_diff = importlib.util.module_from_spec(spec)
spec.loader.exec_module(output_diff)


def test_a_renamed_column_and_a_new_one_are_not_changes_and_a_changed_cell_is():
    before = pd.DataFrame({"route": ["a", "b"], "operating_concurrency": [3.0, 4.0], "cost": [1.0, 2.0]})
    after = pd.DataFrame({"route": ["a", "b"], "in_flight_p99": [3.0, 4.0], "cost": [1.0, 2.0 * (1 + 1e-9)],
                          "new": [0, 1]})
    cells, only = output_diff.table_differences("plan.csv", before, after, rtol=1e-6)
    assert cells == [] and only == ["plan.csv: column 'new' only now"]
    after.loc[1, "in_flight_p99"] = 5.0
    cells, _ = output_diff.table_differences("plan.csv", before, after, rtol=1e-6)
    assert cells == ["plan.csv row 1 in_flight_p99: 4.0 -> 5.0"]


def test_predict_answers_compare_by_key():
    before = {"predict, x": {"ttft_ms": 10.0, "note": ""}}
    after = {"predict, x": {"ttft_ms": 10.0 * (1 + 1e-9), "note": "", "tier": "analytic"}}
    assert output_diff.differences(before, after, 1e-6) == ([], ["predict, x: key 'tier' only now"])
    after["predict, x"]["ttft_ms"] = 11.0
    assert output_diff.differences(before, after, 1e-6)[0] == ["predict, x ttft_ms: 10.0 -> 11.0"]
