"""Every module path the code's texts and the docs name exists: `planner.latency.simulate` (a module, or a
module's attribute) and `planner/latency/simulate.py` (a file).  Modules move; their names in help texts,
notes and docs must move with them."""

from __future__ import annotations

import importlib
import re

import pytest

from tests.conftest import REPO

PACKAGES = ("fleetfacts", "measure", "planner", "ui")
# A dotted name that starts a word (not `docs/measure.md`, not `x.planner.y`), and a .py path.
DOTTED = re.compile(r"(?<![\w./-])((?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_]\w*)+)")
FILE = re.compile(r"(?<![\w./-])((?:" + "|".join(PACKAGES) + r")/[\w/]+\.py)\b")
TEXTS = sorted([*(REPO / p for p in ("README.md", "app.py")), *(REPO / "docs").glob("*.md"),
                *(f for folder in (*PACKAGES, "benchmarks", "scripts", "tools") for f in (REPO / folder).rglob("*.py"))])


def _resolves(name: str) -> bool:
    """True when `name` is a module, or a module followed by attributes it has."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


# A file name (`[measure.md](measure.md)`) is not a dotted module name.
FILE_SUFFIXES = (".md", ".py", ".csv", ".json", ".yaml", ".sh", ".txt")


def _named(pattern: re.Pattern[str], skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    return sorted({(str(path.relative_to(REPO)), match) for path in TEXTS
                   for match in pattern.findall(path.read_text(encoding="utf-8")) if not match.endswith(skip)})


@pytest.mark.parametrize(("where", "name"), _named(DOTTED, skip=FILE_SUFFIXES))
def test_a_named_module_exists(where, name):
    assert _resolves(name), f"{where} names {name}, which is no module (or attribute) of the project"


@pytest.mark.parametrize(("where", "path"), _named(FILE))
def test_a_named_file_exists(where, path):
    assert (REPO / path).is_file(), f"{where} names {path}, which is no file of the project"
