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
