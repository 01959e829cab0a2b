"""A group's attention and KV-read terms from a sibling measured at longer prompts (planner.engine.physics_prior.
with_sibling_lengths), and a reduced fit's fixed step cost from the engine's calibration."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from planner.engine.curves import PARAM_NAMES, GroupKey, load_profiles
from planner.engine.physics_prior import LONG_PROMPT_TOKENS, fit_with_physics, long_context_check, longer_sibling

FP8 = "vllm 0.26.0 / h100 x1 / llama-3.1-8b fp8"
BF16 = "vllm 0.26.0 / h100 x1 / llama-3.1-8b bf16"
# aiconfigurator 0.12 on the same held-out H100 FP8 rows (output tok/s |error| median / max, %): run 2026-12-07 in
# its own venv with ../shared/peers/aic_static.py, quoted in docs/long-prompts.md.
PEER_MEDIAN, PEER_MAX = 2.4, 5.7
K, R, T0 = (PARAM_NAMES.index(n) for n in ("k", "r", "t0"))


@pytest.fixture(scope="module")
def profiles():
    return load_profiles()


@pytest.fixture(scope="module")
def held_out(profiles):
    """Curves fitted without the offline rows over 16k tokens, as `validate --long` fits them."""
    held = profiles[(profiles["input_len"] > LONG_PROMPT_TOKENS) & (profiles["mode"] == "offline")]
    return {k.label(): c for k, c in fit_with_physics(profiles.drop(held.index)).items()}


def test_held_out_the_fp8_group_takes_its_length_terms_from_its_bf16_sibling(held_out):
    # FP8 weights, bf16 KV cache and FlashAttention in both: the bf16 group, measured to 16k where the FP8 group
    # keeps rows to 12k, carries the attention and KV-read costs both run as the prior; the FP8 group's own rows
    # (1k-12k, two engines) keep its attention term within the 5-15% two engines differ by on this GPU.
    fp8, bf16 = held_out[FP8], held_out[BF16]
    assert fp8.prior is not None and fp8.prior.basis.startswith(BF16)
    assert fp8.fit.theta[R] == pytest.approx(bf16.fit.theta[R], rel=0.10)
    assert fp8.fit.theta[K] == pytest.approx(bf16.fit.theta[K], rel=0.25)


def test_held_out_fp8_long_prompts_are_predicted_no_worse_than_aiconfigurator(profiles):
    table = long_context_check(profiles)
    mine = table[table["group"] == FP8]
    errors = mine["err_pct"].abs()
    assert len(mine) == 16
    assert errors.median() <= PEER_MEDIAN and errors.max() <= PEER_MAX
    assert mine["ttft_err_pct"].abs().max() < 10.0  # a single request's TTFT within 10%
    # Every interval covers, but one: 48 x 24k, three waves past the KV cache (20 admitted at once), runs 4.8%
    # slower than predicted, just outside its interval (the bf16 group's multi-wave row is 7% slow, inside its
    # wider one): what happens between waves is not modelled (docs/long-prompts.md).
    waves = mine[mine["batch_size"] * (mine["input_len"] + mine["output_len"]) > 510_304]
    assert mine.drop(waves.index)["covered"].all()
    assert len(waves) == 1 and waves["err_pct"].abs().max() < 10.0


def test_with_the_long_rows_in_no_group_borrows_a_siblings_terms(profiles):
    # Both H100 groups are measured to 124k, the H200 ones to 8k: each keeps the calibration's prior.
    curves = fit_with_physics(profiles)
    for key, curve in curves.items():
        if key.engine == "vllm" and key.model == "llama-3.1-8b" and curve.prior is not None:
            assert curve.prior.basis.startswith("vllm calibration"), key.label()


def _curve(precision: str, longest: float, full: bool = True) -> SimpleNamespace:
    theta = np.zeros(len(PARAM_NAMES))
    theta[K], theta[R] = 4e-8, 5e-10
    return SimpleNamespace(fit=SimpleNamespace(is_full=full, theta=theta),
                           covered=SimpleNamespace(input_len=(128.0, longest)))


@pytest.mark.parametrize("engine, sibling_precision, full, longest, found", [
    ("vllm", "bf16", True, 16384.0, True),     # bf16 KV cache in both: a sibling
    ("vllm", "bf16", True, 8192.0, False),     # measured no further
    ("vllm", "bf16", False, 16384.0, False),   # its own t0 not separated: its k and r are not measured either
    ("trtllm", "bf16", True, 16384.0, False),  # TensorRT-LLM keeps an FP8 KV cache for FP8 weights: other kernels
])
def test_a_sibling_is_the_same_build_and_kv_cache_measured_further(engine, sibling_precision, full, longest, found):
    key = GroupKey(engine, "1.0", "h100", "llama-3.1-8b", "fp8", 1, "default")
    other = GroupKey(engine, "1.0", "h100", "llama-3.1-8b", sibling_precision, 1, "default")
    curves = {key: _curve("fp8", 12288.0), other: _curve(sibling_precision, longest, full)}
    assert (longer_sibling(key, curves[key], curves) is curves[other]) == found


def test_a_reduced_fit_takes_the_calibrated_step_cost(profiles):
    # The tuned H200 FP8 group has saturated throughputs only: its fixed step cost cannot be fitted, and the
    # engine's calibration (weights over bandwidth plus the work around them) is above the roofline guess.
    curve = next(c for k, c in fit_with_physics(profiles).items()
                 if k.label() == "vllm 0.26.0 [tuned] / h200 x1 / llama-3.1-8b fp8")
    assert not curve.fit.is_full and curve.prior is not None
    assert curve.fit.theta[T0] == pytest.approx(curve.prior.t0)
    assert "t0 from the engine's calibrated step cost" in curve.note
