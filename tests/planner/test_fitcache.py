"""The on-disk fit cache: a second fit of the same rows is read back, a changed row or a corrupt entry is
fitted again, and the answers are the same as without the cache."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from fleetfacts.schema import PROFILE_GROUP
from planner.engine import curves as curves_module
from planner.engine import fitcache
from planner.engine.curves import fit_curves, leave_one_out, load_profiles
from planner.latency import server_fit
from tests.conftest import REPO

GROUP = "vllm-llama-3.1-8b-bf16-tp1-server-openloop"


@pytest.fixture
def server_group(tmp_path, monkeypatch):
    monkeypatch.setenv(fitcache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    profiles = load_profiles()
    rows = profiles[profiles["file"].astype(str).str.contains(GROUP)]
    keys = rows[list(PROFILE_GROUP)].drop_duplicates()
    group = profiles.merge(keys, on=list(PROFILE_GROUP))
    return group, fit_curves(group)


def _front_end(curves, group):
    (key,) = curves
    return server_fit.with_server_latency(curves, group)[key].front_end


def test_a_second_fit_is_read_back_and_equals_the_fit(server_group, monkeypatch, tmp_path):
    group, curves = server_group
    first = _front_end(curves, group)
    entries = list((tmp_path / "cache" / "server-fit").glob("*.json"))
    assert len(entries) == 1 and first is not None and first.basis.startswith("measured")
    with monkeypatch.context() as patched:
        patched.setattr(server_fit, "calibrate", lambda *a: pytest.fail("fitted again instead of read back"))
        assert _front_end(curves, group) == first
    monkeypatch.setenv(fitcache.NO_CACHE_ENV, "1")   # no cache: the same answer, fitted
    assert dataclasses.asdict(_front_end(curves, group)) == pytest.approx(dataclasses.asdict(first))


def test_a_corrupt_entry_is_fitted_again_and_rewritten(server_group, tmp_path):
    group, curves = server_group
    first = _front_end(curves, group)
    (entry,) = (tmp_path / "cache" / "server-fit").glob("*.json")
    entry.write_text('{"key": "', encoding="utf-8")
    assert _front_end(curves, group) == first
    assert json.loads(entry.read_text(encoding="utf-8"))["value"]["basis"] == first.basis


def test_a_changed_row_is_another_entry(server_group, tmp_path):
    group, curves = server_group
    _front_end(curves, group)
    changed = group.copy()
    rate = changed["mode"] == "rate"
    changed.loc[rate.idxmax(), "ttft_p50_ms"] = float(changed.loc[rate.idxmax(), "ttft_p50_ms"]) * 2
    _front_end(fit_curves(changed), changed)
    assert len(list((tmp_path / "cache" / "server-fit").glob("*.json"))) == 2


def test_the_code_version_is_a_digest_of_the_source():
    assert len(fitcache.code_version()) == 64 and fitcache.code_version() == fitcache.code_version()


def test_an_edited_fact_file_is_another_code_version(tmp_path, monkeypatch):
    """A leave-one-out entry is keyed by its profile rows; the GPU and model facts it also reads are in the
    version, so editing gpu_specs.csv never reads back errors computed with the old datasheet."""
    (tmp_path / "planner").mkdir()
    (tmp_path / "planner" / "m.py").write_text("x = 1\n")
    facts = tmp_path / "fleetfacts" / "data"
    facts.mkdir(parents=True)
    (facts / "gpu_specs.csv").write_text("gpu,memory_gib\nh200,141\n")
    monkeypatch.setattr(fitcache, "ROOT", tmp_path)
    before = fitcache.code_version.__wrapped__()
    (facts / "gpu_specs.csv").write_text("gpu,memory_gib\nh200,140\n")
    assert fitcache.code_version.__wrapped__() != before


def test_validated_profiles_are_read_back_and_a_changed_or_corrupt_file_is_validated_again(tmp_path, monkeypatch):
    monkeypatch.setenv(fitcache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    source = next(p for p in sorted((fitcache.ROOT / "profiles" / "measured").rglob("profile.csv"))
                  if ",ok," in p.read_text())  # a profile with fitted rows (one of suspect rows only loads empty)
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "profile.csv").write_bytes(source.read_bytes())
    first = load_profiles(folder)
    (entry,) = (tmp_path / "cache" / "profiles").glob("*.parquet")
    with monkeypatch.context() as patched:
        patched.setattr("planner.engine.curves.load_tables", lambda *a: pytest.fail("validated again instead of read back"))
        assert load_profiles(folder).equals(first)
    entry.write_bytes(b"not a table")
    assert load_profiles(folder).equals(first)
    text = (folder / "profile.csv").read_text()
    (folder / "profile.csv").write_text(text.replace(",ok,", ",failed,", 1))
    assert len(load_profiles(folder)) == len(first) - 1


def test_an_entry_edited_or_copied_over_another_is_not_trusted(server_group, tmp_path):
    """The fault campaign's cases: a JSON entry whose value was set to null, a table entry copied over another
    entry's name (a different profile), and a write that fails: each is computed again, nothing is left behind."""
    group, curves = server_group
    first = _front_end(curves, group)
    (entry,) = (tmp_path / "cache" / "server-fit").glob("*.json")
    stored = json.loads(entry.read_text(encoding="utf-8"))
    entry.write_text(json.dumps({**stored, "value": None}), encoding="utf-8")
    assert _front_end(curves, group) == first
    measured = sorted((fitcache.ROOT / "profiles" / "measured").rglob("profile.csv"))
    tables = []
    for name, source in (("a", measured[0]), ("b", measured[1])):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "profile.csv").write_bytes(source.read_bytes())
        tables.append((folder, load_profiles(folder)))
    entries = sorted((tmp_path / "cache" / "profiles").glob("*.parquet"), key=os.path.getmtime)
    entries[1].write_bytes(entries[0].read_bytes())  # b's entry now holds a's table
    folder_b, table_b = tables[1]
    assert load_profiles(folder_b).equals(table_b)

    def full_disk(tmp):
        tmp.write_bytes(b"half")
        raise OSError(28, "No space left on device")

    fitcache._store(tmp_path / "cache" / "x.json", full_disk)
    assert not list((tmp_path / "cache").glob("*.tmp")) and not (tmp_path / "cache" / "x.json").exists()


def _fit(curves) -> tuple:
    (curve,) = curves.values()
    return curve.fit.theta.tolist(), curve.fit.cov.tolist(), curve.fit.sigma, curve.fit.free, curve.fit.n_obs


def test_a_curve_fit_is_read_back_exactly_and_a_corrupt_entry_is_fitted_again(server_group, monkeypatch, tmp_path):
    group, curves = server_group
    with monkeypatch.context() as patched:
        patched.setattr(curves_module, "fit_observations", lambda *a: pytest.fail("fitted again instead of read back"))
        assert _fit(fit_curves(group)) == _fit(curves)
    (entry,) = (tmp_path / "cache" / "curve-fit").glob("*.json")
    entry.write_text("{", encoding="utf-8")
    assert _fit(fit_curves(group)) == _fit(curves)
    assert json.loads(entry.read_text(encoding="utf-8"))["value"]["theta"] == _fit(curves)[0]
    monkeypatch.setenv(fitcache.NO_CACHE_ENV, "1")
    assert _fit(fit_curves(group)) == _fit(curves)


def test_leave_one_out_errors_are_read_back(server_group, monkeypatch):
    group, _ = server_group
    first = leave_one_out(group)
    with monkeypatch.context() as patched:
        patched.setattr(curves_module, "_loo_errors", lambda *a: pytest.fail("refitted instead of read back"))
        assert leave_one_out(group).equals(first)
    monkeypatch.setenv(fitcache.NO_CACHE_ENV, "1")
    assert leave_one_out(group).equals(first)


def test_a_warm_predict_and_plan_do_not_import_scipy(tmp_path):
    """Every fit they need is read back from the cache: scipy (a quarter of a second to import) stays unloaded."""
    env = {**os.environ, fitcache.CACHE_DIR_ENV: str(tmp_path / "cache")}
    env.pop(fitcache.NO_CACHE_ENV, None)
    probe = ("import runpy, sys; sys.argv = ['planner', *sys.argv[1:]]\n"
             "try:\n    runpy.run_module('planner', run_name='__main__')\n"
             "finally:\n    print('scipy loaded' if 'scipy' in sys.modules else 'scipy not loaded', file=sys.stderr)")
    commands = (["predict", "--gpu", "h200", "--engine", "vllm", "--model", "llama-3.1-8b", "--input-len", "1000",
                 "--output-len", "1000", "--concurrency", "64"],
                ["plan", "--routes", "examples/routes.csv", "--out", str(tmp_path / "plan.csv"), "--no-simulate"])
    for args in commands:
        runs = [subprocess.run([sys.executable, "-c", probe, *args], cwd=REPO, env=env, capture_output=True,
                               text=True, timeout=300) for _ in range(2)]
        assert [r.returncode for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
        assert runs[0].stdout.replace("plan.csv", "") == runs[1].stdout.replace("plan.csv", "")
        assert runs[1].stderr.strip().endswith("scipy not loaded"), (args[0], runs[1].stderr)


# ------------------------------------------------------------------ issue 47 §6: data you can trust or skip

PREDICT = ["predict", "--gpu", "h200", "--engine", "vllm", "--model", "llama-3.1-8b", "--input-len", "1000",
           "--output-len", "1000", "--concurrency", "64", "--json"]


def _predict(cache, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real CLI's `predict` with FLEETPLAN_CACHE_DIR=cache (a hang fails the test at `timeout` seconds)."""
    env = {**os.environ, fitcache.CACHE_DIR_ENV: str(cache)}
    env.pop(fitcache.NO_CACHE_ENV, None)
    return subprocess.run([sys.executable, "-m", "planner", *PREDICT], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """A cache one `predict` filled, and that predict's answer."""
    cache = tmp_path_factory.mktemp("warm") / "cache"
    done = _predict(cache)
    assert done.returncode == 0, done.stderr
    return cache, json.loads(done.stdout)


def _copy_cache(warm_cache, tmp_path):
    import shutil  # noqa: PLC0415

    cache, answer = warm_cache
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    return copy, answer


def _rewrite_tables(cache, change) -> None:
    """Every cached table rewritten as change(table), its Parquet metadata (its key) kept: a hand edit."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    for path in cache.glob("profiles/*.parquet"):
        table = pq.read_table(path)
        pq.write_table(change(table).replace_schema_metadata(table.schema.metadata), path)


def _double_throughput(table):
    import pyarrow.compute as pc  # noqa: PLC0415

    column = table.schema.get_field_index("output_tok_per_s")
    return table.set_column(column, "output_tok_per_s", pc.multiply(table["output_tok_per_s"], 2.0))


def _retype_throughput(table):
    import pyarrow as pa  # noqa: PLC0415

    column = table.schema.get_field_index("output_tok_per_s")
    return table.set_column(column, "output_tok_per_s", table["output_tok_per_s"].cast(pa.string()))


@pytest.mark.parametrize("change", [_double_throughput, _retype_throughput,
                                    lambda table: table.drop_columns(["output_tok_per_s"])],
                         ids=["edited", "retyped", "dropped"])
def test_a_hand_edited_table_with_its_key_kept_is_a_miss(warm_cache, tmp_path, change):
    cache, answer = _copy_cache(warm_cache, tmp_path)
    _rewrite_tables(cache, change)
    done = _predict(cache)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout) == answer


def test_a_fifo_as_an_entry_is_skipped_not_read(warm_cache, tmp_path):
    cache, answer = _copy_cache(warm_cache, tmp_path)
    entries = [p for p in cache.rglob("*") if p.is_file()]
    for path in entries:
        path.unlink()
        os.mkfifo(path)
    done = _predict(cache, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == answer


@pytest.mark.parametrize("kind", ["file", "symlink loop"])
def test_a_cache_dir_that_cannot_be_a_folder_is_skipped(warm_cache, tmp_path, kind):
    _, answer = warm_cache
    cache = tmp_path / "cache"
    if kind == "file":
        cache.write_text("not a folder\n")
    else:
        cache.symlink_to(cache)
    done = _predict(cache)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == answer


def test_a_table_that_cannot_be_stored_or_read_back_is_a_miss(tmp_path, monkeypatch):
    monkeypatch.setenv(fitcache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    import pandas as pd  # noqa: PLC0415

    mixed = pd.DataFrame({"a": [1, "x"]})  # an object column Arrow cannot type: the write fails
    assert fitcache.memo_frame("t", b"mixed", lambda: mixed).equals(mixed)
    assert not list((tmp_path / "cache").rglob("*.tmp"))
    plain = pd.DataFrame({"a": [1, 2]})
    assert fitcache.memo_frame("t", b"plain", lambda: plain).equals(plain)
    import pyarrow.parquet as pq  # noqa: PLC0415

    (entry,) = (tmp_path / "cache" / "t").glob("*.parquet")
    table = pq.read_table(entry)
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"pandas": b"[]"}), entry)  # key kept
    assert fitcache.memo_frame("t", b"plain", lambda: plain).equals(plain)  # a read that fails: computed again
