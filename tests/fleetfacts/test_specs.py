"""fleetfacts.specs: the bundled GPU and model tables load, their helpers are right, a bad table is refused."""

from __future__ import annotations

import json

import pytest

from fleetfacts import specs
from fleetfacts.errors import InputError

DATA = specs.DATA_DIR


def test_spec_loaders_and_helpers():
    gpus, models = specs.load_gpu_specs(), specs.load_model_specs()
    assert {"h100", "h200", "a100", "l40s", "b200", "gh200"} <= set(gpus)
    assert {"llama-3.1-8b", "llama-3.1-70b", "llama-3.3-70b", "qwen2.5-7b", "mistral-7b", "mixtral-8x7b",
            "llama-3.1-405b"} <= set(models)
    assert gpus["a100"].fp8_dense_tflops is None
    m8 = models["llama-3.1-8b"]
    assert specs.kv_bytes_per_token(m8, "bf16") == 2 * 32 * 8 * 128 * 2
    assert specs.weight_bytes(m8, "fp8") == pytest.approx(m8.params_b * 1e9)
    assert specs.weight_bytes(m8, "fp4") == pytest.approx(specs.weight_bytes(m8, "bf16") / 4)
    mixtral = models["mixtral-8x7b"]
    assert mixtral.is_moe and mixtral.active_params_b < mixtral.params_b
    assert specs.weight_bytes(mixtral, "bf16") == pytest.approx(mixtral.params_b * 2e9)  # all experts resident
    with pytest.raises(InputError, match="unknown precision 'int3'"):
        specs.weight_bytes(m8, "int3")


@pytest.mark.parametrize("name", ["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "mistral-7b"])
def test_model_params_match_the_architecture(name):
    config = json.loads((specs.BUNDLED_CONFIGS_DIR / name / "config.json").read_text(encoding="utf-8"))
    h, heads = config["hidden_size"], config["num_attention_heads"]
    hd = config.get("head_dim", h // heads)
    attention = 2 * h * heads * hd + 2 * h * config["num_key_value_heads"] * hd
    per_layer = attention + 3 * h * config["intermediate_size"] + 2 * h
    params = config["num_hidden_layers"] * per_layer + 2 * config["vocab_size"] * h + h
    assert specs.load_model_specs()[name].params_b == pytest.approx(params / 1e9, rel=1e-9)


# Headline sizes on the model cards (billions: total, active), which the derivation must reproduce.
MODEL_CARD_SIZES = {"llama-3.2-1b": (1.24, 1.24), "llama-3.1-8b": (8.03, 8.03), "qwen2.5-7b": (7.62, 7.62),
                    "qwen2.5-32b": (32.8, 32.8), "mixtral-8x7b": (46.7, 12.9), "qwen3-30b-a3b": (30.5, 3.3),
                    "qwen3-235b-a22b": (235.0, 22.0), "gpt-oss-120b": (116.8, 5.1), "gpt-oss-20b": (20.9, 3.6),
                    "olmoe-1b-7b": (6.9, 1.3),  # OLMoE: arXiv 2409.02060 (6.9B total, 1.3B active)
                    # Granite: "3B-A800M" in its name; 3.37B total / 800M active as transcribed from its card
                    "granite-3.1-3b-a800m": (3.3, 0.8)}


@pytest.mark.parametrize("name", sorted(MODEL_CARD_SIZES))
def test_bundled_configs_reproduce_model_card_sizes(name):
    total, active = MODEL_CARD_SIZES[name]
    model = specs.load_model_specs()[name]
    assert model.params_b == pytest.approx(total, rel=0.02)
    # gpt-oss's and Granite's cards count active parameters without the embedding tables; ours includes them
    without_embeddings = name.startswith(("gpt-oss", "granite"))
    assert model.active_params_b == pytest.approx(active, rel=0.2 if without_embeddings else 0.02)


# Shared experts and leading dense layers, read under each family's own keys (profiles/models configs):
# Qwen2-57B-A14B (one shared MLP of shared_expert_intermediate_size), ERNIE-4.5-21B-A3B (moe_num_experts, moe_k,
# two shared experts, layer 0 dense). Sizes as their names say: 57B / 14B active, 21B / 3B active.
@pytest.mark.parametrize("name, total, active, routing_layers", [("qwen2-57b-a14b", 57.4, 14.2, 28),
                                                                  ("ernie-4.5-21b-a3b", 21.8, 3.35, 27)])
def test_shared_experts_and_dense_layers_count(name, total, active, routing_layers):
    model = specs.model_facts(name)
    assert model is not None and model.is_moe
    assert model.params_b == pytest.approx(total, rel=0.01)
    assert model.active_params_b == pytest.approx(active, rel=0.02)
    assert model.moe_layers == routing_layers
    unshared = dict(json.loads((specs.MODELS_DIR / name / "config.json").read_text()),
                    shared_expert_intermediate_size=0, moe_num_shared_experts=0)
    assert specs.model_spec_from_config(name, unshared).active_params_b < model.active_params_b - 0.3


def test_derived_facts_tied_embeddings_moe_sliding_window_and_mla():
    models = specs.load_model_specs()
    small, big = models["llama-3.2-1b"], models["llama-3.1-8b"]
    assert small.tied_embeddings and not big.tied_embeddings
    assert small.context_window == 131072 and models["qwen3-8b"].context_window == 40960
    oss = models["gpt-oss-120b"]
    assert oss.is_moe and (oss.num_experts, oss.experts_per_token) == (128, 4)
    assert (oss.kv_layers, oss.sliding_window, oss.windowed_share) == (18, 128, 0.5)  # every other layer windowed
    assert specs.kv_bytes_per_token(oss, "bf16") == 2 * 36 * 8 * 64 * 2  # the unit: a token held in every layer
    # A 24k context holds its 24k tokens in the 18 full layers and 128 in the windowed ones
    assert specs.windowed_tokens(24_000, oss.sliding_window, oss.windowed_share) == (18 * 24_000 + 18 * 128) / 36
    mla = {"hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128, "vocab_size": 129280,
           "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
           "num_experts_per_tok": 8, "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536,
           "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}
    deepseek = specs.model_spec_from_config("deepseek-v3-like", mla)
    assert specs.kv_bytes_per_token(deepseek, "fp8") == 61 * (512 + 64)
    assert deepseek.params_b == pytest.approx(671, rel=0.02) and deepseek.active_params_b == pytest.approx(37, rel=0.1)


LLAMA_LIKE = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
              "vocab_size": 32000, "intermediate_size": 14336, "max_position_embeddings": 32768}


@pytest.mark.parametrize(("extra", "full_layers", "window"), [
    ({"sliding_window": 4096}, 0, 4096),  # Mistral-7B-v0.1: vLLM windows every layer of a config without layer types
    ({"sliding_window": 4096, "use_sliding_window": False}, None, 0),  # Qwen2's unused window
    ({"sliding_window": None}, None, 0),
    ({"sliding_window": 32768}, None, 0),  # as long as the context: no window
    ({"sliding_window": 4096, "model_type": "gemma2"}, 16, 4096),  # every other layer
    ({"sliding_window": 1024, "sliding_window_pattern": 6}, 5, 1024),  # Gemma-3: every sixth layer full
    ({"sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 16}, 16, 128),
])
def test_windowed_layers_follow_how_vllm_reads_the_config(extra, full_layers, window):
    model = specs.model_spec_from_config("m", {**LLAMA_LIKE, **extra})
    assert (model.kv_layers, model.sliding_window) == (full_layers, window)
    assert model.windowed_share == (0.0 if full_layers is None else (32 - full_layers) / 32)


def test_windowed_attention_counts_the_pairs_a_window_leaves():
    # One windowed layer of window W over a prompt of I tokens attends I*W - W^2/2 query-key pairs; the full-attention
    # prompt length with the same pairs (I'^2 / 2) is the equivalent the prefill features use.
    prompt, window = 32_000, 4096
    pairs = prompt * window - window**2 / 2
    equivalent = specs.windowed_attention_len(prompt, window, 1.0)
    assert prompt * equivalent / 2 == pytest.approx(pairs)
    assert specs.windowed_attention_len(3000, window, 1.0) == 3000  # inside the window: full attention
    assert specs.windowed_attention_len(prompt, window, 0.0) == prompt
    half = specs.windowed_attention_len(prompt, window, 0.5)
    assert half == pytest.approx((prompt + equivalent) / 2)


def test_spec_loader_rejects_a_bad_file(tmp_path):
    good = (DATA / "gpu_specs.csv").read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "gpu_specs.csv"
    bad.write_text("\n".join([good[0], good[1].replace(",3.35,", ",fast,")]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"gpu_specs.csv, line 2, column 'mem_bandwidth_tb_s': expected a number"):
        specs.load_gpu_specs(bad)
    missing = tmp_path / "model_specs.csv"
    missing.write_text("model,params_b\nx,1\n", encoding="utf-8")
    with pytest.raises(InputError, match="missing column"):
        specs.load_model_specs(missing)
    dup = tmp_path / "dup.csv"
    dup.write_text("\n".join([good[0], good[1], good[1]]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 3.*duplicate gpu 'h100'"):
        specs.load_gpu_specs(dup)


def test_routers_that_collapse_under_dummy_weights_are_known_from_the_config():
    assert specs.model_facts("ernie-4.5-21b-a3b").dummy_routing_collapse  # vLLM builds its e_score_correction_bias
    assert specs.model_facts("deepseek-v2-lite").dummy_routing_collapse  # softmax in bf16 before a grouped top-k
    for name in ("qwen3-30b-a3b", "olmoe-1b-7b", "mixtral-8x7b", "llama-3.1-8b"):
        assert not specs.model_facts(name).dummy_routing_collapse
    qwen = json.loads((specs.MODELS_DIR / "qwen3-30b-a3b" / "config.json").read_text())
    assert specs.model_spec_from_config("x", dict(qwen, topk_method="noaux_tc")).dummy_routing_collapse  # DeepSeek-V3 style
    assert specs.model_spec_from_config("x", dict(qwen, use_expert_bias=True)).dummy_routing_collapse
    deepseek = json.loads((specs.MODELS_DIR / "deepseek-v2-lite" / "config.json").read_text())
    assert not specs.model_spec_from_config("x", dict(deepseek, moe_router_dtype="float32")).dummy_routing_collapse
    dense = json.loads((specs.MODELS_DIR / "llama-3.1-8b" / "config.json").read_text())
    assert not specs.model_spec_from_config("x", dict(dense, topk_method="noaux_tc")).dummy_routing_collapse
