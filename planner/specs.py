"""GPU datasheet figures and model architecture facts, from the bundled spec tables.

planner/data/gpu_specs.csv holds NVIDIA datasheet figures per GPU slug (memory,
memory bandwidth, dense BF16/FP8 tensor throughput); planner/data/model_specs.csv
holds Hugging Face config.json facts per model slug.  The curve fitter uses
them for a roofline floor and a KV-cache estimate: `weight_bytes` (all weights
resident, MoE experts included) and `kv_bytes_per_token`.  A malformed table
raises InputError naming the file, the line and the column.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fleetfacts.errors import InputError
from fleetfacts.schema import read_csv_text, slug

log = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "data"
GPU_SPECS_CSV = DATA_DIR / "gpu_specs.csv"
MODEL_SPECS_CSV = DATA_DIR / "model_specs.csv"

# Bytes per stored value for each precision slug (quantisation scales are a
# fraction of a percent of the weights and are ignored).
BYTES_PER_VALUE = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5, "int4": 0.5}

GPU_COLUMNS = {"gpu": "slug", "name": "str", "memory_gib": "pos", "mem_bandwidth_tb_s": "pos",
               "bf16_dense_tflops": "pos", "fp8_dense_tflops": "pos?", "source": "str", "date": "str"}
MODEL_COLUMNS = {"model": "slug", "params_b": "pos", "num_layers": "int", "hidden_size": "int",
                 "num_attention_heads": "int", "num_kv_heads": "int", "head_dim": "int", "vocab_size": "int",
                 "is_moe": "bool", "active_params_b": "pos", "source": "str"}


@dataclass(frozen=True)
class GpuSpec:
    """One GPU type's datasheet figures (memory GiB, bandwidth TB/s, dense TFLOPS; fp8 None if absent)."""

    gpu: str
    name: str
    memory_gib: float
    mem_bandwidth_tb_s: float
    bf16_dense_tflops: float
    fp8_dense_tflops: float | None
    source: str
    date: str


@dataclass(frozen=True)
class ModelSpec:
    """One model's architecture; params_b counts every weight (all experts), active_params_b those used per token."""

    model: str
    params_b: float
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    is_moe: bool
    active_params_b: float
    source: str


def load_gpu_specs(path: str | Path | None = None) -> dict[str, GpuSpec]:
    """GPU slug -> GpuSpec from gpu_specs.csv (default: the bundled table); raises InputError."""
    rows = _load(Path(path) if path else GPU_SPECS_CSV, GPU_COLUMNS, "gpu")
    return {r["gpu"]: GpuSpec(**r) for r in rows}


def load_model_specs(path: str | Path | None = None) -> dict[str, ModelSpec]:
    """Model slug -> ModelSpec from model_specs.csv (default: the bundled table); raises InputError."""
    rows = _load(Path(path) if path else MODEL_SPECS_CSV, MODEL_COLUMNS, "model")
    specs = {r["model"]: ModelSpec(**r) for r in rows}
    for spec in specs.values():
        if spec.active_params_b > spec.params_b:
            raise InputError(f"{path or MODEL_SPECS_CSV}: model {spec.model!r}: active_params_b "
                             f"({spec.active_params_b:g}) exceeds params_b ({spec.params_b:g})")
    return specs


def bytes_per_value(precision: str) -> float:
    """Bytes per weight or KV value for a precision slug; raises InputError for an unknown one."""
    key = slug(precision)
    if key not in BYTES_PER_VALUE:
        raise InputError(f"unknown precision {precision!r}; expected one of {', '.join(BYTES_PER_VALUE)}")
    return BYTES_PER_VALUE[key]


def weight_bytes(model: ModelSpec, precision: str) -> float:
    """Bytes of all weights held in GPU memory at `precision` (an MoE model keeps every expert resident)."""
    return model.params_b * 1e9 * bytes_per_value(precision)


def kv_bytes_per_token(model: ModelSpec, kv_precision: str) -> float:
    """KV-cache bytes per token of context: 2 (K and V) x layers x KV heads x head_dim x bytes per value."""
    return 2.0 * model.num_layers * model.num_kv_heads * model.head_dim * bytes_per_value(kv_precision)


def _load(path: Path, columns: dict[str, str], key: str) -> list[dict]:
    frame = read_csv_text(path)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(columns)}")
    rows, seen = [], set()
    for index, raw in frame.iterrows():
        row = {name: _value(raw[name], kind, path, int(index) + 2, name) for name, kind in columns.items()}
        if row[key] in seen:
            raise InputError(f"{path}, line {int(index) + 2}, column {key!r}: duplicate {key} {row[key]!r}")
        seen.add(row[key])
        rows.append(row)
    return rows


def _value(cell: object, kind: str, path: Path, line: int, column: str) -> object:
    text = str(cell).strip()
    where = f"{path}, line {line}, column {column!r}"
    if kind == "str":
        return text
    if kind == "slug":
        if not text:
            raise InputError(f"{where}: a value is required")
        return slug(text)
    if kind == "bool":
        if text.lower() not in ("true", "false"):
            raise InputError(f"{where}: expected true or false, got {text!r}")
        return text.lower() == "true"
    if kind == "pos?" and not text:
        return None
    return _number(text, kind, where)


def _number(text: str, kind: str, where: str) -> float | int:
    try:
        number = float(text)
    except ValueError:
        raise InputError(f"{where}: expected a number, got {text!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise InputError(f"{where}: expected a positive number, got {text!r}")
    if kind == "int":
        if not number.is_integer():
            raise InputError(f"{where}: expected a whole number, got {text!r}")
        return int(number)
    return number


def specs_frame(specs: dict[str, GpuSpec] | dict[str, ModelSpec]) -> pd.DataFrame:
    """The loaded specs as a DataFrame (one row per slug), for display."""
    return pd.DataFrame([vars(s) for s in specs.values()])
