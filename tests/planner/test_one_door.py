"""Issue 36, item 3: a curve's closed-form latency is taken through the door's analytic tier
(planner.latency.analytic) everywhere outside planner/engine and planner/latency, and nothing outside
planner/latency imports the simulator (the one-latency-door import contract covers the packages; this covers
app.py and measure/ too); each check fails on a call around the door."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from planner.engine.curves import Curve
from planner.latency.analytic import STATISTIC, TIER_ANALYTIC, Offline, Rounds, Steady, analytic
from tests.conftest import bundled_catalog

ROOT = Path(__file__).resolve().parents[2]
BYPASS = re.compile(r"\.predict_(concurrency|offline|rounds)\(")
INSIDE = ("planner/engine/", "planner/latency/")


def sources() -> list[Path]:
    return [*ROOT.glob("planner/**/*.py"), *ROOT.glob("ui/**/*.py"), ROOT / "app.py", *ROOT.glob("measure/**/*.py")]


def bypasses(paths: list[Path], root: Path = ROOT) -> list[str]:
    out = []
    for path in paths:
        relative = path.relative_to(root).as_posix()
        if relative.startswith(INSIDE):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if BYPASS.search(line.split("#", 1)[0]):
                out.append(f"{relative}:{number}: {line.strip()}")
    return out


def simulator_imports(paths: list[Path], root: Path = ROOT) -> list[str]:
    """Where a module outside planner/latency imports planner.latency.simulate (however spelled)."""
    out = []
    for path in paths:
        relative = path.relative_to(root).as_posix()
        if relative.startswith("planner/latency/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import | ast.ImportFrom) else []
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if (module == "planner.latency.simulate" or (module == "planner.latency" and "simulate" in names)
                    or any(n.startswith("planner.latency.simulate") for n in names if module is None)):
                out.append(f"{relative}:{node.lineno}")
    return out


def test_nothing_outside_the_latency_room_imports_the_simulator(tmp_path):
    assert simulator_imports(sources()) == []
    probe = tmp_path / "app.py"
    probe.write_text("import os\nfrom planner.latency import (\n    predict,\n    simulate,\n)\n", encoding="utf-8")
    assert simulator_imports([probe], tmp_path) == ["app.py:2"]


def test_no_closed_form_prediction_goes_around_the_door():
    assert bypasses(sources()) == []


def test_the_check_finds_a_call_around_the_door(tmp_path):
    """The scan is not vacuous: the curves' own definitions match it, and a caller outside would be named."""
    inside = [p for p in sources() if p.relative_to(ROOT).as_posix().startswith("planner/latency/")]
    assert any(BYPASS.search(p.read_text(encoding="utf-8")) for p in inside)
    probe = tmp_path / "ui" / "probe.py"
    probe.parent.mkdir()
    probe.write_text("pred = curve.predict_concurrency(1, 2, 3)\n", encoding="utf-8")
    assert bypasses([probe], tmp_path) == ["ui/probe.py:1: pred = curve.predict_concurrency(1, 2, 3)"]


@pytest.fixture(scope="module")
def curve() -> Curve:
    catalog = bundled_catalog()
    return next(c for k, c in catalog.curves.items()
                if (k.engine, k.gpu, k.precision, k.model) == ("vllm", "h200", "fp8", "llama-3.1-8b"))


def test_the_analytic_tier_answers_each_load_as_the_curve_does_and_says_it_gives_means(curve):
    for load, direct in ((Offline(1000, 200, 64), curve.predict_offline(1000, 200, 64)),
                         (Steady(1000, 200, 16), curve.predict_concurrency(1000, 200, 16)),
                         (Rounds(1000, 200, 16, 64), curve.predict_rounds(1000, 200, 16, 64))):
        answer = analytic(curve, load)
        assert answer.prediction == direct and answer.load == load
        assert (answer.tier, answer.statistic) == (TIER_ANALYTIC, STATISTIC) == ("analytic", "mean")
