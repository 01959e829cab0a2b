"""Physics priors for the length terms of fitted curves: what each profile group's k (KV read per token of context)
and r (prefill attention, per prompt token and token of prompt) should be before its own data speak.

A curve fitted to prompts of at most 8k tokens cannot see attention, which is a few percent of a short prefill
and two thirds of a 128k one: extrapolated, its fit's shape put a 124k prefill at a third of what it measures
(profiles/measured/h100, docs/long-prompts.md).  The engine's calibration on every profile
(planner.engine.transfer) writes r as attention FLOPs over the GPU's datasheet 16-bit peak and k as KV bytes per
token over its memory bandwidth, each times an efficiency pooled over every group of the engine, long-prompt
profiles included.  That value, with its relative uncertainty (the calibration's parameter covariance, at least
its residual scale), is the prior `planner.engine.curves.fit_observations` fits the group toward.  A group
measured at long lengths moves k and r as far as its data insist; a short one keeps the physics'.

The priors are computed from the profiles alone and memoised on disk (planner.engine.fitcache) by their content:
a warm start reads them back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import pandas as pd

from fleetfacts.schema import PROFILE_GROUP
from planner.engine.curves import PARAM_NAMES, Curve, GroupKey, PhysicsPrior, fit_curves, fit_group, group_key
from planner.engine.fitcache import memo
from planner.engine.transfer import Calibration, calibrate_engine, group_data
from planner.engine.transfer_physics import Target, kv_precision, physics_matrix

K, R, T0 = PARAM_NAMES.index("k"), PARAM_NAMES.index("r"), PARAM_NAMES.index("t0")


def physics_priors(profiles: pd.DataFrame) -> dict[GroupKey, PhysicsPrior]:
    """A prior for every group of `profiles` whose engine calibrates and whose GPU and model have facts."""
    if profiles.empty:
        return {}
    content = profiles.drop(columns=["file"], errors="ignore").to_csv(index=False).encode()
    stored = memo("physics-priors", content, lambda: _compute(profiles))
    return {GroupKey(**entry["key"]): PhysicsPrior(**entry["prior"]) for entry in stored}


def _compute(profiles: pd.DataFrame) -> list[dict]:
    data = group_data(profiles)
    out = []
    for engine in sorted({d.key.engine for d in data}):
        calibration = calibrate_engine(data, engine)
        for d in data:
            if d.key.engine == engine:
                prior = prior_for(calibration, d.target)
                if prior is not None:
                    out.append({"key": {c: getattr(d.key, c) for c in PROFILE_GROUP},
                                "prior": prior.__dict__})
    return out


def prior_for(calibration: Calibration, target: Target) -> PhysicsPrior | None:
    """k and r of `target` under `calibration`, with their relative standard deviations (at least the
    calibration's relative residual); None when the calibration leaves either at zero."""
    factor = calibration.coef_for(target) / np.where(calibration.coef > 0, calibration.coef, 1.0)
    p = physics_matrix(target) * factor
    theta = p @ calibration.coef
    cov = p @ calibration.cov @ p.T
    if theta[K] <= 0 or theta[R] <= 0:
        return None

    def relative_sd(i: int) -> float:
        return max(math.sqrt(max(float(cov[i, i]), 0.0)) / float(theta[i]), calibration.sigma)

    return PhysicsPrior(float(theta[K]), relative_sd(K), float(theta[R]), relative_sd(R),
                        f"{calibration.engine} calibration on {len(calibration.groups)} groups", float(theta[T0]))


def fit_with_physics(profiles: pd.DataFrame, fitted: pd.DataFrame | None = None) -> dict[GroupKey, Curve]:
    """The curves of `fitted` (default: every group of `profiles`), each fitted toward the physics prior that a
    calibration on all of `profiles` gives it, or toward a sibling's measured length terms where one sees longer
    prompts (with_sibling_lengths): the one way the planner fits curves."""
    table = profiles if fitted is None else fitted
    priors = physics_priors(profiles)
    return with_sibling_lengths(table, fit_curves(table, priors), priors)


def with_sibling_lengths(table: pd.DataFrame, curves: Mapping[GroupKey, Curve],
                         priors: Mapping[GroupKey, PhysicsPrior]) -> dict[GroupKey, Curve]:
    """`curves`, each refitted toward its sibling's fitted k and r where a sibling measured longer prompts.

    A sibling is the same engine build, GPU, model, TP and settings at another weight precision with the same KV
    cache precision (planner.engine.transfer_physics.kv_precision): it runs the same attention kernel on the same
    KV bytes, so its attention (r) and KV-read (k) costs are this group's, whatever the GEMMs cost.  Where it is
    fully fitted (t0 free) and measured at longer prompts than this group, its fitted k and r replace the pooled
    calibration's as the prior's values: measured attention beats pooled attention.  Their relative spread stays
    the prior's (the calibration's residual scale): the sibling's own marginal spreads of k and r are inflated by
    their correlation in its fit, which its predictions do not suffer.  Other terms stay this group's own."""
    out = dict(curves)
    for key, curve in curves.items():
        prior, sibling = priors.get(key), longer_sibling(key, curve, curves)
        if prior is None or sibling is None:
            continue
        theta = sibling.fit.theta
        measured = replace(prior, k=float(theta[K]), r=float(theta[R]),
                           basis=f"{sibling.key.label()} (same attention kernel and KV cache, prompts to "
                                 f"{sibling.covered.input_len[1]:,.0f} tokens)")
        rows = table[(table[list(PROFILE_GROUP)] == [getattr(key, c) for c in PROFILE_GROUP]).all(axis=1)]
        refit = fit_group(key, rows, measured)
        if refit is not None:
            out[key] = refit
    return out


def longer_sibling(key: GroupKey, curve: Curve, curves: Mapping[GroupKey, Curve]) -> Curve | None:
    """The fully fitted sibling (with_sibling_lengths) measured at the longest prompts beyond this curve's, if any."""
    kv = kv_precision(key.engine, key.precision)
    found = [c for k, c in curves.items()
             if k.precision != key.precision and kv_precision(k.engine, k.precision) == kv
             and (k.engine, k.engine_version, k.gpu, k.model, k.tp, k.config)
             == (key.engine, key.engine_version, key.gpu, key.model, key.tp, key.config)
             and c.fit.is_full and c.covered.input_len[1] > curve.covered.input_len[1]
             and c.fit.theta[K] > 0 and c.fit.theta[R] > 0]
    return max(found, key=lambda c: c.covered.input_len[1], default=None)


# Prompts longer than this are "long" for `validate --long`: the longest any profile measured before long-prompt
# profiling (8k) with the 12k-16k rows kept in training, so the held-out rows test the continuation, not a fit.
LONG_PROMPT_TOKENS = 16384


def long_context_check(profiles: pd.DataFrame, threshold: int = LONG_PROMPT_TOKENS) -> pd.DataFrame:
    """Hold out every offline row whose prompt is longer than `threshold`, from the fits and from the calibration
    behind the priors alike; predict each held-out row with its group's curve.  One row per held-out point:
    group, shape, measured and predicted output tok/s (and TTFT at batch 1), error %, whether the 90% interval
    covers the measurement, and the prediction's provenance."""
    held = profiles[(profiles["input_len"] > threshold) & (profiles["mode"] == "offline")
                    & profiles["batch_size"].notna() & (profiles["output_tok_per_s"] > 0)]
    curves = fit_with_physics(profiles.drop(held.index))
    rows = []
    for _, r in held.iterrows():
        key = group_key(r)
        curve = curves.get(key)
        if curve is None:
            continue
        p = curve.predict_offline(float(r.input_len), float(r.output_len), int(r.batch_size))
        one = int(r.batch_size) == 1 and pd.notna(r.get("ttft_mean_ms"))
        rows.append({"group": key.label(), "input_len": int(r.input_len), "output_len": int(r.output_len),
                     "batch_size": int(r.batch_size), "measured_tok_s": float(r.output_tok_per_s),
                     "predicted_tok_s": p.output_tok_per_s,
                     "err_pct": 100.0 * (p.output_tok_per_s / float(r.output_tok_per_s) - 1.0),
                     "ttft_measured_ms": float(r.ttft_mean_ms) if one else math.nan,
                     "ttft_predicted_ms": p.ttft_ms if one else math.nan,
                     "ttft_err_pct": 100.0 * (p.ttft_ms / float(r.ttft_mean_ms) - 1.0) if one else math.nan,
                     "covered": bool(p.low <= float(r.output_tok_per_s) <= p.high), "provenance": p.provenance})
    return pd.DataFrame(rows, columns=["group", "input_len", "output_len", "batch_size", "measured_tok_s",
                                       "predicted_tok_s", "err_pct", "ttft_measured_ms", "ttft_predicted_ms",
                                       "ttft_err_pct", "covered", "provenance"])


def long_context_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per group: held-out points, median and max |error| of throughput and of TTFT at batch 1, interval cover."""
    rows = []
    for group, same in table.groupby("group", sort=True):
        ttft = same["ttft_err_pct"].abs().dropna()
        rows.append({"group": group, "n": len(same), "median_err_pct": float(same["err_pct"].abs().median()),
                     "max_err_pct": float(same["err_pct"].abs().max()),
                     "ttft_median_err_pct": float(ttft.median()) if len(ttft) else math.nan,
                     "ttft_max_err_pct": float(ttft.max()) if len(ttft) else math.nan,
                     "covered_share": float(same["covered"].mean())})
    return pd.DataFrame(rows, columns=["group", "n", "median_err_pct", "max_err_pct", "ttft_median_err_pct",
                                       "ttft_max_err_pct", "covered_share"])
