"""Issue 25: route names with line breaks, quotes, separators, spreadsheet formulas and control characters,
through every output: plan CSV, options CSV, fleet CSV, workbook, deployment files and the console.

The policy (docs/formats.md, routes): a route name's control characters are replaced by visible escapes when
the routes are loaded (`\\x1b`, `\\x0a`, `\\u2028`; backslashes doubled in such a name), so every output carries
the same printable name; CSV cells stay one physical row each and text that a spreadsheet would run as a
formula gets a leading apostrophe.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import openpyxl
import pandas as pd
import pytest
import yaml

from fleetfacts.schema import load_plan_rows, unescape_formula
from tests.conftest import REPO
from tests.planner.fakes import batch_route, online_route, write_synthetic_inputs

# name in the routes file -> the name every output carries (written out by hand: the expected escapes).
NAMES = {
    "new\nline": "new\\x0aline",
    "crlf\r\nx": "crlf\\x0d\\x0ax",
    "tab\tx": "tab\\x09x",
    "esc\x1b[31mred": "esc\\x1b[31mred",
    "nul\x00x": "nul\\x00x",
    "bell\x07x": "bell\\x07x",
    "del\x7fx": "del\\x7fx",
    "nel\x85x": "nel\\x85x",
    "ls\u2028x": "ls\\u2028x",
    "back\\slash\x1b": "back\\\\slash\\x1b",
    'quo"te': 'quo"te',
    "com,ma": "com,ma",
    "semi;colon": "semi;colon",
    "=1+2": "=1+2",
    "+cmd": "+cmd",
    "-2+3": "-2+3",
    "@SUM(A1)": "@SUM(A1)",
    "-inf": "-inf",  # Python reads these as numbers, a spreadsheet as formulas
    "+nan": "+nan",
    "+infinity": "+infinity",
}
FORMULA = ("=", "+", "-", "@")
# Control characters no output may carry raw (the line feed ending each CSV row or console line aside).
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict:
    """Plan (with options and workbook), fleet and deployment files of a routes file of every hostile name."""
    root = tmp_path_factory.mktemp("names")
    data = write_synthetic_inputs(root)
    flags = ["--profiles", str(data["profiles"]), "--prices", str(data["prices"]), "--ops", str(data["ops"])]
    routes = root / "routes.csv"
    rows = [online_route(name, rate_rps=1 + i) if i % 2 else batch_route(name) for i, name in enumerate(NAMES)]
    pd.DataFrame(rows).to_csv(routes, index=False)
    plan = _run("plan", "--routes", str(routes), "--out", str(root / "plan.csv"), "--no-simulate", "--options-out",
                str(root / "options.csv"), "--xlsx", str(root / "plan.xlsx"), *flags)
    assert plan.returncode == 0, plan.stderr
    fleet = _run("fleet", "--routes", str(routes), "--out", str(root / "fleet.csv"), "--no-simulate", *flags)
    assert fleet.returncode == 0, fleet.stderr
    for fmt in ("vllm", "k8s"):  # the synthetic plan runs every route on vllm
        deploy = _run("deploy", "--plan", str(root / "plan.csv"), "--format", fmt, "--out", str(root / "deploy"))
        assert deploy.returncode == 0, deploy.stderr
    return {"root": root, "plan_out": plan.stdout, "fleet_out": fleet.stdout}


def _csv_rows(path: Path) -> pd.DataFrame:
    """The CSV's rows after its '#' lines, every physical line one row (no quoted line breaks)."""
    text = path.read_text(encoding="utf-8")
    assert not RAW.search(text), [m.group() for m in RAW.finditer(text)][:5]
    lines = text.split("\n")
    comments = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    body = [line for line in lines[comments:] if line]
    frame = pd.read_csv(io.StringIO("\n".join(body)), dtype=str, keep_default_na=False)
    assert len(frame) == len(body) - 1
    return frame


def _check_names(values: list[object], every: bool = True) -> None:
    names = {str(unescape_formula(v)) for v in values}
    assert names <= set(NAMES.values()) | {"fleet total"}, names - set(NAMES.values())
    if every:
        assert set(NAMES.values()) <= names


@pytest.mark.parametrize("file,column", [("plan.csv", "route"), ("options.csv", "route")])
def test_plan_and_options_csv_keep_one_row_per_line_and_printable_names(outputs, file, column):
    frame = _csv_rows(outputs["root"] / file)
    _check_names(list(frame[column]))
    for raw in frame[column]:
        assert not raw.startswith(FORMULA), raw  # a spreadsheet would run it: escaped with an apostrophe
    assert set(load_plan_rows(outputs["root"] / "plan.csv")["route"]) == set(NAMES.values())


def test_fleet_csv_keeps_one_row_per_line_and_printable_names(outputs):
    frame = _csv_rows(outputs["root"] / "fleet.csv")
    served = ";".join(frame["routes"])
    assert all(name in served for name in ("new\\x0aline", "esc\\x1b[31mred", "crlf\\x0d\\x0ax"))


def test_workbook_cells_are_printable_text(outputs):
    book = openpyxl.load_workbook(outputs["root"] / "plan.xlsx")
    for sheet in book.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                assert not (isinstance(cell.value, str) and RAW.search(cell.value)), (sheet.title, cell.value)
    _check_names([c.value for c in book["plan"]["A"][1:]])
    _check_names([c.value for c in book["totals"]["A"][1:]])


def test_deployment_files_carry_printable_names_and_parse(outputs):
    files = sorted((outputs["root"] / "deploy").iterdir())
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not RAW.search(text), (path.name, text)
        if path.suffix == ".sh":
            assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0, text
        elif path.name.endswith(".k8s.yaml") or "kind:" in text:
            docs = [d for d in yaml.safe_load_all(text) if d]
            route = docs[0]["metadata"].get("annotations", {}).get("fleetplan.io/route")
            assert route is None or route in set(NAMES.values()), route


@pytest.mark.parametrize("run", ["plan_out", "fleet_out"])
def test_console_shows_names_escaped(outputs, run):
    out = outputs[run]
    assert not RAW.search(out), [m.group() for m in RAW.finditer(out)][:5]
    assert "new\\x0aline" in out or run == "fleet_out"
    assert "esc\\x1b[31mred" in out
