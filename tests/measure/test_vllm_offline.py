"""vLLM offline adapter logic against a fake `vllm` module (not vLLM itself), plus a GPU test of the real one."""

from __future__ import annotations

import importlib.util
import shutil
import types

import pytest

from measure.engines.base import EngineConfig, EngineNotInstalled, random_token_prompts
from measure.engines.vllm_offline import (
    VllmOfflineEngine,
    engine_caps,
    llm_kwargs,
    measurement_from_outputs,
    request_latencies,
)
from measure.points import Point
from tests.conftest import REPO

MODEL_DIR = str(REPO / "profiles" / "models" / "llama-3.1-8b")


def config(**kw) -> EngineConfig:
    base = dict(engine="vllm", model="llama-3.1-8b", model_path=MODEL_DIR, max_model_len=4096)
    base.update(kw)
    return EngineConfig(**base)


def test_kwargs_dummy_bf16_and_fp8_with_overrides():
    kw = llm_kwargs(config())
    assert kw["load_format"] == "dummy" and kw["skip_tokenizer_init"] is True
    assert kw["dtype"] == "bfloat16" and "quantization" not in kw
    assert kw["disable_log_stats"] is False and kw["max_model_len"] == 4096
    kw8 = llm_kwargs(config(precision="fp8", tp=2, engine_args={"kv_cache_dtype": "fp8", "max_model_len": 9000}))
    assert kw8["quantization"] == "fp8" and kw8["tensor_parallel_size"] == 2
    assert kw8["kv_cache_dtype"] == "fp8" and kw8["max_model_len"] == 9000


def test_prompts_are_seeded_distinct_and_in_vocab():
    a = random_token_prompts(50, 32, 1000, seed=3)
    assert a == random_token_prompts(50, 32, 1000, seed=3)
    assert a != random_token_prompts(50, 32, 1000, seed=4)
    assert len({tuple(p) for p in a}) == 50 and len({p[0] for p in a}) == 50
    assert all(0 <= t < 1000 for p in a for t in p)


def test_run_point_times_only_generate_and_reads_metrics(fake_vllm):
    engine = VllmOfflineEngine(config())
    info = engine.start()
    assert info.kv_cache_tokens == 16000 and info.max_num_seqs == 256 and info.max_num_batched_tokens == 8192
    assert info.cuda_graph_max_batch == 512
    llm = fake_vllm.LLM.instances[-1]
    assert len(llm.calls) == 1  # the warm-up
    m = engine.run_point(Point("offline", 64, 20, batch_size=8), seed=1)
    prompts, params, use_tqdm, _ = llm.calls[-1]
    assert len(prompts) == 8 and all(len(p["prompt_token_ids"]) == 64 for p in prompts)
    assert params.max_tokens == 20 and params.ignore_eos and not params.detokenize and use_tqdm is False
    assert m.output_tokens == 160 and m.input_tokens == 512 and m.num_requests == 8
    assert 0.02 <= m.duration_s < 0.5
    # fake metrics: ttft 10 ms + 1 ms * i; decode span 2 ms * (n - 1) -> TPOT exactly 2 ms
    assert m.ttft_ms[0] == pytest.approx(10.0) and m.ttft_ms[7] == pytest.approx(17.0)
    assert all(t == pytest.approx(2.0) for t in m.tpot_ms)
    assert m.e2e_ms[0] == pytest.approx(10.0 + 38.0)
    engine.stop()


def test_missing_metrics_leave_latency_blank(fake_vllm):
    fake_vllm.LLM.report_metrics = False
    engine = VllmOfflineEngine(config())
    engine.start()
    m = engine.run_point(Point("offline", 16, 4, batch_size=2), seed=0)
    assert m.ttft_ms == () and m.tpot_ms == () and "not reported" in m.notes


def test_request_latencies_v0_style_and_none():
    v0 = types.SimpleNamespace(arrival_time=100.0, first_token_time=100.05, finished_time=100.25)
    ttft, tpot, e2e = request_latencies(v0, 11)
    assert ttft == pytest.approx(50.0) and e2e == pytest.approx(250.0) and tpot == pytest.approx(20.0)
    assert request_latencies(None, 5) == (None, None, None)
    assert request_latencies(types.SimpleNamespace(), 5) == (None, None, None)


def test_caps_missing_are_none():
    assert engine_caps(types.SimpleNamespace()) == {"kv_cache_tokens": None, "max_num_seqs": None,
                                                   "max_num_batched_tokens": None, "cuda_graph_max_batch": None}


def test_measurement_partial_metrics_dropped():
    out = [types.SimpleNamespace(prompt_token_ids=[1, 2], outputs=[types.SimpleNamespace(token_ids=[1, 2, 3])],
                                 metrics=None)]
    m = measurement_from_outputs(out, 1.0)
    assert m.output_tokens == 3 and m.ttft_ms == ()


def test_not_installed_message(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(EngineNotInstalled, match=r"pip install 'fleetplan\[vllm\]'"):
        VllmOfflineEngine(config()).start()


def _gpu_and_vllm() -> bool:
    return importlib.util.find_spec("vllm") is not None and shutil.which("nvidia-smi") is not None


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_and_vllm(), reason="needs an NVIDIA GPU and vllm installed")
def test_real_vllm_small_point():
    engine = VllmOfflineEngine(config(max_model_len=1024, engine_args={"gpu_memory_utilization": 0.5}))
    info = engine.start()
    try:
        m = engine.run_point(Point("offline", 128, 16, batch_size=4), seed=0)
    finally:
        engine.stop()
    assert m.output_tokens == 64 and m.duration_s > 0 and info.kv_cache_tokens
