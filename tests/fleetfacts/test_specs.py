"""fleetfacts.specs: the bundled GPU and model tables load, their helpers are right, a bad table is refused."""

from __future__ import annotations

import pandas as pd
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
    table = pd.read_csv(DATA / "model_specs.csv").set_index("model")
    r = table.loc[name]
    h, hd = r.hidden_size, r.head_dim
    attention = 2 * h * r.num_attention_heads * hd + 2 * h * r.num_kv_heads * hd
    per_layer = attention + 3 * h * r.intermediate_size + 2 * h
    params = r.num_layers * per_layer + 2 * r.vocab_size * h + h
    assert r.params_b == pytest.approx(params / 1e9, abs=0.01)


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
