"""The typed plan row (planner.sizing.plan_row, issue 23): its fields are the PLAN schema's columns, and a
plan made from a real routes file reaches its CSV field for field, typed as the schema declares."""

from __future__ import annotations

import csv
import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from fleetfacts.errors import InputError
from fleetfacts.schema import MAX_REPLICAS, PLAN
from planner.planning.plan import make_plan
from planner.planning.plan_files import read_plan, write_plan
from planner.planning.route_table import load_routes
from planner.sizing.plan_row import PLAN_DECIMALS, PlanRow, plan_frame, plan_rows
from tests.conftest import REPO, bundled_catalog

# The Python type a PlanRow field holds for each kind of PLAN column (blank: '' text, None whole numbers, NaN numbers).
FIELD_TYPES = {"str": "str", "slug": "str", "enum": "str", "int": "int | None", "float": "float"}

def frame_kind(dtype: object) -> str:
    """What a DataFrame column of this dtype holds: text, whole numbers (nullable) or numbers."""
    if str(dtype) == "Int64":
        return "int"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    return "str" if pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype) else str(dtype)


TEXT = {"str": "str", "slug": "str", "enum": "str", "int": "int", "float": "float"}


def test_the_row_has_a_field_for_every_schema_column_and_no_other():
    assert [f.name for f in dataclasses.fields(PlanRow)] == PLAN.names


def test_each_field_is_typed_as_its_column_is_declared():
    for field, column in zip(dataclasses.fields(PlanRow), PLAN.columns, strict=True):
        assert field.type == FIELD_TYPES[column.kind], column.name
        has_default = field.default is not dataclasses.MISSING
        assert has_default is not column.required, f"{column.name}: required columns have no default"


@pytest.fixture(scope="module")
def real_plan(tmp_path_factory):
    """The plan of two example routes (one online, one batch; simulation-checked as `planner plan` does) and a
    route of a model no profile covers, written to a CSV; (result, path)."""
    folder = tmp_path_factory.mktemp("plan")
    examples = pd.read_csv(REPO / "examples" / "routes.csv", dtype=str, keep_default_na=False)
    picked = examples[examples["name"].isin(["chat", "summarise-batch"])]
    unknown = picked[picked["name"] == "chat"].assign(name="unknown-model", model="no-such-model")
    routes = folder / "routes.csv"
    pd.concat([picked, unknown]).to_csv(routes, index=False)
    result = make_plan(load_routes(routes), bundled_catalog(), check_by_simulation=True)
    path = folder / "plan.csv"
    write_plan(result, path)
    return result, path


def test_the_plan_carries_one_row_per_route_ok_and_infeasible(real_plan):
    result, _ = real_plan
    assert [(r.route, r.status) for r in result.rows] == [
        ("chat", "ok"), ("summarise-batch", "ok"), ("unknown-model", "infeasible")]
    assert all(isinstance(r, PlanRow) for r in result.rows)


def test_every_field_reaches_its_csv_column(real_plan):
    result, path = real_plan
    with open(path, newline="", encoding="utf-8") as handle:
        header, *cells = list(csv.reader(handle))
    assert header == PLAN.names
    assert len(cells) == len(result.rows)
    for row, line in zip(result.rows, cells, strict=True):
        for column, text in zip(PLAN.columns, line, strict=True):
            _assert_cell(getattr(row, column.name), text, column.kind, PLAN_DECIMALS.get(column.name), column.name)


def _assert_cell(value: object, text: str, kind: str, digits: int | None, name: str) -> None:
    """The CSV text of one field: blank for a blank field, else the field as its kind writes it."""
    where = f"{name}: field {value!r}, CSV {text!r}"
    if kind == "int":
        assert value is None or type(value) is int, where
        assert text == ("" if value is None else str(value)), where
    elif kind == "float":
        assert type(value) is float, where
        if math.isnan(value):
            assert text == "", where
        else:
            assert digits is not None, f"{name}: a number column the plan files do not round"
            assert float(text) == np.round(value, digits), where
    else:
        assert type(value) is str, where
        assert text == value, where  # no text of this plan starts with a formula character


def test_a_plan_read_back_gives_the_rows_as_files_round_them(real_plan):
    result, path = real_plan
    frame, _ = read_plan(path)
    for column in PLAN.columns:
        assert frame_kind(frame[column.name].dtype) == TEXT[column.kind], column.name
    back = plan_rows(frame)
    assert back == plan_rows(plan_frame(result.rows, rounded=True))
    assert [r.route for r in back] == [r.route for r in result.rows]


def test_the_frame_has_the_schema_columns_typed_in_order(real_plan):
    result, _ = real_plan
    frame = plan_frame(result.rows)
    assert list(frame.columns) == PLAN.names
    assert [frame_kind(frame[c.name].dtype) for c in PLAN.columns] == [TEXT[c.kind] for c in PLAN.columns]
    assert plan_rows(frame) == result.rows


def test_a_row_outside_its_schema_is_refused_naming_route_and_column():
    with pytest.raises(InputError, match=r"route 'r', column 'replicas': expected a value <= "):
        PlanRow("r", "ok", replicas=int(MAX_REPLICAS) + 1)
    with pytest.raises(InputError, match=r"route 'r', column 'status': expected one of ok, infeasible"):
        PlanRow("r", "maybe")


def test_a_row_holds_plain_python_values():
    row = PlanRow("r", "OK", engine="VLLM", tp=np.int64(2), replicas=3.0, utilisation=np.float64(0.5),  # type: ignore[arg-type]
                  sim_replicas=math.nan)  # type: ignore[arg-type]
    assert (row.status, row.engine) == ("ok", "vllm")
    assert type(row.tp) is int and type(row.replicas) is int and row.sim_replicas is None
    assert type(row.utilisation) is float
