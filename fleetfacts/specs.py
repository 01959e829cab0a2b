"""GPU datasheet figures and model architecture facts: the one reader of the spec tables.

fleetfacts/data/gpu_specs.csv holds NVIDIA datasheet figures per GPU slug (memory,
memory bandwidth, dense BF16/FP8 tensor throughput); fleetfacts/data/model_specs.csv
reads Hugging Face config.json files: the bundled ones under fleetfacts/models/<slug>/
(popular families, sources in fleetfacts/models/README.md), a checkpoint dir, or a
config-only dir under profiles/models.  `model_spec_from_config` derives total and
active parameters (dense, Mixtral / Qwen3-MoE / gpt-oss experts), tied embeddings, KV
geometry (GQA; MLA latent KV where present; layers that attend within a sliding window and what they hold)
and the context window.
The planner's curve fitter and the measure side's roofline and estimates both read
them here: `weight_bytes` (all weights resident, MoE experts included),
`weight_bytes_read_per_step` and `kv_bytes_per_token`.  A malformed table raises
InputError naming the file, the line and the column.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from fleetfacts.bundle import PROFILES_DIR
from fleetfacts.errors import InputError
from fleetfacts.schema import read_csv_text, row_lines, slug

log = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "data"
GPU_SPECS_CSV = DATA_DIR / "gpu_specs.csv"
# Bundled Hugging Face config.json files, one folder per model slug (fleetfacts/models/README.md: sources).
BUNDLED_CONFIGS_DIR = Path(__file__).resolve().parent / "models"
# Config-only model folders (config.json, no weights) that the profiles were measured with.
MODELS_DIR = PROFILES_DIR / "models"

# Bytes per stored value for each precision slug (quantisation scales are a
# fraction of a percent of the weights and are ignored).
BYTES_PER_VALUE = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5, "int4": 0.5}

# assumption: a precision the table does not know (awq, gptq, ...) counted at 16 bits per weight, where a
# caller asks for a default (measure's time estimates and roofline_frac); the planner raises instead.
UNKNOWN_PRECISION_BYTES = 2.0

GPU_COLUMNS = {"gpu": "slug", "name": "str", "arch": "str", "memory_gib": "pos", "mem_bandwidth_tb_s": "pos",
               "bf16_dense_tflops": "pos", "fp8_dense_tflops": "pos?", "fp4_dense_tflops": "pos?",
               "nvlink_gb_s": "pos?", "pcie_gb_s": "pos?", "source": "str", "date": "str"}
# Columns a table may leave out (read as ""): `arch`, added for the transfer's per-generation efficiencies.
OPTIONAL_COLUMNS = frozenset({"arch"})
MODEL_COLUMNS = {"model": "slug", "params_b": "pos", "num_layers": "int", "hidden_size": "int",
                 "num_attention_heads": "int", "num_kv_heads": "int", "head_dim": "int", "vocab_size": "int",
                 "is_moe": "bool", "active_params_b": "pos", "source": "str"}


@dataclass(frozen=True)
class GpuSpec:
    """One GPU type's datasheet figures (memory GiB, bandwidth TB/s, dense TFLOPS; fp8 None if absent)."""

    gpu: str
    memory_gib: float
    mem_bandwidth_tb_s: float
    bf16_dense_tflops: float
    source: str
    name: str = ""
    fp8_dense_tflops: float | None = None
    date: str = ""
    fp4_dense_tflops: float | None = None
    nvlink_gb_s: float | None = None   # per-GPU NVLink bandwidth, both directions together (datasheet figure)
    pcie_gb_s: float | None = None     # host link, both directions together: TP traffic's path without NVLink
    arch: str = ""                     # architecture generation (ampere, ada, hopper, blackwell); "" if unknown

    def dense_tflops(self, precision: str) -> float:
        """Dense tensor TFLOPS for a weight precision: fp8/fp4 where the GPU has them, else the bf16 figure
        (the GEMMs then run at 16 bits)."""
        key = slug(precision)
        if key in ("fp4", "int4") and self.fp4_dense_tflops:
            return self.fp4_dense_tflops
        if key in ("fp8", "int8", "fp4", "int4") and self.fp8_dense_tflops:
            return self.fp8_dense_tflops
        return self.bf16_dense_tflops

    def interconnect_gb_s(self) -> float | None:
        """Per-GPU bandwidth for tensor-parallel all-reduce: NVLink where present, else PCIe; None if unknown."""
        return self.nvlink_gb_s or self.pcie_gb_s


@dataclass(frozen=True)
class ModelSpec:
    """One model's architecture; params_b counts every weight (all experts, embeddings), active_params_b those
    used per token."""

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
    max_position: int | None = None
    intermediate_size: int = 0
    tied_embeddings: bool = False
    num_experts: int = 0              # routed experts per MoE layer (0: dense)
    experts_per_token: int = 0
    kv_layers: int | None = None      # layers with full attention, whose KV grows with context (None: all of them)
    sliding_window: int = 0           # the other layers' attention window, tokens (0: no windowed layers)
    window_by_layer: bool = False     # the config names which layers are windowed (else one window for all layers)
    mla_kv_dim: int = 0               # MLA: latent KV values per token per layer (kv_lora_rank + rope dim)
    native_quant: str = ""            # quantization_config.quant_method of the published checkpoint (mxfp4, fp8)
    expert_intermediate_size: int = 0  # a routed expert's MLP width (moe_intermediate_size); 0: dense or unknown
    dense_layers: int = 0             # MoE: leading layers with a dense MLP (DeepSeek, ERNIE-4.5), no routing
    dummy_routing_collapse: bool = False  # MoE: under vLLM's dummy weights every token picks the same experts

    @property
    def moe_layers(self) -> int:
        """Layers that route tokens to experts (0 for a dense model)."""
        return max(self.num_layers - self.dense_layers, 0) if self.is_moe else 0

    @property
    def windowed_share(self) -> float:
        """Share of the layers that attend within `sliding_window` (0 for a model without windowed layers)."""
        if not self.sliding_window or self.kv_layers is None:
            return 0.0
        return (self.num_layers - self.kv_layers) / self.num_layers

    @property
    def context_window(self) -> int | None:
        """Longest context the config allows (max_position_embeddings), tokens."""
        return self.max_position

    @property
    def active_params(self) -> float:
        """Weights used per token, as a count (MoE: the routed experts only)."""
        return self.active_params_b * 1e9

    @property
    def params(self) -> float:
        """Every weight, as a count."""
        return self.params_b * 1e9

    @property
    def params_per_expert(self) -> float:
        """Weights of one routed expert over all MoE layers (the params beyond the active ones, shared out
        over the experts a token does not use); 0 for a dense model."""
        if not self.is_moe or self.num_experts <= self.experts_per_token:
            return 0.0
        return (self.params - self.active_params) / (self.num_experts - self.experts_per_token)

    @property
    def embedding_params(self) -> float:
        """Weights of the input embedding table (vocab x hidden)."""
        return float(self.hidden_size * self.vocab_size)


def load_gpu_specs(path: str | Path | None = None) -> dict[str, GpuSpec]:
    """GPU slug -> GpuSpec from gpu_specs.csv (default: the bundled table); raises InputError."""
    rows = _load(Path(path) if path else GPU_SPECS_CSV, GPU_COLUMNS, "gpu")
    return {r["gpu"]: GpuSpec(**r) for r in rows}


def load_model_specs(path: str | Path | None = None) -> dict[str, ModelSpec]:
    """Model slug -> ModelSpec: from a model_specs.csv table at `path`, or (default) the bundled
    config.json files under fleetfacts/models (`bundled_model_configs`); raises InputError."""
    if path is None:
        return dict(bundled_model_configs())
    rows = _load(Path(path), MODEL_COLUMNS, "model")
    specs = {r["model"]: ModelSpec(**r) for r in rows}
    for spec in specs.values():
        if spec.active_params_b > spec.params_b:
            raise InputError(f"{path}: model {spec.model!r}: active_params_b "
                             f"({spec.active_params_b:g}) exceeds params_b ({spec.params_b:g})")
    return specs


def bytes_per_value(precision: str, default: float | None = None) -> float:
    """Bytes per weight or KV value for a precision slug; `default` for an unknown one, InputError without it."""
    key = slug(precision)
    if key not in BYTES_PER_VALUE:
        if default is not None:
            return default
        raise InputError(f"unknown precision {precision!r}; expected one of {', '.join(BYTES_PER_VALUE)}")
    return BYTES_PER_VALUE[key]


def weight_bytes(model: ModelSpec, precision: str, default_bytes: float | None = None) -> float:
    """Bytes of all weights held in GPU memory at `precision` (an MoE model keeps every expert resident);
    `default_bytes` per weight for an unknown precision, InputError without it."""
    return model.params_b * 1e9 * bytes_per_value(precision, default_bytes)


def weight_bytes_read_per_step(model: ModelSpec, precision: str, default_bytes: float | None = None) -> float:
    """Weights streamed by one decode step: all but the input embedding table (its rows are gathered)."""
    return (model.params - model.embedding_params) * bytes_per_value(precision, default_bytes)


def kv_bytes_per_token(model: ModelSpec, kv_precision: str) -> float:
    """KV-cache bytes per token of context held in every layer: 2 (K and V) x layers x KV heads x head_dim x bytes per
    value; MLA: layers x latent dim x bytes.  The unit KV capacity is counted in: a model with windowed layers holds
    fewer tokens in those (windowed_tokens)."""
    if model.mla_kv_dim:
        return float(model.num_layers * model.mla_kv_dim) * bytes_per_value(kv_precision)
    return 2.0 * model.num_layers * model.num_kv_heads * model.head_dim * bytes_per_value(kv_precision)


# Engines that window every layer of a config with one `sliding_window` and no per-layer types (Mistral-7B-v0.1):
# vLLM does (its cache config takes the model's window: vllm/engine/arg_utils.py, 0.12 and 0.26).  TensorRT-LLM
# windows attention only when told (max_attention_window_size): its published Mistral-7B rows (0.17) are predicted
# within 19% as full attention and off by 119% as windowed (`validate --transfer`), so there it is full attention.
# Layers a config names as windowed (gpt-oss, Gemma) are windowed by every engine.
SINGLE_WINDOW_ENGINES = frozenset({"vllm"})


def model_window(model: ModelSpec | None, engine: str) -> tuple[int, float]:
    """(window tokens, share of the layers windowed) of a model on an engine; (0, 0.0) for an unknown model, one
    without windowed layers, or one whose single window the engine does not apply (SINGLE_WINDOW_ENGINES)."""
    if model is None or not model.windowed_share or not (model.window_by_layer or engine in SINGLE_WINDOW_ENGINES):
        return 0, 0.0
    return model.sliding_window, model.windowed_share


def windowed_tokens(tokens: float, window: int, share: float) -> float:
    """A context of `tokens` counted over all layers when a `share` of them attend within `window` tokens: those
    hold and read at most the window (vLLM frees a windowed layer's blocks behind it), the others all of it.  The
    KV a request holds, and the KV a decode step reads, in kv_bytes_per_token's unit."""
    if not share or tokens <= window:
        return tokens
    return tokens - share * (tokens - window)


def windowed_attention_len(prompt_len: float, window: int, share: float) -> float:
    """The prompt length whose full causal attention costs what a prompt of `prompt_len` costs when a `share` of
    the layers attend within `window` tokens (FlashAttention skips the key tiles before it): a windowed layer
    attends I*W - W^2/2 query-key pairs where a full one attends I^2/2, so it counts as 2W - W^2/I."""
    if not share or prompt_len <= window:
        return prompt_len
    return prompt_len - share * (prompt_len - (2.0 * window - window * window / prompt_len))


def _load(path: Path, columns: dict[str, str], key: str) -> list[dict]:
    frame = read_csv_text(path)
    for column in OPTIONAL_COLUMNS & set(columns) - set(frame.columns):
        frame[column] = ""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(columns)}")
    rows, seen = [], set()
    for line, (_, raw) in zip(row_lines(frame), frame.iterrows(), strict=True):  # physical file lines
        row = {name: _value(raw[name], kind, path, line, name) for name, kind in columns.items()}
        if row[key] in seen:
            raise InputError(f"{path}, line {line}, column {key!r}: duplicate {key} {row[key]!r}")
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


# ---------------------------------------------------------------- one GPU, one model

@lru_cache(maxsize=1)
def bundled_gpu_specs() -> dict[str, GpuSpec]:
    """The bundled GPU table, read once."""
    return load_gpu_specs()


@lru_cache(maxsize=1)
def bundled_model_specs() -> dict[str, ModelSpec]:
    """The bundled model table, read once."""
    return load_model_specs()


# The bundled configs' sources: one table row per model slug, `| `slug` | https://huggingface.co/... | date |`.
MODEL_SOURCES_MD = BUNDLED_CONFIGS_DIR / "README.md"
_SOURCE_ROW = re.compile(r"^\|\s*`(?P<slug>[^`]+)`\s*\|\s*(?P<url>https?://\S+)\s*\|", re.M)


@lru_cache(maxsize=1)
def bundled_model_sources() -> dict[str, str]:
    """Model slug -> the URL its bundled config.json was written from (fleetfacts/models/README.md)."""
    text = MODEL_SOURCES_MD.read_text(encoding="utf-8") if MODEL_SOURCES_MD.is_file() else ""
    return {m.group("slug"): m.group("url") for m in _SOURCE_ROW.finditer(text)}


def gpu_spec(gpu: str) -> GpuSpec | None:
    """One GPU's datasheet figures from the bundled table; None when it is not listed."""
    return bundled_gpu_specs().get(slug(gpu))


def model_facts(model: str, model_dir: str | Path | None = None) -> ModelSpec | None:
    """Facts from `model_dir`/config.json, profiles/models/<model>, the bundled configs; None if unknown."""
    for directory in (model_dir, MODELS_DIR / model):
        config = load_model_config(directory) if directory else None
        if config:
            try:
                return model_spec_from_config(model, config, str(Path(directory or "") / "config.json"))
            except (KeyError, TypeError, ValueError) as err:
                log.warning("config.json in %s lacks %s: no model facts", directory, err)
    return bundled_model_specs().get(slug(model))


@lru_cache(maxsize=64)
def context_window(model: str) -> tuple[int, str] | None:
    """(max tokens of prompt + output, source) of a model: max_position_embeddings of its config.json; None if unknown."""
    facts = model_facts(model)
    if facts is None or not facts.max_position:
        return None
    source = facts.source
    root = str(MODELS_DIR.parent.parent) + "/"
    return int(facts.max_position), source[len(root):] if source.startswith(root) else source


def model_spec_from_config(model: str, config: dict[str, Any], source: str = "config.json") -> ModelSpec:
    """Parameters, experts, KV geometry and context window of a decoder from its Hugging Face config.json.

    Counts per layer: attention (q, k, v, o; MLA's low-rank projections where `kv_lora_rank` is set),
    the MLP (3 x hidden x intermediate: gate, up, down) or, for an MoE layer, every expert's MLP plus the
    router; two norms.  Plus the embedding table, the LM head unless tied, and the final norm.  Biases
    (Qwen2's q/k/v, gpt-oss's) are left out: under 0.1% of the weights.  Raises KeyError / ValueError
    for a config that lacks the fields.
    """
    config = config.get("text_config") or config
    hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    vocab = int(config["vocab_size"])
    tied = bool(config.get("tie_word_embeddings", False))
    attn, mla_dim = _attention_params(config, hidden, heads, kv_heads, head_dim)
    experts, per_token, mlp_total, mlp_active = _mlp_params(config, hidden, layers)
    embeddings = vocab * hidden * (1 if tied else 2) + hidden
    total = layers * (attn + 2 * hidden) + mlp_total + embeddings
    active = layers * (attn + 2 * hidden) + mlp_active + embeddings
    return ModelSpec(model=model, params_b=total / 1e9, num_layers=layers, hidden_size=hidden,
                     num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, vocab_size=vocab,
                     is_moe=experts > 0, active_params_b=active / 1e9, source=source,
                     max_position=config.get("max_position_embeddings"),
                     intermediate_size=int(config.get("intermediate_size") or 0), tied_embeddings=tied,
                     num_experts=experts, experts_per_token=per_token, **_window_layers(config, layers),
                     mla_kv_dim=mla_dim, native_quant=_native_quant(config),
                     expert_intermediate_size=_expert_width(config) if experts else 0,
                     dense_layers=_dense_layers(config, layers) if experts else 0,
                     dummy_routing_collapse=bool(experts) and _dummy_routing_collapses(config))


def _attention_params(config: dict[str, Any], hidden: int, heads: int, kv_heads: int,
                      head_dim: int) -> tuple[int, int]:
    """(attention weights per layer, MLA latent KV dim or 0)."""
    rank = config.get("kv_lora_rank")
    if not rank:
        return 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim, 0
    rope, nope = int(config["qk_rope_head_dim"]), int(config["qk_nope_head_dim"])
    v_dim, q_rank = int(config["v_head_dim"]), config.get("q_lora_rank")
    q = (hidden * int(q_rank) + int(q_rank) * heads * (nope + rope)) if q_rank else hidden * heads * (nope + rope)
    kv = hidden * (int(rank) + rope) + int(rank) * heads * (nope + v_dim)
    return q + kv + heads * v_dim * hidden, int(rank) + rope


def _mlp_params(config: dict[str, Any], hidden: int, layers: int) -> tuple[int, int, int, int]:
    """(routed experts, experts per token, MLP weights of all layers, MLP weights used per token).

    Shared experts run for every token: DeepSeek's and ERNIE-4.5's count of expert-width MLPs
    (`n_shared_experts`, `moe_num_shared_experts`), Qwen2-MoE's one MLP of `shared_expert_intermediate_size`.
    Dense layers before the first MoE layer: DeepSeek's `first_k_dense_replace`, ERNIE's `moe_layer_start_index`.
    """
    experts = _first(config.get("num_local_experts") or config.get("num_experts") or config.get("n_routed_experts")
                     or config.get("moe_num_experts"))
    dense_inter = int(config.get("intermediate_size") or 0)
    if not experts:
        return 0, 0, layers * 3 * hidden * dense_inter, layers * 3 * hidden * dense_inter
    per_token = int(config.get("num_experts_per_tok") or config.get("experts_per_token") or config.get("moe_k") or 1)
    expert_inter = _expert_width(config)
    shared_count = int(config.get("n_shared_experts") or config.get("moe_num_shared_experts") or 0)
    shared = 3 * hidden * (shared_count * expert_inter + int(config.get("shared_expert_intermediate_size") or 0))
    dense_layers = _dense_layers(config, layers)
    moe_layers = layers - dense_layers
    one_expert = 3 * hidden * expert_inter
    total = dense_layers * 3 * hidden * dense_inter + moe_layers * (experts * one_expert + shared + hidden * experts)
    active = dense_layers * 3 * hidden * dense_inter + moe_layers * (per_token * one_expert + shared + hidden * experts)
    return experts, per_token, total, active


def _dense_layers(config: dict[str, Any], layers: int) -> int:
    """Layers of an MoE model that run a dense MLP: those before the first MoE layer."""
    first_moe = int(config.get("first_k_dense_replace") or config.get("moe_layer_start_index") or 0)
    return min(max(first_moe, 0), layers)


# Routers whose top-k a dummy-weight profile cannot trust (vLLM 0.26, `load_format="dummy"`: every weight uniform in
# +-1e-3, so the router's logits are ~1e-5 and differ between experts by about as much).
# A per-expert selection bias (`e_score_correction_bias`), ~1e-3, outweighs them: vLLM builds it always for these
# model types, else where the config asks.
SELECTION_BIAS_MODEL_TYPES = frozenset({"ernie4_5_moe", "ernie4_5_vl_moe", "glm4_moe"})
SELECTION_BIAS_FLAGS = ("use_routing_bias", "use_expert_bias", "moe_router_enable_expert_bias")
# DeepSeek's router (vLLM's `grouped_topk`, also with one group) takes the softmax in the gate's output dtype, bf16
# unless the config sets `moe_router_dtype` float32: 64 scores of 1/64 * (1 +- 1e-5) all round to 1/64, the top-k of
# ties is the same for every token.
BF16_SOFTMAX_TOPK_MODEL_TYPES = frozenset({"deepseek_v2", "deepseek_v3"})


def _dummy_routing_collapses(config: dict[str, Any]) -> bool:
    """Whether vLLM's dummy weights send every token to the same experts, so that a dummy-weight profile measures k
    of E experts per layer, not the model's routing. Measured on the H100: ERNIE-4.5-21B-A3B (selection bias)
    decoded batch 16 in 4.7 ms, DeepSeek-V2-Lite (bf16 softmax) batch 64 in 5.7 ms, where reading the experts a
    uniform routing touches takes about 10 and 9 ms at the datasheet bandwidth."""
    selection_bias = (config.get("model_type") in SELECTION_BIAS_MODEL_TYPES or config.get("topk_method") == "noaux_tc"
                      or any(bool(config.get(flag)) for flag in SELECTION_BIAS_FLAGS))
    bf16_softmax = (config.get("model_type") in BF16_SOFTMAX_TOPK_MODEL_TYPES
                    and config.get("moe_router_dtype") != "float32")
    return selection_bias or bf16_softmax


def _first(value: Any) -> int:
    """An int from a config field that may be a per-modality list (ERNIE-4.5-VL's `moe_num_experts`)."""
    if isinstance(value, list):
        value = value[0] if value else 0
    return int(value or 0)


def _expert_width(config: dict[str, Any]) -> int:
    """A routed expert's MLP width: moe_intermediate_size where the config has one, else intermediate_size."""
    return _first(config.get("moe_intermediate_size") or config.get("intermediate_size"))


def _native_quant(config: dict[str, Any]) -> str:
    """The published checkpoint's weight format (quantization_config.quant_method, e.g. gpt-oss's mxfp4), or ""."""
    quant = config.get("quantization_config")
    return slug(str(quant.get("quant_method", ""))) if isinstance(quant, dict) else ""


def _window_layers(config: dict[str, Any], layers: int) -> dict[str, Any]:
    """kv_layers (full-attention layers) and sliding_window of a config, as vLLM decides which layers attend within
    a window: a config's `layer_types` (gpt-oss, Gemma-2/3 as transformers writes them); else Gemma-2's every other
    layer and Gemma-3's `sliding_window_pattern`; else a `sliding_window` on every layer unless `use_sliding_window`
    is false (Mistral-7B-v0.1: vLLM sets the cache config's window for a model without per-layer types; Qwen2's
    configs carry a window they do not use).  A window as long as the context window is none."""
    window = int(config.get("sliding_window") or 0)
    context = int(config.get("max_position_embeddings") or 0)
    if window <= 0 or config.get("use_sliding_window") is False or (context and window >= context):
        return {"kv_layers": None, "sliding_window": 0}
    types, by_layer = config.get("layer_types"), True
    if types:
        windowed = sum(1 for kind in types if "sliding" in str(kind))
    elif config.get("model_type") == "gemma2":
        windowed = sum(1 for i in range(layers) if (i + 1) % 2)
    elif config.get("sliding_window_pattern"):
        pattern = int(config["sliding_window_pattern"])
        windowed = sum(1 for i in range(layers) if (i + 1) % pattern)
    else:
        windowed, by_layer = layers, False
    if not windowed:
        return {"kv_layers": None, "sliding_window": 0}
    return {"kv_layers": layers - windowed, "sliding_window": window, "window_by_layer": by_layer}


@lru_cache(maxsize=1)
def bundled_model_configs() -> dict[str, ModelSpec]:
    """Model slug -> facts derived from each bundled fleetfacts/models/<slug>/config.json."""
    out = {}
    for path in sorted(BUNDLED_CONFIGS_DIR.glob("*/config.json")):
        with open(path, encoding="utf-8") as handle:
            out[path.parent.name] = model_spec_from_config(path.parent.name, json.load(handle),
                                                           f"fleetfacts/models/{path.parent.name}/config.json")
    return out


def load_model_config(model_dir: str | Path) -> dict[str, Any] | None:
    """A checkpoint's config.json as a dict; None when the folder has none."""
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as handle:
        config: dict[str, Any] = json.load(handle)
    return config
