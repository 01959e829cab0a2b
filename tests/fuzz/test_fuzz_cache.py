"""Fuzzing the fit cache (issue 47 §6): whatever is done to its entries (bytes mutated, values edited with the
key kept, a named pipe in an entry's place), a fit reads back the same table and the same curves as a cold
one, or computes them again; never another answer, an exception or a hang.

Examples per test: FUZZ_EXAMPLES (default 15), as tests/fuzz/test_fuzz_inputs.py.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.engine import fitcache
from planner.engine.curves import fit_curves, load_profiles
from tests.conftest import REPO
from tests.fuzz.test_fuzz_inputs import FUZZ, MUTATION, mutate

PROFILE = REPO / "profiles" / "measured" / "h200" / "vllm-llama-3.1-8b-bf16-tp1" / "profile.csv"
TAMPERING = st.sampled_from(["bytes", "value", "fifo", "keep"])


def _answers(folder: Path, cache: Path) -> tuple:
    """The validated table and each curve's fitted parameters, with FLEETPLAN_CACHE_DIR=cache."""
    old = os.environ.get(fitcache.CACHE_DIR_ENV)
    os.environ[fitcache.CACHE_DIR_ENV] = str(cache)
    try:
        table = load_profiles(folder)
        fits = {key.label(): curve.fit.theta.tolist() for key, curve in fit_curves(table).items()}
    finally:
        if old is None:
            del os.environ[fitcache.CACHE_DIR_ENV]
        else:
            os.environ[fitcache.CACHE_DIR_ENV] = old
    return table, fits


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    root = tmp_path_factory.mktemp("cache-fuzz")
    folder = root / "profiles"
    folder.mkdir()
    shutil.copy(PROFILE, folder / "profile.csv")
    answers = _answers(folder, root / "cache")
    entries = sorted(p.relative_to(root / "cache") for p in (root / "cache").rglob("*") if p.is_file())
    assert {p.suffix for p in entries} == {".json", ".parquet"}
    return folder, root / "cache", answers, entries


def _edit_value(path: Path, factor: float) -> None:
    """Scale every number of the entry's value, its key (and a JSON entry's stored digest) kept."""
    if path.suffix == ".json":
        stored = json.loads(path.read_text(encoding="utf-8"))
        stored["value"]["theta"] = [x * factor for x in stored["value"]["theta"]]
        path.write_text(json.dumps(stored), encoding="utf-8")
        return
    import pyarrow.compute as pc  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    table = pq.read_table(path)
    column = table.schema.get_field_index("output_tok_per_s")
    edited = table.set_column(column, "output_tok_per_s", pc.multiply(table["output_tok_per_s"], factor))
    pq.write_table(edited.replace_schema_metadata(table.schema.metadata), path)


def _tamper(path: Path, how: str, mutations: list, factor: float) -> None:
    if how == "bytes":
        text = path.read_bytes().decode("latin-1")
        path.write_bytes(mutate(text, mutations).encode("latin-1", errors="replace"))
    elif how == "value":
        _edit_value(path, factor)
    elif how == "fifo":
        path.unlink()
        os.mkfifo(path)


@FUZZ
@given(st.lists(st.tuples(TAMPERING, st.lists(MUTATION, min_size=1, max_size=3)), min_size=1, max_size=4),
       st.floats(0.5, 3.0).filter(lambda f: f != 1.0))
def test_a_tampered_cache_gives_the_cold_answers_or_none(warm, tampering, factor):
    folder, cache, (table, fits), entries = warm
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "cache"
        shutil.copytree(cache, copy)
        for entry, (how, mutations) in zip(entries, tampering, strict=False):  # the first len(tampering) entries
            _tamper(copy / entry, how, mutations, factor)
        got_table, got_fits = _answers(folder, copy)
    assert got_table.equals(table) and got_fits == fits
