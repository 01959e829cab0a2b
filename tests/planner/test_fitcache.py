"""The on-disk fit cache: a second fit of the same rows is read back, a changed row or a corrupt entry is
fitted again, and the answers are the same as without the cache."""

from __future__ import annotations

import dataclasses
import json

import pytest

from fleetfacts.schema import PROFILE_GROUP
from planner.engine import fitcache
from planner.engine.curves import fit_curves, load_profiles
from planner.latency import server_fit

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


def test_validated_profiles_are_read_back_and_a_changed_or_corrupt_file_is_validated_again(tmp_path, monkeypatch):
    monkeypatch.setenv(fitcache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    source = next(p for p in sorted((fitcache.ROOT / "profiles" / "measured").rglob("profile.csv")))
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "profile.csv").write_bytes(source.read_bytes())
    first = load_profiles(folder)
    (entry,) = (tmp_path / "cache" / "profiles").glob("*.pkl")
    with monkeypatch.context() as patched:
        patched.setattr("planner.engine.curves.load_tables", lambda *a: pytest.fail("validated again instead of read back"))
        assert load_profiles(folder).equals(first)
    entry.write_bytes(b"not a pickle")
    assert load_profiles(folder).equals(first)
    text = (folder / "profile.csv").read_text()
    (folder / "profile.csv").write_text(text.replace(",ok,", ",failed,", 1))
    assert len(load_profiles(folder)) == len(first) - 1
