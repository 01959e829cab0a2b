"""docs/validation.md's generated blocks are what scripts/validation_figures.py writes from the bundled profiles."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "validation.md"


def _script():
    spec = importlib.util.spec_from_file_location("validation_figures", ROOT / "scripts" / "validation_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()


def _assert_fresh(names: list[str]) -> None:
    on_page = SCRIPT.blocks_in(DOC.read_text(encoding="utf-8"))
    for name, body in SCRIPT.render(names).items():
        assert on_page.get(name) == body, f"docs/validation.md block {name!r} is stale: run python " \
                                          f"scripts/validation_figures.py --only {name}"


def test_every_block_on_the_page_is_one_the_script_writes_and_back():
    assert set(SCRIPT.blocks_in(DOC.read_text(encoding="utf-8"))) == set(SCRIPT.BLOCKS)


def test_the_cheap_blocks_are_up_to_date():
    _assert_fresh(list(SCRIPT.CHEAP))


# `validate --latency` refits the server model once per row (about 60 s on 2 cores): its block is regenerated with
# the script (docs/development.md) and not re-checked here, to keep the suite's time.
UNCHECKED = ("latency",)


@pytest.mark.slow
def test_the_slow_blocks_are_up_to_date():
    _assert_fresh([name for name in SCRIPT.SLOW if name not in UNCHECKED])


def test_replacing_a_block_keeps_the_prose_around_it():
    text = "intro\n" + SCRIPT.BEGIN.format(name="long") + "\nold\n" + SCRIPT.END + "\noutro\n"
    assert SCRIPT.replace_blocks(text, {"long": "new\n"}) == text.replace("old", "new")
    with pytest.raises(ValueError, match="no generated block named latency"):
        SCRIPT.replace_blocks(text, {"latency": "x\n"})
