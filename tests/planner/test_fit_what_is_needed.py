"""A command fits only what it needs (issue 23), and what it fits is what fitting everything would give:
predict one group (its server model only where the load meets the server), plan its routes' models."""

from __future__ import annotations

import pytest

from fleetfacts.schema import PROFILE_GROUP
from planner.cli import main as cli_main
from planner.engine import curves as curves_module
from planner.engine import fitcache
from planner.engine.curves import GroupKey, fit_curves, load_profiles
from planner.engine.physics_prior import physics_priors
from planner.latency import server_fit

# Bundled groups, one per way a curve gets its server model: its own server rows; borrowed from the closest
# group of its engine; a curve of published saturated throughputs (lent nothing); an engine with no server rows.
OWN = GroupKey("vllm", "0.26.0", "h200", "llama-3.1-8b", "fp8", 1)
BORROWS = GroupKey("vllm", "0.26.0", "h200", "qwen3-30b-a3b", "bf16", 1)
OTHER_ENGINE = GroupKey("trtllm", "1.0", "h100", "llama-3.1-8b", "fp8", 1)
PREDICT = ["predict", "--gpu", "h200", "--engine", "vllm", "--model", "llama-3.1-8b", "--precision", "fp8",
           "--input-len", "1000", "--output-len", "1000", "--json"]


@pytest.fixture(scope="module")
def everything():
    """The bundled profiles, and every curve with its server model (as the app's catalog holds them)."""
    profiles = load_profiles()
    return profiles, server_fit.with_server_latency(fit_curves(profiles, physics_priors(profiles)), profiles)


def _published_vllm(curves) -> GroupKey:
    return next(k for k, c in curves.items() if k.engine == "vllm" and not c.fit.is_full)


def test_the_bundled_groups_cover_each_way_of_getting_a_server_model(everything):
    _, curves = everything
    assert curves[OWN].front_end.basis.startswith("measured")
    assert curves[BORROWS].front_end.basis.startswith("transferred")
    assert curves[_published_vllm(curves)].front_end is None and curves[OTHER_ENGINE].front_end is None


@pytest.mark.parametrize("which", ["own", "borrows", "published", "other engine"])
def test_one_curve_gets_the_server_model_fitting_every_group_gives_it(everything, which):
    profiles, curves = everything
    key = {"own": OWN, "borrows": BORROWS, "other engine": OTHER_ENGINE}.get(which) or _published_vllm(curves)
    alone = fit_curves(profiles[(profiles["engine"] == key.engine) & (profiles["model"] == key.model)])[key]
    assert server_fit.with_server_latency_of(alone, profiles).front_end == curves[key].front_end


def test_a_plans_models_are_fitted_with_the_server_groups_only_and_equal_the_full_fit(everything, monkeypatch):
    profiles, curves = everything
    fitted = []
    real = curves_module.fit_group
    monkeypatch.setattr(curves_module, "fit_group", lambda key, group, prior=None: fitted.append(key) or real(key, group, prior))
    some = server_fit.serving_curves(profiles, ["qwen3-30b-a3b"])
    assert set(some) == {k for k in curves if k.model == "qwen3-30b-a3b"}
    assert all(some[k].front_end == curves[k].front_end and (some[k].fit.theta == curves[k].fit.theta).all()
               for k in some)
    servers = {k for k, g in profiles.groupby(list(PROFILE_GROUP))
               if not server_fit.server_rows(g).empty}
    assert set(fitted) == set(some) | {GroupKey.from_values(k) for k in servers}


def test_offline_predict_fits_no_server_model_and_online_predict_only_its_groups(monkeypatch, capsys):
    monkeypatch.setenv(fitcache.NO_CACHE_ENV, "1")  # fit, do not read a cached fit back
    calibrated = []
    real = server_fit.calibrate
    monkeypatch.setattr(server_fit, "calibrate", lambda curve, group: calibrated.append(curve.key) or real(curve, group))
    assert cli_main([*PREDICT, "--batch-size", "512"]) == 0
    assert calibrated == []
    assert cli_main([*PREDICT, "--concurrency", "64"]) == 0
    assert calibrated == [OWN]
    capsys.readouterr()
