"""Rough GPU-time estimates for a sweep's points (dry run and the --max-time guard).

Every number here is an `assumption:` used only to schedule and to stop before a
device call's limit; none of it is written into a profile.  A decode step of
`b` sequences at context `c` is taken as
    STEP_OVERHEAD_S + (weights + b*c*kv_per_token) / (tp * bandwidth * BANDWIDTH_EFFICIENCY)
and a prefill of `n` tokens of prompts `I` long as
    n * (2*params + 2*layers*hidden*I) / (tp * bf16_flops * FLOPS_EFFICIENCY).
While a sweep runs, the guard rescales estimates by the measured/estimated ratio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fleetfacts.roofline import kv_cache_tokens, min_step_time_s, replica_memory_bytes
from fleetfacts.specs import (
    UNKNOWN_PRECISION_BYTES,
    GpuSpec,
    ModelSpec,
    kv_bytes_per_token,
    model_window,
    weight_bytes,
    weight_bytes_read_per_step,
    windowed_tokens,
)
from measure.points import Point

# assumption: vLLM V1 spends a few ms of scheduling and launch per step beside the GPU work.
STEP_OVERHEAD_S = 0.004
# assumption: decode sustains ~70% of datasheet memory bandwidth on Hopper-class GPUs.
BANDWIDTH_EFFICIENCY = 0.7
# assumption: chunked prefill sustains ~45% of datasheet dense BF16 FLOPs.
FLOPS_EFFICIENCY = 0.45
# Measured on the lent H200 (shared GPU notes, 2026-12-02): LLM(...) to ready, 8B model, fresh machine 60-70 s.
ENGINE_START_S = 70.0
# assumption: per-point fixed cost (prompt building, warm-up of the shape, result parsing).
POINT_FIXED_S = 1.0
# assumption: engine caps when the engine has not reported them yet (vLLM 0.26 defaults seen on H200).
DEFAULT_MAX_NUM_SEQS = 1024
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
# assumption (fallback when the GPU is not in the spec table): H100 SXM datasheet-class figures.
FALLBACK_GPU = GpuSpec(gpu="unknown", memory_gib=80.0, mem_bandwidth_tb_s=3.35, bf16_dense_tflops=989.0,
                       source="assumption: H100-SXM-class datasheet figures, GPU not in the spec table")
# assumption (fallback when the model is unknown): an 8B Llama-like dense model.
FALLBACK_MODEL = ModelSpec(model="unknown", params_b=8.0, num_layers=32, hidden_size=4096, num_attention_heads=32,
                           num_kv_heads=8, head_dim=128, vocab_size=128256, is_moe=False, active_params_b=8.0,
                           source="assumption: model unknown, estimated as an 8B Llama-like dense model")


@dataclass(frozen=True)
class Estimator:
    """Estimates the seconds a point takes on one replica (labelled assumption)."""

    gpu: GpuSpec
    model: ModelSpec
    precision: str = "bf16"
    tp: int = 1
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    kv_cache_tokens: int | None = None
    kv_precision: str = "bf16"
    engine: str = "vllm"

    def kv_tokens(self) -> float:
        """KV-cache tokens of the replica: as reported, else what the memory share leaves after the weights."""
        if self.kv_cache_tokens:
            return float(self.kv_cache_tokens)
        weights = weight_bytes(self.model, self.precision, UNKNOWN_PRECISION_BYTES)
        return kv_cache_tokens(replica_memory_bytes(self.gpu.memory_gib, self.tp), weights,
                               kv_bytes_per_token(self.model, self.kv_precision),
                               memory_fraction=DEFAULT_GPU_MEMORY_UTILIZATION)

    def cap(self, input_len: int, output_len: int) -> int:
        return max(1, min(self.max_num_seqs, int(self.kv_tokens() // self._held(input_len + output_len))))

    def _held(self, context: float) -> float:
        """KV tokens a context holds (windowed layers hold their window: fleetfacts.specs.windowed_tokens)."""
        return windowed_tokens(context, *model_window(self.model, self.engine))

    def step_s(self, batch: float, context: float) -> float:
        """One decode step of `batch` sequences at mean `context`, s: the roofline at the assumed efficiency."""
        weights = weight_bytes_read_per_step(self.model, self.precision, UNKNOWN_PRECISION_BYTES)
        kv = kv_bytes_per_token(self.model, self.kv_precision)
        bandwidth = self.gpu.mem_bandwidth_tb_s * 1e12 * BANDWIDTH_EFFICIENCY
        return STEP_OVERHEAD_S + min_step_time_s(weights, kv, batch, self._held(context), bandwidth, self.tp)

    def prefill_s(self, tokens: float, input_len: int) -> float:
        flops_per_token = 2 * self.model.params + 2 * self.model.num_layers * self.model.hidden_size * input_len
        return tokens * flops_per_token / (self.tp * self.gpu.bf16_dense_tflops * 1e12 * FLOPS_EFFICIENCY)

    def point_s(self, p: Point) -> float:
        """Seconds for the whole point (all its requests)."""
        n, i, o = p.requests, p.input_len, p.output_len
        if p.mode == "offline":
            width = min(n, self.cap(i, o))
            waves = math.ceil(n / width)
            decode = waves * (o - 1) * self.step_s(width, i + o / 2)
            return POINT_FIXED_S + self.prefill_s(n * i, i) + decode
        width = min(p.concurrency or self.cap(i, o), self.cap(i, o))
        if p.mode == "rate" and p.request_rate:
            return POINT_FIXED_S + n / p.request_rate + o * self.step_s(1, i + o / 2)
        per_request = self.prefill_s(i, i) + (o - 1) * self.step_s(width, i + o / 2)
        return POINT_FIXED_S + math.ceil(n / width) * per_request


def make_estimator(gpu: GpuSpec | None, model: ModelSpec | None, precision: str, tp: int,
                   kv_precision: str = "bf16", max_num_seqs: int | None = None,
                   engine: str = "vllm") -> tuple[Estimator, list[str]]:
    """An Estimator plus the list of fallbacks it had to assume (for the dry-run report)."""
    notes = []
    if gpu is None:
        notes.append(FALLBACK_GPU.source)
    if model is None:
        notes.append(FALLBACK_MODEL.source)
    est = Estimator(gpu=gpu or FALLBACK_GPU, model=model or FALLBACK_MODEL, precision=precision, tp=tp,
                    max_num_seqs=max_num_seqs or DEFAULT_MAX_NUM_SEQS, kv_precision=kv_precision, engine=engine)
    return est, notes
