"""GPU and model facts for estimates and the roofline: spec tables and config.json.

GPU figures come from planner/data/gpu_specs.csv (columns gpu, name,
memory_gib, mem_bandwidth_tb_s, bf16_dense_tflops, source, date), read
by path.  Model sizes
come from a Hugging Face config.json (a config-only dir under profiles/models)
or planner/data/model_specs.csv.
"""

from __future__ import annotations

import csv
import json
import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
GPU_SPECS_CSV = REPO_ROOT / "planner" / "data" / "gpu_specs.csv"
MODEL_SPECS_CSV = REPO_ROOT / "planner" / "data" / "model_specs.csv"
MODELS_DIR = REPO_ROOT / "profiles" / "models"
# Bytes per weight for each precision label (fp8/fp4 weights; scales are negligible).
BYTES_PER_PARAM = {"bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5, "int4": 0.5}


@dataclass(frozen=True)
class GpuSpec:
    gpu: str
    memory_gib: float
    mem_bandwidth_tb_s: float
    bf16_tflops: float
    source: str


@dataclass(frozen=True)
class ModelFacts:
    """Architecture facts; params counts every weight, embedding included."""

    params: float
    num_layers: int
    hidden_size: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    embedding_params: float
    max_position: int | None = None

    def weight_bytes_read_per_step(self, precision: str) -> float:
        """Weights streamed by one decode step: all but the input embedding table (rows are gathered)."""
        return (self.params - self.embedding_params) * BYTES_PER_PARAM.get(precision, 2.0)

    def weight_bytes(self, precision: str) -> float:
        return self.params * BYTES_PER_PARAM.get(precision, 2.0)

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """K and V of every layer for one token of context."""
        return 2.0 * self.num_layers * self.num_kv_heads * self.head_dim * kv_dtype_bytes


def model_facts_from_config(config: dict) -> ModelFacts:
    """Parameter count and KV geometry of a dense decoder from its HF config.json dict."""
    hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    vocab, inter = int(config["vocab_size"]), int(config["intermediate_size"])
    attn = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    per_layer = attn + 3 * hidden * inter + 2 * hidden
    embed = vocab * hidden
    head = 0 if config.get("tie_word_embeddings") else vocab * hidden
    return ModelFacts(params=float(layers * per_layer + embed + head + hidden), num_layers=layers,
                      hidden_size=hidden, num_kv_heads=kv_heads, head_dim=head_dim, vocab_size=vocab,
                      embedding_params=float(embed), max_position=config.get("max_position_embeddings"))


def load_model_config(model_dir: str | Path) -> dict | None:
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def model_facts(model: str, model_dir: str | Path | None = None) -> ModelFacts | None:
    """Facts from `model_dir`/config.json, profiles/models/<model>, or model_specs.csv; None if unknown."""
    for directory in (model_dir, MODELS_DIR / model):
        config = load_model_config(directory) if directory else None
        if config:
            try:
                return model_facts_from_config(config)
            except (KeyError, TypeError, ValueError) as err:
                log.warning("config.json in %s lacks %s: no model facts", directory, err)
    return _model_facts_from_table(model)


def _model_facts_from_table(model: str) -> ModelFacts | None:
    for row in _read_csv(MODEL_SPECS_CSV):
        if row.get("model", "").strip().lower() == model:
            try:
                hidden, vocab = int(row["hidden_size"]), int(row["vocab_size"])
                return ModelFacts(params=float(row["params_b"]) * 1e9, num_layers=int(row["num_layers"]),
                                  hidden_size=hidden, num_kv_heads=int(row["num_kv_heads"]),
                                  head_dim=int(row["head_dim"]), vocab_size=vocab,
                                  embedding_params=float(hidden * vocab))
            except (KeyError, ValueError):
                return None
    return None


def gpu_spec(gpu: str) -> GpuSpec | None:
    """One GPU's datasheet figures from the spec table; None when the table or the row is missing."""
    for row in _read_csv(GPU_SPECS_CSV):
        if row.get("gpu", "").strip().lower() == gpu:
            try:
                return GpuSpec(gpu=gpu, memory_gib=float(row["memory_gib"]),
                               mem_bandwidth_tb_s=float(row["mem_bandwidth_tb_s"]),
                               bf16_tflops=float(row.get("bf16_dense_tflops") or row["bf16_tflops"]),
                               source=f"{row.get('source', '')} ({row.get('date', '')})")
            except (KeyError, ValueError) as err:
                log.warning("%s: bad row for %s (%s)", GPU_SPECS_CSV, gpu, err)
                return None
    return None


def _read_csv(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(line for line in handle if not line.startswith("#")))
