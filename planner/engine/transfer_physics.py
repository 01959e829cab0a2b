"""The physics of a transfer: a target (model, GPU, precision, TP size, engine) and the physical quantity behind each
coefficient of the iteration-time model (weight and KV bytes over bandwidth, FLOPs over peak, all-reduces, per-
layer, per-request and per-routed-expert counts: physics_matrix); and the batch and token caps trtllm-bench runs the
published tables with.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from fleetfacts.moe_configs import vllm_moe_config_tuned
from fleetfacts.roofline import GIB, kv_cache_tokens
from fleetfacts.specs import GpuSpec, ModelSpec, bytes_per_value, kv_bytes_per_token, model_facts
from planner.engine.curves import (
    DEFAULT_CUDA_GRAPH_MAX_BATCH,
    KV_FREE_MEMORY_FRACTION,
    N_PARAMS,
    Caps,
    Curve,
    NoCurveError,
    expert_weight_bytes,
    model_expert_share,
    window_caps,
)

COEF_NAMES = ("weights", "step", "tp_latency", "decode_flops", "seq", "tp_bytes", "kv", "prefill_flops",
              "attn_flops", "request", "graph", "expert_tokens", "moe_step", "expert_graph", "moe_fixed",
              "untuned_pairs")
N_COEF = len(COEF_NAMES)
COEF_INDEX = {name: i for i, name in enumerate(COEF_NAMES)}
PRECISION_FAMILY = {"bf16": "16bit", "fp16": "16bit", "fp32": "16bit", "fp8": "fp8", "int8": "fp8",
                    "fp4": "fp4", "int4": "fp4"}
# Engines whose MoE decode runs vLLM's Triton fused-MoE kernel, tuned per expert shape and GPU where vLLM ships a
# config (fleetfacts.moe_configs): on its default config a routed (token, expert) pair costs more (untuned_pairs).
FUSED_MOE_CONFIG_ENGINES = frozenset({"vllm"})
# TP all-reduce traffic is in 16-bit activations whatever the weight precision.
ACTIVATION_BYTES = 2.0
# Quantised checkpoints (ModelOpt FP8/NVFP4, vLLM's fp8) keep the embeddings and the LM head in 16 bits.
UNQUANTISED = "bf16"
# KV-cache precision by engine and weight precision: vLLM keeps the model dtype (kv_cache_dtype=auto,
# bf16 for fp8 weights); TensorRT-LLM's quantised checkpoints use an fp8 KV cache.
KV_PRECISION = {"vllm": {}, "trtllm": {"fp8": "fp8", "fp4": "fp8"}}
DEFAULT_KV_PRECISION = "bf16"
# A natively MXFP4 checkpoint (gpt-oss) stores its experts in 4 bits and the rest in 16; its expert
# GEMMs take 8-bit activations where the GPU has FP4 tensor cores (Blackwell: MXFP8 x MXFP4) and 16-bit
# ones elsewhere (Hopper: BF16 x MXFP4, TensorRT-LLM's TRITON MoE backend), per TensorRT-LLM's gpt-oss
# deployment guide.
MXFP4 = "mxfp4"
# trtllm-bench's engine settings (tensorrt_llm/bench/build/build.py, calc_engine_setting and
# finetune_setting): KV share of the memory left after the weights, the batch and token caps, and the
# rounding steps of its "slightly optimistic" batch size and token budget.
BENCH_KV_FRACTION = 0.95
BENCH_MAX_BATCH = 4096
BENCH_MAX_TOKENS = 32768
BENCH_MIN_BATCH = 64
BENCH_MIN_TOKENS = 2048


@dataclass(frozen=True)
class Target:
    """What a curve is transferred to: engine, model facts, GPU facts, weight precision, TP size, and the
    engine version whose efficiencies apply ("" for the engine-wide ones)."""

    engine: str
    model: ModelSpec
    gpu: GpuSpec
    precision: str
    tp: int
    version: str = ""


def architecture(model: ModelSpec) -> str:
    """The attention/MLP family a model's speed physics belongs to: "moe", "mha dense" (as many KV heads as query
    heads) or "gqa dense"."""
    if model.is_moe:
        return "moe"
    return "mha dense" if model.num_kv_heads >= model.num_attention_heads else "gqa dense"


def kv_precision(engine: str, precision: str) -> str:
    """KV-cache precision an engine uses by default for a weight precision."""
    return KV_PRECISION.get(engine, {}).get(precision, DEFAULT_KV_PRECISION)


def host_tier_terms(model: ModelSpec, engine: str, precision: str, gib: float, gb_per_s: float
                    ) -> tuple[int, float]:
    """(KV tokens that `gib` GiB of host memory hold, seconds to bring one token's KV back at `gb_per_s` GB/s)
    for a replica of `model` on `engine` at `precision` (its KV precision: kv_precision)."""
    per_token = kv_bytes_per_token(model, kv_precision(engine, precision))
    return int(gib * GIB // per_token), per_token / (gb_per_s * 1e9)


# Host-to-GPU rate a host-tier KV hit comes back at, GB/s of KV: measured once, on an H100 with vLLM 0.26.0's
# native CPU offloading (`--kv-offloading-backend native --kv-offloading-size 8`, the prefix example in a 32k-token
# GPU cache, profiles/measured/h100/bench/2026-12-07-s18/call8): the rate at which the replayed requests' predicted
# TTFT p95 rises over the same replay without the tier as much as the measured one did (x1.065: 4 GB/s), far below
# PCIe 5.0 x16's 64 GB/s peak (vLLM copies each 16-token block layer by layer).  It folds in what writing every
# computed block to the host costs too.  One run on one GPU: tests/planner/test_gpu_prefix_replays.py.
HOST_LOAD_GB_PER_S = 4.0


@lru_cache(maxsize=64)
def with_host_tier(curve: Curve, gib: float, gb_per_s: float = HOST_LOAD_GB_PER_S) -> Curve | None:
    """`curve` with a host-memory KV tier of `gib` GiB behind each replica's prefix cache (vLLM's CPU offloading,
    LMCache): measured once, on an H100 (HOST_LOAD_GB_PER_S).  None where the model's KV bytes per token are unknown (no model
    facts).  The same curve and tier give the same object (the simulations memoised per curve reuse it)."""
    model = model_facts(curve.key.model)
    if model is None:
        return None
    tokens, load_s = host_tier_terms(model, curve.key.engine, curve.key.precision, gib, gb_per_s)
    caps = replace(curve.caps, host_kv_gib=float(gib), host_kv_tokens=tokens, host_load_s_per_token=load_s)
    return replace(curve, caps=caps)


def host_tier_gib(curve: object) -> float:
    """The host KV tier per replica a curve carries (with_host_tier); 0 for none, or a curve that has no caps."""
    return float(getattr(curve, "host_kv_gib", 0.0))


@dataclass(frozen=True)
class WeightPart:
    """Parameters stored and computed alike: counts (all and used per token), storage and compute precision."""

    total: float
    active: float
    stored: str
    computed: str


def weight_parts(t: Target) -> tuple[WeightPart, WeightPart]:
    """(body, LM head): the body is every GEMM weight but the LM head; see the module docstring."""
    m = t.model
    vh = float(m.vocab_size * m.hidden_size)
    embeddings = vh * (1 if m.tied_embeddings else 2)
    head = WeightPart(vh, vh, _unquantised(t.precision), _unquantised(t.precision))
    body = WeightPart(m.params - embeddings, m.active_params - embeddings, t.precision, t.precision)
    return body, head


def _unquantised(precision: str) -> str:
    return precision if bytes_per_value(precision) >= bytes_per_value(UNQUANTISED) else UNQUANTISED


def _body_parts(t: Target) -> list[WeightPart]:
    """The body split by how it is stored: a natively MXFP4 MoE's experts apart from the rest."""
    body, _ = weight_parts(t)
    m = t.model
    per_expert = m.params_per_expert
    if m.native_quant != MXFP4 or not per_expert:
        return [body]
    experts = WeightPart(per_expert * m.num_experts, per_expert * m.experts_per_token, "fp4",
                         "fp8" if t.gpu.fp4_dense_tflops else UNQUANTISED)
    rest = WeightPart(body.total - experts.total, body.active - experts.active, UNQUANTISED, UNQUANTISED)
    return [experts, rest]


def resident_weight_bytes(t: Target) -> float:
    """Bytes of all weights held in memory on the replica (embeddings included)."""
    m = t.model
    embeddings = float(m.vocab_size * m.hidden_size) * (1 if m.tied_embeddings else 2)
    return (sum(p.total * bytes_per_value(p.stored) for p in _body_parts(t))
            + embeddings * bytes_per_value(_unquantised(t.precision)))


def read_weight_bytes(t: Target) -> float:
    """Bytes one decode step streams (the LM head included; the input embedding is a gather)."""
    _, head = weight_parts(t)
    return sum(p.total * bytes_per_value(p.stored) for p in (*_body_parts(t), head))


def routed_expert_bytes(t: Target) -> float:
    """Bytes of every routed expert as stored (MXFP4 experts in 4 bits); 0 for a dense model."""
    parts = _body_parts(t)
    if len(parts) > 1:
        return parts[0].total * bytes_per_value(parts[0].stored)
    return expert_weight_bytes(t.model, t.precision)


def _gemm_s(parts: Iterable[WeightPart], t: Target) -> float:
    """Seconds of 2 FLOPs per active weight at the datasheet dense peak of each part's compute precision."""
    return sum(2.0 * p.active / (t.gpu.dense_tflops(p.computed) * 1e12 * t.tp) for p in parts)


def physics_matrix(t: Target) -> np.ndarray:
    """P (N_PARAMS x N_COEF): theta = P @ c for this target (see the module docstring)."""
    bw = t.gpu.mem_bandwidth_tb_s * 1e12
    bf16_flops = t.gpu.bf16_dense_tflops * 1e12 * t.tp  # attention runs in 16 bits
    m = t.model
    body, head = _body_parts(t), weight_parts(t)[1]
    p = np.zeros((N_PARAMS, N_COEF))
    experts = routed_expert_bytes(t)
    p[0, COEF_INDEX["weights"]] = (read_weight_bytes(t) - experts) / (t.tp * bw)
    p[7, COEF_INDEX["weights"]] = experts / (t.tp * bw)
    p[0, COEF_INDEX["step"]] = float(m.num_layers)
    p[0, COEF_INDEX["tp_latency"]] = 2.0 * m.num_layers if t.tp > 1 else 0.0
    p[1, COEF_INDEX["decode_flops"]] = _gemm_s([*body, head], t)
    p[1, COEF_INDEX["seq"]] = float(m.num_layers)
    p[1, COEF_INDEX["tp_bytes"]] = p[3, COEF_INDEX["tp_bytes"]] = _allreduce_s_per_token(t)
    p[2, COEF_INDEX["kv"]] = kv_bytes_per_token(m, kv_precision(t.engine, t.precision)) / (t.tp * bw)
    p[3, COEF_INDEX["prefill_flops"]] = _gemm_s(body, t)
    # Every layer's attention, windowed layers' counted at their window by the prefill features (Caps.window)
    p[4, COEF_INDEX["attn_flops"]] = 2.0 * m.num_layers * m.num_attention_heads * m.head_dim / bf16_flops
    p[5, COEF_INDEX["request"]] = 1.0
    p[5, COEF_INDEX["prefill_flops"]] = _gemm_s([head], t)  # one LM-head row per prompt
    p[6, COEF_INDEX["graph"]] = 1.0  # host-side work per sequence run outside the graphs, not per layer
    if m.is_moe:  # routed (token, expert) pairs per token on one GPU: dispatch, combine, small grouped GEMMs
        pairs = m.moe_layers * m.experts_per_token / t.tp
        p[1, COEF_INDEX["expert_tokens"]] = p[3, COEF_INDEX["expert_tokens"]] = p[6, COEF_INDEX["expert_graph"]] = pairs
        if on_default_moe_config(t):
            p[1, COEF_INDEX["untuned_pairs"]] = pairs
        p[0, COEF_INDEX["moe_step"]] = float(m.moe_layers)
        p[0, COEF_INDEX["moe_fixed"]] = 1.0  # once per step, whatever the layer count
    return p


def on_default_moe_config(t: Target) -> bool:
    """Whether the target decodes its experts on vLLM's default fused-MoE config: no tuned file for its shape."""
    return t.engine in FUSED_MOE_CONFIG_ENGINES and vllm_moe_config_tuned(t.gpu.gpu, t.model, t.precision,
                                                                          t.tp) is False


def gemm_path(t: Target) -> str:
    """The GEMM kernels' precision family: 16bit, fp8 or fp4, or for a natively MXFP4 checkpoint its
    weight format and activation precision (mxfp4-bf16 on Hopper, mxfp4-fp8 on Blackwell): other kernels."""
    parts = _body_parts(t)
    if len(parts) > 1:
        return f"{t.model.native_quant}-{parts[0].computed}"
    return PRECISION_FAMILY.get(t.precision, t.precision)


def _allreduce_s_per_token(t: Target) -> float:
    """Seconds of ring all-reduce traffic per token at the datasheet interconnect bandwidth."""
    if t.tp <= 1:
        return 0.0
    link = t.gpu.interconnect_gb_s()
    if not link:
        raise NoCurveError(f"{t.gpu.gpu}: no interconnect bandwidth in gpu_specs.csv; cannot transfer to tp={t.tp}")
    per_layer = 2.0 * (t.tp - 1) / t.tp * t.model.hidden_size * ACTIVATION_BYTES
    return 2.0 * t.model.num_layers * per_layer / (link * 1e9 / 2.0)  # one direction of the both-ways figure


def levels(t: Target) -> tuple[tuple[str, str], ...]:
    """The (kind, value) levels whose efficiency effects apply to the target (EFFECT_COEFS)."""
    out = [("precision", gemm_path(t))]
    if t.gpu.arch:
        out.append(("arch", t.gpu.arch))
    if t.version:
        out.append(("version", t.version))
    return tuple(out)


def trtllm_bench_caps(t: Target, input_len: float, output_len: float) -> Caps:
    """The caps trtllm-bench gives a throughput run of fixed ISL/OSL (calc_engine_setting): its batch
    size and token budget from the requests the KV cache holds, and the KV tokens the runtime gets."""
    kv_token = 2.0 * t.model.num_layers * max(t.tp, t.model.num_kv_heads) * t.model.head_dim \
        * bytes_per_value(kv_precision(t.engine, t.precision))
    memory = t.gpu.memory_gib * GIB * t.tp
    free = memory - resident_weight_bytes(t)
    requests = BENCH_KV_FRACTION * max(free, 0.0) / (kv_token * (input_len + output_len))
    raw_bs = min(requests, BENCH_MAX_BATCH)
    raw_tokens = min(raw_bs * (1.0 + input_len / output_len), BENCH_MAX_TOKENS)
    tokens = kv_cache_tokens(memory, resident_weight_bytes(t), kv_bytes_per_token(
        t.model, kv_precision(t.engine, t.precision)), free_fraction=KV_FREE_MEMORY_FRACTION)
    return Caps(_bench_round_batch(raw_bs), max(1, int(tokens)), _bench_round_tokens(raw_tokens),
                DEFAULT_CUDA_GRAPH_MAX_BATCH.get(t.engine, 10**9), model_expert_share(t.model),
                **window_caps(t.model, t.engine))


def _bench_round_batch(raw: float) -> int:
    if raw < 256:
        return max(BENCH_MIN_BATCH, 32 * math.ceil(raw / 32))
    step = 128 if raw < 1024 else 256
    return step * math.ceil(raw / step)


def _bench_round_tokens(raw: float) -> int:
    if raw < 4096:
        return max(BENCH_MIN_TOKENS, 256 * math.ceil(raw / 256))
    step = 512 if raw < 8192 else 1024
    return step * math.ceil(raw / step)
