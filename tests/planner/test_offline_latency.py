"""An offline batch's TTFT and TPOT (`predict --batch-size`): each wave's prompts prefill in one burst and decode
together, later waves wait, as the engine runs them; checked against the measured long-prompt batches."""

from __future__ import annotations

import pytest

from planner.engine.curves import find_curve, load_profiles
from planner.engine.physics_prior import fit_with_physics

# Batch 1 is one prefill then decode steps: the fit's own terms, within the run-to-run spread.  Larger batches
# add the burst's chunking and, past the KV cache, the waves (vLLM admits by prompt and preempts): looser.
SINGLE_TOL, BATCH_TOL = 0.05, 0.25


@pytest.fixture(scope="module")
def h100():
    profiles = load_profiles()
    asked = profiles[(profiles["engine"] == "vllm") & (profiles["gpu"] == "h100")
                     & (profiles["model"] == "llama-3.1-8b")]
    return asked, fit_with_physics(profiles, asked)


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_offline_ttft_and_tpot_follow_the_measured_batches(h100, precision):
    rows, curves = h100
    curve = find_curve(curves, "vllm", "h100", "llama-3.1-8b", precision, 1, None, None)
    rows = rows[(rows["precision"] == precision) & (rows["mode"] == "offline") & rows["ttft_mean_ms"].notna()]
    assert len(rows) >= 10
    for _, r in rows.iterrows():
        p = curve.predict_offline(float(r.input_len), float(r.output_len), int(r.batch_size))
        tol = SINGLE_TOL if r.batch_size == 1 else BATCH_TOL
        shape = f"{r.input_len}/{r.output_len} x{r.batch_size}"
        assert p.ttft_ms == pytest.approx(r.ttft_mean_ms, rel=tol), shape
        assert p.tpot_ms == pytest.approx(r.tpot_mean_ms, rel=tol), shape
