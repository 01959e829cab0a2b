"""fleetfacts.moe_configs: which expert shapes vLLM runs on a tuned fused-MoE config, from the shipped file list."""

from __future__ import annotations

import csv
import importlib.util
import zipfile
from pathlib import Path

import pytest

from fleetfacts.moe_configs import VLLM_MOE_CONFIGS_CSV, vllm_moe_config_tuned
from fleetfacts.specs import bundled_model_specs

MODELS = bundled_model_specs()
TOOL = Path(__file__).resolve().parents[2] / "tools" / "gen_vllm_moe_configs.py"


def test_the_h200_runs_qwen3_and_mixtral_on_tuned_configs_and_olmoe_and_granite_on_the_default():
    """What vLLM 0.26's logs said on the H200: a tuned file for Mixtral-8x7B and Qwen3-30B-A3B, "Using default
    MoE config" for OLMoE-1B-7B (E=64, N=1024) and Granite-3.1-3B-A800M (E=40, N=512)."""
    assert vllm_moe_config_tuned("h200", MODELS["qwen3-30b-a3b"], "bf16", 1) is True
    assert vllm_moe_config_tuned("h200", MODELS["mixtral-8x7b"], "bf16", 1) is True
    assert vllm_moe_config_tuned("h200", MODELS["olmoe-1b-7b"], "bf16", 1) is False
    assert vllm_moe_config_tuned("h200", MODELS["granite-3.1-3b-a800m"], "bf16", 1) is False


def test_the_lookup_follows_the_file_name_vllm_builds():
    mixtral, qwen3_235b = MODELS["mixtral-8x7b"], MODELS["qwen3-235b-a22b"]
    # The dtype is part of the name: on the H100 only Mixtral's FP8 config is shipped.
    assert vllm_moe_config_tuned("h100", mixtral, "fp8", 1) is True
    assert vllm_moe_config_tuned("h100", mixtral, "bf16", 1) is False
    # N is the expert width on one rank: Qwen3-235B-A22B's 1536 at TP2 is the 768 of a shipped H200 file.
    assert qwen3_235b.expert_intermediate_size == 1536
    assert vllm_moe_config_tuned("h200", qwen3_235b, "bf16", 1) is False
    assert vllm_moe_config_tuned("h200", qwen3_235b, "bf16", 2) is True
    # A GPU with no shipped file runs every shape on the default config.
    assert vllm_moe_config_tuned("gh200", MODELS["qwen3-30b-a3b"], "bf16", 1) is False


def test_the_rule_does_not_apply_off_the_triton_fused_moe_path():
    assert vllm_moe_config_tuned("h200", MODELS["llama-3.1-8b"], "bf16", 1) is None  # dense
    assert vllm_moe_config_tuned("h200", MODELS["gpt-oss-20b"], "bf16", 1) is None  # MXFP4 experts
    assert vllm_moe_config_tuned("h200", MODELS["qwen3-30b-a3b"], "fp4", 1) is None


def test_every_row_names_its_source_file_and_the_gpu_slugs_are_ours():
    from fleetfacts.specs import bundled_gpu_specs
    with open(VLLM_MOE_CONFIGS_CSV, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and {r["gpu"] for r in rows if r["gpu"]} <= set(bundled_gpu_specs())
    for r in rows:
        name = f"E={r['num_experts']},N={r['n']},device_name={r['device_name']}"
        assert name in r["source"] and r["source"].startswith("https://github.com/vllm-project/vllm/tree/v")


def test_the_generator_reads_a_wheels_config_names(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("gen_vllm_moe_configs", TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    wheel = tmp_path / "vllm-9.9.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name in ("E=64,N=1024,device_name=NVIDIA_H200.json", "README",
                     "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json",
                     "E=256,N=128,device_name=NVIDIA_B200,dtype=fp8_w8a8,block_shape=[128,128].json",
                     "E=384,N=256,device_name=AMD_Instinct_MI350X,dtype=int4_w4a16,backend=flydsl.json"):
            archive.writestr(tool.CONFIG_DIR + name, "{}")
    out = tmp_path / "configs.csv"
    monkeypatch.setattr(tool, "OUT", out)
    tool.main(str(wheel))
    with open(out, newline="") as handle:
        rows = [(r["engine_version"], r["gpu"], r["num_experts"], r["n"], r["dtype"], r["block_shape"])
                for r in csv.DictReader(handle)]
    assert sorted(rows) == sorted([("9.9.0", "h200", "64", "1024", "", ""),
                                   ("9.9.0", "h100", "8", "14336", "fp8_w8a8", ""),
                                   ("9.9.0", "b200", "256", "128", "fp8_w8a8", "128,128")])


@pytest.mark.parametrize("model", ["olmoe-1b-7b", "granite-3.1-3b-a800m", "qwen3-30b-a3b", "mixtral-8x7b"])
def test_the_expert_width_is_the_configs_moe_intermediate_size(model):
    spec = MODELS[model]
    # 3 x hidden x width per expert and layer: the same width the parameter count was built from.
    assert spec.params_per_expert == pytest.approx(3 * spec.hidden_size * spec.expert_intermediate_size
                                                   * spec.num_layers, rel=1e-3)
