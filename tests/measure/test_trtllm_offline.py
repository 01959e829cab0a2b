"""TensorRT-LLM offline adapter logic against a fake `tensorrt_llm` module (not TensorRT-LLM itself)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys

import pytest

from measure.cli import EXIT_USAGE, main
from measure.engines import make_engine
from measure.engines.base import EngineConfig, EngineError, EngineNotInstalled
from measure.engines.trtllm_offline import TrtllmOfflineEngine, engine_caps, llm_kwargs
from measure.points import Point
from tests.conftest import REPO

MODEL_DIR = str(REPO / "profiles" / "models" / "llama-3.1-8b")  # config-only: dummy weights


@pytest.fixture
def fake_trtllm(monkeypatch):
    """Injects tests/measure/fake_trtllm.py as `tensorrt_llm` (+ `.llmapi`)."""
    from tests.measure import fake_trtllm as module

    module.LLM.instances.clear()
    monkeypatch.setitem(sys.modules, "tensorrt_llm", module)
    monkeypatch.setitem(sys.modules, "tensorrt_llm.llmapi", module.llmapi)
    return module


def config(**kw) -> EngineConfig:
    base = dict(engine="trtllm", model="llama-3.1-8b", model_path=MODEL_DIR, max_model_len=4096)
    base.update(kw)
    return EngineConfig(**base)


def quantized_dir(tmp_path):
    path = tmp_path / "fp8"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"vocab_size": 500, "eos_token_id": [7, 8]}))
    (path / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "FP8"}}))
    (path / "model.safetensors").write_bytes(b"")
    return path


def test_kwargs_from_config_and_overrides():
    kw = llm_kwargs(config(tp=2))
    assert kw["model"] == MODEL_DIR and kw["tensor_parallel_size"] == 2 and kw["backend"] == "pytorch"
    assert kw["dtype"] == "bfloat16" and kw["max_seq_len"] == 4096
    assert kw["load_format"] == "dummy" and kw["skip_tokenizer_init"] is True
    assert kw["kv_cache_config"] == {"free_gpu_memory_fraction": 0.9}
    over = llm_kwargs(config(engine_args={"kv_cache_config": {"free_gpu_memory_fraction": 0.7, "max_tokens": 1000},
                                          "max_batch_size": 64, "max_num_tokens": 4096, "max_model_len": 9000}))
    assert over["kv_cache_config"] == {"free_gpu_memory_fraction": 0.7, "max_tokens": 1000}
    assert over["max_batch_size"] == 64 and over["max_num_tokens"] == 4096
    assert over["max_seq_len"] == 9000 and "max_model_len" not in over


def test_fp8_needs_prequantized_checkpoint(tmp_path):
    with pytest.raises(EngineError, match="pre-quantized checkpoint"):
        llm_kwargs(config(precision="fp8"))
    kw = llm_kwargs(config(precision="fp8", model_path=str(quantized_dir(tmp_path))))
    assert kw["dtype"] == "auto" and "load_format" not in kw
    with pytest.raises(EngineError, match="knows"):
        llm_kwargs(config(precision="int3"))


def test_run_point_token_prompts_times_only_generate(fake_trtllm):
    engine = make_engine(config())
    assert isinstance(engine, TrtllmOfflineEngine) and engine.modes == ("offline",)
    assert engine.version() == "1.0-fake"
    info = engine.start()
    llm = fake_trtllm.LLM.instances[-1]
    assert isinstance(llm.kwargs["kv_cache_config"], fake_trtllm.KvCacheConfig)
    assert llm.kwargs["kv_cache_config"].free_gpu_memory_fraction == 0.9
    assert info.effective_args["kv_cache_config"] == {"free_gpu_memory_fraction": 0.9}
    assert info.max_num_seqs == 2048 and info.max_num_batched_tokens == 8192
    assert info.kv_cache_tokens is None and "not reported" in info.notes
    assert len(llm.calls) == 1  # the warm-up
    step, fake_trtllm.LLM.STEP_S = fake_trtllm.LLM.STEP_S, 0.005
    try:
        m = engine.run_point(Point("offline", 64, 20, batch_size=8), seed=1)
    finally:
        fake_trtllm.LLM.STEP_S = step
    prompts, params, use_tqdm, _ = llm.calls[-1]
    assert len(prompts) == 8 and all(len(p["prompt_token_ids"]) == 64 for p in prompts)
    assert all(isinstance(t, int) and 0 <= t < 128256 for p in prompts for t in p["prompt_token_ids"])
    assert params.max_tokens == 20 and params.ignore_eos and not params.detokenize and use_tqdm is False
    assert params.end_id is not None  # tokenizer skipped: the EOS id must be given
    assert m.output_tokens == 160 and m.input_tokens == 512 and m.num_requests == 8
    assert 0.1 <= m.duration_s < 0.5  # 20 x 5 ms of generate(), nothing else
    assert m.ttft_ms == () and "not reported" in m.notes
    engine.stop()
    assert llm.shut_down and engine.llm is None


def test_prequantized_checkpoint_start(fake_trtllm, tmp_path):
    engine = TrtllmOfflineEngine(config(precision="fp8", model_path=str(quantized_dir(tmp_path))))
    engine.start()
    m = engine.run_point(Point("offline", 16, 4, batch_size=2), seed=0)
    assert m.output_tokens == 8 and m.input_tokens == 32


def test_caps_missing_are_none():
    assert engine_caps(object()) == {"kv_cache_tokens": None, "max_num_seqs": None,
                                     "max_num_batched_tokens": None, "kv_cache_max_tokens_setting": None}


def test_not_installed_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt_llm", None)
    with pytest.raises(EngineNotInstalled, match="pip install tensorrt-llm"):
        TrtllmOfflineEngine(config()).start()


SHAPES = "mode,input_len,output_len,batch_size,concurrency,request_rate,arrival,num_requests,purpose\n" \
         "offline,16,8,2,,,,,a\n"


def cli_args(tmp_path, *extra):
    shapes = tmp_path / "shapes.csv"
    shapes.write_text(SHAPES)
    return ["profile", "--gpu", "h200", "--engine", "trtllm", "--model", "llama-3.1-8b", "--shapes", str(shapes),
            "--out", str(tmp_path / "out"), *extra]


def test_cli_not_installed_is_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt_llm", None)
    assert main(cli_args(tmp_path)) == EXIT_USAGE
    assert "TensorRT-LLM is not installed" in capsys.readouterr().err


def test_cli_fp8_without_checkpoint_is_exit_2(fake_trtllm, tmp_path, capsys):
    assert main(cli_args(tmp_path, "--precision", "fp8")) == EXIT_USAGE
    assert "pre-quantized checkpoint" in capsys.readouterr().err


def test_cli_runs_with_fake(fake_trtllm, tmp_path):
    assert main(cli_args(tmp_path)) == 0
    assert (tmp_path / "out" / "profile.csv").is_file()


def _gpu_and_trtllm() -> bool:
    return importlib.util.find_spec("tensorrt_llm") is not None and shutil.which("nvidia-smi") is not None


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_and_trtllm(), reason="needs an NVIDIA GPU and tensorrt_llm installed")
def test_real_trtllm_small_point():
    engine = TrtllmOfflineEngine(config(max_model_len=1024,
                                        engine_args={"kv_cache_config": {"free_gpu_memory_fraction": 0.5}}))
    engine.start()
    try:
        m = engine.run_point(Point("offline", 128, 16, batch_size=4), seed=0)
    finally:
        engine.stop()
    assert m.output_tokens == 64 and m.duration_s > 0
