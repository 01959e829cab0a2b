"""Fitted performance curves: one iteration-time model per profile group.

A group is (engine, engine_version, gpu, model, precision, tp, config): a
profile measured with non-default engine settings (config, e.g. tuned) is its
own curve, never merged with the defaults' one.  A continuous-batching engine
(vLLM, TensorRT-LLM in-flight batching) spends its time in iterations; one
iteration that decodes `b` sequences of mean context `c` tokens and prefills
`p` prompt tokens of prompts `I` tokens long takes

    t(b, c, p) = t0 + a*b + k*b*c + q*p + r*p*I + m*cover(b + p)      [seconds]

t0: fixed cost per step (weights read once: the memory-bandwidth floor, plus
launch overhead); a: per-sequence cost; k: KV-cache read per token of context;
q: per prefill token; r: prefill attention, growing with prompt length.  A
sixth parameter h is the engine's per-request overhead (scheduling, input and
output processing), paid once per request.  A seventh, g, is the extra cost
per sequence beyond the engine's largest CUDA-graph batch (vLLM captures
graphs up to 512 sequences by default; larger decode batches run piecewise,
which measurably costs more per sequence on the H200).  An eighth, m, is a
mixture-of-experts model's expert weights read once (all experts): a step
whose n tokens are each routed to k of E experts reads the distinct experts
touched, expected E*cover(n) with cover(n) = 1 - (1 - k/E)^n (uniform
routing, the stated default assumption; trained routers are less uniform).
At batch 1 a decode step reads k experts, at large batches all of them.  For
a dense model cover is 0 and m is not fitted; for an MoE model t0 keeps the
rest (attention, router, shared experts, LM head, launch overhead).

Every quantity a profile measures -- the duration of an offline batch, the
mean end-to-end time of a request at fixed concurrency, the mean TPOT and
TTFT -- is then a *linear* function of theta = (t0, a, k, q, r, h) with
features that depend only on the shape (input_len, output_len, batch or
concurrency) and on the engine's caps (max_num_seqs, KV-cache tokens, token
budget per step).  So a group is fitted by bounded linear least squares on
relative errors (`scipy.optimize.lsq_linear`): unique, fast, and with a
parameter covariance that gives each prediction an interval.  t0 is bounded
below by the roofline (weight bytes over the GPU's memory bandwidth).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
from packaging.version import InvalidVersion, Version

from fleetfacts.arrivals import arrival_cv
from fleetfacts.bundle import PROFILES_DIR
from fleetfacts.errors import FleetplanError, InputError
from fleetfacts.roofline import kv_cache_tokens, replica_memory_bytes, weights_read_s
from fleetfacts.schema import DEFAULT_CONFIG, PROFILE, PROFILE_GROUP, load_tables
from fleetfacts.specs import (
    GpuSpec,
    ModelSpec,
    bytes_per_value,
    kv_bytes_per_token,
    load_gpu_specs,
    load_model_specs,
    model_window,
    weight_bytes,
    windowed_attention_len,
    windowed_tokens,
)
from planner.engine.fitcache import memo, memo_frame
from planner.engine.frontend import FrontEnd

log = logging.getLogger(__name__)

# Folders of this name under a profiles directory hold a device call's records (logs, the inputs of a replay: a
# plan, its routes), not profiles: their CSVs are not read as profiles.
RUN_RECORDS_DIR = "bench"
BUNDLED_PROFILES_DIR = PROFILES_DIR  # profiles/ of the checkout, or of the installed package (fleetfacts.bundle)
PARAM_NAMES = ("t0", "a", "k", "q", "r", "h", "g", "m")
N_PARAMS = len(PARAM_NAMES)

# Run-to-run noise of vLLM throughput on an H200 is about +-2%: no fit is trusted to be tighter.
NOISE_FLOOR = 0.02
# Two-sided ~90% interval.
Z_90 = 1.645
# Outside the measured range the interval widens by this factor per e-fold (log unit) of distance.
EXTRAPOLATION_WIDENING = 1.0
# Far outside the measured range the interval says no more than "within this factor either way":
# the relative SD is capped there, so exp() stays finite and the prediction stays labelled extrapolated.
MAX_INTERVAL_FACTOR = 10.0
MAX_RELATIVE_SD = math.log(MAX_INTERVAL_FACTOR) / Z_90
# Latency observations count less than throughput ones: they carry scheduler jitter.
LATENCY_WEIGHT = 0.5
TTFT_WEIGHT = 0.3
# Offline batches "large enough to saturate" when asking for saturated throughput: this many caps.
SATURATION_WAVES = 20
# Largest decode batch the engine runs as one captured CUDA graph (vLLM: max_cudagraph_capture_size
# default 512; TensorRT-LLM's perf-overview configs capture batch sizes up to 8192).
DEFAULT_CUDA_GRAPH_MAX_BATCH = {"vllm": 512, "trtllm": 8192, "nim": 8192}
# Beyond its largest CUDA graph vLLM launches every kernel from the host. On the H200 (vLLM 0.26) the GPU was then
# 15-53% busy for small-expert MoE models and FP8 (Granite-3.1-3B-A800M, OLMoE-1B-7B, Qwen3-30B-A3B, Qwen2.5-7B FP8;
# 90-100% for Mixtral and dense bf16), and graphs captured to 1024 ran Granite 2.2-3.4x faster: the step is
# max(GPU time, host time), which the curves do not model (profiles/measured/h200/RUNS.md). Predictions there
# carry this note.
HOST_BOUND_ENGINES = frozenset({"vllm"})
HOST_BOUND_NOTE = ("beyond vLLM's CUDA graphs ({graphs} sequences): steps measured host-bound there for MoE and FP8 "
                   "models, prediction less reliable")
# The dimensions of a prediction's shape (input length, output length, load) the physics prior continues, and the one
# it does not (a larger batch than measured is still an extrapolation of the fit).
LENGTH_DIMS, LOAD_DIM = (0, 1), (2,)
PHYSICS_NOTE = ("beyond the measured prompt or output lengths: attention and KV-read costs from the physics prior "
                "(planner.engine.physics_prior), anchored on the measured points")
# Defaults when a profile does not record the engine's caps (vLLM's V1 defaults on large GPUs).
DEFAULT_MAX_NUM_SEQS = {"vllm": 1024, "trtllm": 2048, "sglang": 1024}
DEFAULT_MAX_BATCHED_TOKENS = {"vllm": 16384, "trtllm": 8192, "sglang": 16384}
# KV-cache estimate for groups that do not report it: share of memory left after weights
# (TensorRT-LLM's perf-overview runs used kv_cache_free_gpu_mem_fraction 0.95 "in many cases").
KV_FREE_MEMORY_FRACTION = 0.90
# Sustained memory bandwidth is below the datasheet figure; used only to place t0 for groups
# whose data cannot identify it (published saturated tables), never as a measurement.
ACHIEVABLE_BANDWIDTH_FRACTION = 0.8
# Sequences that fit the KV cache at once: KV / (I + share*O).  vLLM allocates blocks as tokens are
# generated and preempts (recomputes) when the cache fills; counting each sequence at its full length
# (share 1) matched the H200 measurements better than the mean length (share 0.5, LOO max 18% vs 7%
# for bf16), because preemption's recompute eats the extra concurrency.  This is the steady concurrency
# a replica sustains (closed loops, sizing, the simulator); an offline batch submitted at once to a
# preempting engine is modelled with its preemption instead (`_admitted_wave_features`).
KV_ADMISSION_OUTPUT_SHARE = 1.0
# Engines that admit a batch submitted at once by its prompts and preempt (recompute) when decoding fills
# the KV cache: vLLM allocates KV blocks as tokens are generated.  TensorRT-LLM's default capacity scheduler
# (GUARANTEED_NO_EVICT) reserves each request's whole output instead.  Modelling vLLM's preemption in offline
# batches (`_admitted_wave_features`) took the H200 profiles' leave-one-point-out worst errors from 17-33% to
# 11-14% (Llama-2-7B, Llama-3.1-8B bf16 and FP8, Mixtral-8x7B; 2026-12-04).
PREEMPTING_ENGINES = frozenset({"vllm"})
# A full fit needs the data to separate the fixed step cost from the per-sequence cost.
MIN_POINTS_FULL_FIT = 8


class NoCurveError(FleetplanError, LookupError):
    """No fitted curve exists for the requested group, or it cannot predict this shape."""


class CurveLike(Protocol):
    """What sizing (planner.sizing.sizing) and simulation (planner.latency.simulate) need of a Curve; tests use fakes."""

    def __hash__(self) -> int: ...  # predictions and step models are memoised per curve

    @property
    def has_latency(self) -> bool: ...
    @property
    def kv_cache_tokens(self) -> int: ...
    @property
    def max_num_seqs(self) -> int: ...

    def step_time_s(self, batch: float, context: float, prefill_tokens: float = 0.0,
                    prefill_context: float = 0.0) -> float: ...
    def max_batch(self, input_len: float, output_len: float) -> int: ...
    def predict_offline(self, input_len: float, output_len: float, batch_size: int) -> Prediction: ...
    def predict_concurrency(self, input_len: float, output_len: float, concurrency: float) -> Prediction: ...
    def saturated(self, input_len: float, output_len: float) -> Prediction: ...


@dataclass(frozen=True)
class GroupKey:
    """The identity of one fitted curve (schema.PROFILE_GROUP, in the same order)."""

    engine: str
    engine_version: str
    gpu: str
    model: str
    precision: str
    tp: int
    config: str = DEFAULT_CONFIG

    @classmethod
    def from_values(cls, values: tuple) -> GroupKey:
        """The key of one PROFILE_GROUP tuple, e.g. as DataFrame.groupby yields it."""
        fields = dict(zip(PROFILE_GROUP, values, strict=True))
        return cls(**{**fields, "tp": int(fields["tp"])})

    def label(self) -> str:
        """e.g. 'vllm 0.26.0 [tuned] / h200 x1 / llama-3.1-8b fp8' (the config only when not default)."""
        engine = engine_label(self.engine, self.engine_version, self.config)
        return f"{engine} / {self.gpu} x{self.tp} / {self.model} {self.precision}"


def engine_label(engine: str, engine_version: str, config: object = DEFAULT_CONFIG) -> str:
    """'vllm 0.26.0', or 'vllm 0.26.0 [tuned]' for a non-default config (blank counts as default)."""
    text = f"{engine} {engine_version}"
    return f"{text} [{config}]" if is_custom_config(config) else text


def is_custom_config(config: object) -> bool:
    """True for a named non-default config; default, blank or missing (older plan files) is not."""
    return isinstance(config, str) and config not in ("", DEFAULT_CONFIG)


@dataclass(frozen=True)
class Prediction:
    """Predicted performance of one replica at one shape.

    output_tok_per_s is for the whole replica (all tp GPUs); low/high bound it
    (about a 90% interval).  Latencies are means in ms.  provenance is
    "measured" or "published" (a point at exactly this shape), "predicted"
    (inside the range the group covers), "extrapolated" (outside it, with
    a widened interval) or "transferred" (a curve built by planner.engine.transfer
    for an unprofiled option; `extrapolated` still says whether the shape
    lies outside the range its calibration covers).
    """

    output_tok_per_s: float
    low: float
    high: float
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    concurrency: float
    extrapolated: bool
    provenance: str
    note: str = ""


@dataclass(frozen=True)
class Caps:
    """What bounds one replica's batch: sequences, KV-cache tokens, tokens per step."""

    max_num_seqs: int
    kv_cache_tokens: int
    max_batched_tokens: int
    cuda_graph_max_batch: int = 10**9
    expert_share: float = 0.0  # MoE: experts per token / routed experts (k/E); 0 for a dense model
    preempts: bool = False     # admits by prompt and preempts when the KV cache fills (vLLM), else reserves the output
    # A host-memory KV tier behind the prefix cache (vLLM --kv-offloading-size): measured once, on an H100
    # (with_host_tier); 0 = none.
    host_kv_gib: float = 0.0
    host_kv_tokens: int = 0
    host_load_s_per_token: float = 0.0
    # A model whose layers (this share of them) attend within a sliding window of `window` tokens (window_caps).
    window: int = 0
    window_share: float = 0.0

    def kv_len(self, tokens: float) -> float:
        """KV-cache tokens a context of `tokens` holds (fewer in windowed layers: fleetfacts.specs.windowed_tokens)."""
        return windowed_tokens(tokens, self.window, self.window_share)

    def kv_tokens_at(self, tokens: float) -> float:
        """The KV cache in tokens of contexts `tokens` long (kv_cache_tokens unless layers are windowed)."""
        held = self.kv_len(tokens)
        return self.kv_cache_tokens * tokens / held if held > 0 else float(self.kv_cache_tokens)

    def max_batch(self, input_len: float, output_len: float) -> int:
        by_kv = int(self.kv_cache_tokens // max(self.kv_len(input_len + KV_ADMISSION_OUTPUT_SHARE * output_len), 1.0))
        return max(1, min(self.max_num_seqs, by_kv))


# Where every layer is windowed any context fits the KV cache: the longest one probed (idle TTFT limits), tokens.
LONGEST_WINDOWED_CONTEXT = 2**21


def longest_held_context(curve: CurveLike) -> int:
    """The longest context (prompt + output tokens) one replica's KV cache holds: kv_cache_tokens, more where
    windowed layers hold only their window (Caps.kv_len)."""
    kv = int(curve.kv_cache_tokens)
    caps = getattr(curve, "caps", None)
    share, window = (caps.window_share, caps.window) if caps is not None else (0.0, 0)
    if not share or kv <= window:
        return kv
    if share >= 1.0:
        return LONGEST_WINDOWED_CONTEXT
    return int((kv - share * window) / (1.0 - share))  # (1 - s) T + s W <= kv


def window_caps(model: ModelSpec | None, engine: str) -> dict[str, Any]:
    """Caps' window fields for a model on an engine (fleetfacts.specs.model_window; none without a window)."""
    window, share = model_window(model, engine)
    return {"window": window, "window_share": share} if share else {}


def expert_cover(expert_share: float, tokens: float) -> float:
    """Expected share of an MoE layer's experts that `tokens` tokens touch when each is routed to k of E
    experts uniformly at random (expert_share = k/E): 1 - (1 - k/E)^tokens; 0 for a dense model."""
    if expert_share <= 0.0 or tokens <= 0.0:
        return 0.0
    return 1.0 - (1.0 - min(expert_share, 1.0)) ** tokens


def model_expert_share(model: ModelSpec) -> float:
    """k/E of an MoE model (Caps.expert_share); 0 for a dense one."""
    return model.experts_per_token / model.num_experts if model.is_moe and model.num_experts else 0.0


def expert_weight_bytes(model: ModelSpec, precision: str) -> float:
    """Bytes of an MoE model's routed experts at `precision` (every expert: params - active + k experts'
    worth); 0 for a dense model."""
    return model.params_per_expert * model.num_experts * bytes_per_value(precision)


# ---------------------------------------------------------------- features
# Each function returns the feature vector phi such that time = phi @ theta.

def _step_features(caps: Caps, batch: float, context: float, prefill_tokens: float,
                   prefill_context: float) -> np.ndarray:
    """One iteration: `batch` sequences decoding at mean context `context`, `prefill_tokens` of prompts
    `prefill_context` long (windowed layers read their window only: Caps.kv_len, _attention_len)."""
    return np.array([1.0, batch, batch * caps.kv_len(context), prefill_tokens,
                     prefill_tokens * _attention_len(caps, prefill_context), 0.0,
                     max(0.0, batch - caps.cuda_graph_max_batch),
                     expert_cover(caps.expert_share, batch + prefill_tokens)])


def _attention_len(caps: Caps, prompt_len: float) -> float:
    return windowed_attention_len(prompt_len, caps.window, caps.window_share)


def _prefill_step_features(caps: Caps, steps: float, chunk: float, input_len: float) -> np.ndarray:
    """`steps` prefill-only iterations of `chunk` prompt tokens each, of prompts `input_len` long."""
    return steps * np.array([1.0, 0.0, 0.0, chunk, chunk * _attention_len(caps, input_len), 0.0, 0.0,
                             expert_cover(caps.expert_share, chunk)])


def offline_features(caps: Caps, n: int, input_len: float, output_len: float) -> np.ndarray:
    """Duration of `n` identical requests submitted at once: waves of up to the cap.

    Each wave prefills its prompts in chunks of the token budget, then decodes
    output_len - 1 further steps (the prefill step emits the first token).
    """
    cap = admitted_batch(caps, input_len, output_len)
    full, rest = divmod(int(n), cap)
    phi = full * _admitted_wave_features(caps, cap, input_len, output_len)
    if rest:
        phi = phi + _admitted_wave_features(caps, rest, input_len, output_len)
    phi[5] += n
    return phi


def admitted_batch(caps: Caps, input_len: float, output_len: float) -> int:
    """Requests an engine admits at once when they arrive together: a preempting engine as many as
    max_num_seqs allows and whose prompts fit the KV cache; otherwise as many as fit at full length."""
    if not caps.preempts:
        return caps.max_batch(input_len, output_len)
    return max(1, min(caps.max_num_seqs, int(caps.kv_cache_tokens // max(caps.kv_len(input_len), 1.0))))


def _admitted_wave_features(caps: Caps, w: int, input_len: float, output_len: float) -> np.ndarray:
    """`w` requests admitted together.  When their full lengths do not fit the KV cache, decoding fills it
    after s* steps; from then on the engine preempts the newest sequences as the others grow (the running
    batch follows KV / (I + s)), and the preempted ones are recomputed (prefill of prompt + progress) and
    finish their last O - s* tokens together once the survivors are done."""
    fits = caps.max_batch(input_len, output_len)
    decode_steps = output_len - 1
    if w <= fits or decode_steps < 1:
        return _wave_features(caps, w, input_len, output_len)
    kv = caps.kv_tokens_at(input_len + output_len)  # in tokens of these contexts (windowed layers hold fewer)
    s_star = min(max(0.0, (kv - w * input_len) / w), decode_steps)
    tail = decode_steps - s_star
    prefill = _prefill_features(caps, w * input_len, input_len)
    early = s_star * _step_features(caps, w, input_len + s_star / 2, 0.0, 0.0)
    running = kv * math.log((input_len + output_len) / (input_len + s_star)) / max(tail, 1e-9)
    late = tail * _step_features(caps, min(float(w), running), input_len + (s_star + output_len) / 2, 0.0, 0.0)
    preempted = max(0, w - fits)
    resumed = input_len + (s_star + output_len) / 2  # mean progress when preempted, recomputed as a prompt
    recompute = _prefill_features(caps, preempted * resumed, resumed)
    finish = tail * _step_features(caps, preempted / 2, resumed + tail / 4, 0.0, 0.0)
    return prefill + early + late + recompute + finish


def _prefill_features(caps: Caps, tokens: float, prompt_len: float) -> np.ndarray:
    """Prefill of `tokens` prompt tokens of prompts `prompt_len` long, in chunks of the token budget."""
    steps = max(1, math.ceil(tokens / caps.max_batched_tokens))
    return _prefill_step_features(caps, steps, tokens / steps, prompt_len)


def _wave_features(caps: Caps, w: int, input_len: float, output_len: float) -> np.ndarray:
    decode = (output_len - 1) * _step_features(caps, w, input_len + output_len / 2, 0.0, 0.0)
    return _prefill_features(caps, w * input_len, input_len) + decode


def _steady_step_features(caps: Caps, c_eff: float, input_len: float, output_len: float) -> np.ndarray:
    """Mean iteration at steady concurrency: c_eff decoding, new prompts spread over the steps."""
    phi = _step_features(caps, c_eff, input_len + output_len / 2, c_eff * input_len / output_len, input_len)
    phi[5] = c_eff / output_len  # per-request overhead, serialised with the steps
    return phi


def concurrency_features(caps: Caps, concurrency: float, input_len: float, output_len: float
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ttft, tpot, e2e) features of a closed loop keeping `concurrency` requests in flight."""
    c_eff = min(float(concurrency), caps.max_batch(input_len, output_len))
    tau = _steady_step_features(caps, c_eff, input_len, output_len)
    own_prefill = _step_features(caps, c_eff, input_len + output_len / 2, input_len, input_len)
    service_ttft = 0.5 * tau + own_prefill
    service_e2e = service_ttft + (output_len - 1) * tau
    queue = (concurrency / c_eff - 1.0) * service_e2e  # requests beyond the cap wait their turn
    return service_ttft + queue, tau, service_e2e + queue


def closed_loop_features(caps: Caps, concurrency: float, n: int, input_len: float, output_len: float
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean ttft, mean tpot, whole run) features of a benchmark's closed loop: `concurrency`
    clients start together and send `n` requests of fixed lengths in all.

    Such a loop stays in step: a round's requests are prefilled in one burst,
    decode together and finish in the same iteration, so every client sends
    its next request at once.  The run is then rounds of offline waves, and a
    request's TTFT is its place in the round's prefill burst (chunks of the
    token budget) plus the per-request overhead of those ahead of it.  The H200
    server measurements show it: mean TTFT grows linearly with concurrency
    (97 ms at 8, 953 ms at 128, 1.9 s at 256 for 512/256), where steady state
    with staggered arrivals (`concurrency_features`) would put it near 20-40 ms.
    """
    w = max(1, min(int(concurrency), caps.max_batch(input_len, output_len)))
    wave = _wave_features(caps, w, input_len, output_len)
    full, rest = divmod(int(n), w)
    run = full * wave + (_wave_features(caps, rest, input_len, output_len) if rest else 0.0)
    run[5] += n
    steps = math.ceil(w * input_len / caps.max_batched_tokens)
    ttft, tpot = _round_features(caps, w, input_len, output_len, (steps + 1) / 2)
    return ttft, tpot, run


def _round_features(caps: Caps, w: int, input_len: float, output_len: float, place: float
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(mean ttft, mean tpot) of a round of `w` prompts prefilled in one burst (chunks of the token budget) and
    decoded together, a prompt's first token coming `place` burst steps in on average."""
    steps = math.ceil(w * input_len / caps.max_batched_tokens)
    ttft = place * _prefill_step_features(caps, 1.0, w * input_len / steps, input_len)
    ttft[5] = (w + 1) / 2
    wave_with_overheads = _wave_features(caps, w, input_len, output_len)
    wave_with_overheads[5] = w
    return ttft, (wave_with_overheads - ttft) / max(output_len - 1, 1.0)


def offline_latency_features(caps: Caps, n: int, c: int, input_len: float, output_len: float
                             ) -> tuple[np.ndarray, np.ndarray]:
    """(mean ttft, mean tpot) features of `n` identical requests submitted at once, `c` at a time: each wave
    prefills its prompts in one burst and decodes them together (a benchmark round, closed_loop_features); a
    request of a later wave first waits for the waves before it."""
    w = max(1, min(int(c), caps.max_batch(input_len, output_len)))
    # The k-th prompt of the burst has its first token after the step that prefills its last token: a lone
    # 24k prompt in 8k chunks waits all 3 steps, where the mean place (steps + 1) / 2 of a benchmark's many
    # prompts per step would say 2.  (The fits keep that mean place: their closed-loop rows are measured so.)
    place = float(np.ceil(np.arange(1, w + 1) * input_len / caps.max_batched_tokens).mean())
    ttft, tpot = _round_features(caps, w, input_len, output_len, place)
    waits = np.floor(np.arange(int(n)) / c).mean()  # waves ahead of a request, on average
    return ttft + waits * offline_features(caps, c, input_len, output_len), tpot


# ---------------------------------------------------------------- observations

@dataclass(frozen=True)
class Observation:
    phi: np.ndarray
    seconds: float
    weight: float
    kind: str  # "throughput" | "tpot" | "ttft"
    row: int


def _caps_for(group: pd.DataFrame, key: GroupKey) -> Caps:
    seqs = _first_number(group, "max_num_seqs") or DEFAULT_MAX_NUM_SEQS.get(key.engine, 1024)
    budget = _first_number(group, "max_num_batched_tokens") or DEFAULT_MAX_BATCHED_TOKENS.get(key.engine, 8192)
    kv = _first_number(group, "kv_cache_tokens") or _estimate_kv_tokens(key)
    graphs = _first_number(group, "cuda_graph_max_batch") or DEFAULT_CUDA_GRAPH_MAX_BATCH.get(key.engine, 10**9)
    model = _model_spec(key.model)
    return Caps(int(seqs), int(kv), int(budget), int(graphs), model_expert_share(model) if model else 0.0,
                key.engine in PREEMPTING_ENGINES, **window_caps(model, key.engine))


def _model_spec(model: str) -> ModelSpec | None:
    specs = _specs()
    return specs[1].get(model) if specs is not None else None


def _first_number(group: pd.DataFrame, column: str) -> float | None:
    if column not in group:
        return None
    values = pd.to_numeric(group[column], errors="coerce").dropna()
    return float(values.iloc[0]) if len(values) else None


def _estimate_kv_tokens(key: GroupKey) -> int:
    """KV-cache tokens of one replica from GPU memory and model size (an estimate, used when unreported)."""
    specs = _specs()
    if specs is None:
        return 10**9  # unknown: the batch is then capped by max_num_seqs alone
    gpus, models = specs
    gpu, model = gpus.get(key.gpu), models.get(key.model)
    if gpu is None or model is None:
        return 10**9
    tokens = kv_cache_tokens(replica_memory_bytes(gpu.memory_gib, key.tp), weight_bytes(model, key.precision),
                             kv_bytes_per_token(model, key.precision), free_fraction=KV_FREE_MEMORY_FRACTION)
    return max(1, int(tokens))


@dataclass(frozen=True)
class Floors:
    """Roofline floors (seconds per step) of t0 (weights other than routed experts) and m (all routed experts)."""

    t0: float = 0.0
    m: float = 0.0


@dataclass(frozen=True)
class PhysicsPrior:
    """What the physics of the engine says of a group's length terms, before its own data: k (KV read per token of
    context per sequence) and r (prefill attention per prompt token and token of prompt), each a value and a
    relative standard deviation.  planner.engine.physics_prior computes them from the engine's calibration on every
    profile (attention FLOPs and KV bytes over the GPU's datasheet peaks, times the pooled efficiencies), so a
    curve measured on short prompts continues into long ones as the physics does, not as its fit's shape would."""

    k: float
    k_sd: float
    r: float
    r_sd: float
    basis: str = ""
    t0: float = 0.0  # the calibrated fixed step cost: a fit that cannot separate t0 takes it (0: unknown)

    def rows(self) -> tuple[tuple[int, float, float], ...]:
        """(parameter index, value, relative sd) of each prior term."""
        return ((PARAM_NAMES.index("k"), self.k, self.k_sd), (PARAM_NAMES.index("r"), self.r, self.r_sd))


def _roofline_floors(key: GroupKey) -> Floors:
    """Weights read once per step over the memory bandwidth, split into routed experts (m) and the rest (t0)."""
    specs = _specs()
    if specs is None:
        return Floors()
    gpus, models = specs
    gpu, model = gpus.get(key.gpu), models.get(key.model)
    if gpu is None or model is None:
        return Floors()
    experts = expert_weight_bytes(model, key.precision)
    total = weight_bytes(model, key.precision)
    return Floors(weights_read_s(total - experts, gpu.mem_bandwidth_tb_s, key.tp),
                  weights_read_s(experts, gpu.mem_bandwidth_tb_s, key.tp))


@lru_cache(maxsize=1)
def _specs() -> tuple[dict[str, GpuSpec], dict[str, ModelSpec]] | None:
    """GPU and model spec tables (fleetfacts/specs.py); None when unavailable."""
    try:
        return load_gpu_specs(), load_model_specs()
    except (InputError, OSError) as err:
        log.warning("GPU/model spec tables unavailable (%s): no roofline bound on t0", err)
        return None


def observations(group: pd.DataFrame, caps: Caps) -> list[Observation]:
    """Turn a group's profile rows into linear observations of step-time parameters.

    Each row is modelled with the caps it reports, else the group's: one engine and settings can
    still run with different caps, e.g. vLLM's OpenAI server defaults to half the offline LLM
    class's token budget (8192 vs 16384 on an H200), and each start sizes its own KV cache.
    """
    obs: list[Observation] = []
    for row, point in group.iterrows():
        obs.extend(_point_observations(point, row_caps(point, caps), int(row)))
    return obs


def row_caps(point: pd.Series, caps: Caps) -> Caps:
    """The caps one profile row reports (max_num_seqs, KV tokens, token budget, largest CUDA-graph batch), else
    `caps`'."""
    def reported(column: str, default: int) -> int:
        value = point.get(column)
        return int(value) if _ok(value) and float(value) >= 1 else default
    return Caps(reported("max_num_seqs", caps.max_num_seqs), reported("kv_cache_tokens", caps.kv_cache_tokens),
                reported("max_num_batched_tokens", caps.max_batched_tokens),
                reported("cuda_graph_max_batch", caps.cuda_graph_max_batch), caps.expert_share, caps.preempts)


def _point_observations(p: pd.Series, caps: Caps, row: int) -> list[Observation]:
    i, o, tok_s = float(p.input_len), float(p.output_len), p.output_tok_per_s
    if p["mode"] == "offline":
        n = _offline_n(p)
        if n is None or not _ok(tok_s):
            return []
        return [Observation(offline_features(caps, n, i, o), n * o / tok_s, 1.0, "throughput", row)]
    if p["mode"] == "concurrency":
        if not _ok(p.concurrency):
            return []
        if _ok(p.num_requests):  # a benchmark run of known size: clients in step (closed_loop_features)
            n = int(p.num_requests)
            ttft, tpot, run = closed_loop_features(caps, float(p.concurrency), n, i, o)
            seconds = n * o / tok_s if _ok(tok_s) else None
        else:  # a published steady-state figure
            ttft, tpot, run = concurrency_features(caps, float(p.concurrency), i, o)
            seconds = p.concurrency * o / tok_s if _ok(tok_s) else None
        out = [Observation(run, seconds, 1.0, "throughput", row)] if seconds else []
        return out + _latency_observations(p, ttft, tpot, row)
    return _rate_observations(p, caps, row)


def _offline_n(p: pd.Series) -> int | None:
    for column in ("batch_size", "num_requests"):
        if _ok(p[column]):
            return int(p[column])
    return None


def _rate_observations(p: pd.Series, caps: Caps, row: int) -> list[Observation]:
    """Rate-mode points inform latency; mean concurrency from Little's law on the measured e2e."""
    i, o = float(p.input_len), float(p.output_len)
    tpot_ms = _first_ok(p, "tpot_mean_ms", "itl_mean_ms", "tpot_p50_ms", "itl_p50_ms")
    e2e_ms = _first_ok(p, "e2e_mean_ms")
    ttft_ms = _first_ok(p, "ttft_mean_ms", "ttft_p50_ms")
    if e2e_ms is None and tpot_ms is not None and ttft_ms is not None:
        e2e_ms = ttft_ms + (o - 1) * tpot_ms
    if e2e_ms is None or not _ok(p.request_rate):
        return []
    concurrency = max(1.0, float(p.request_rate) * e2e_ms / 1000)
    ttft, tpot, _ = concurrency_features(caps, concurrency, i, o)
    return _latency_observations(p, ttft, tpot, row)


def _latency_observations(p: pd.Series, ttft: np.ndarray, tpot: np.ndarray, row: int) -> list[Observation]:
    out = []
    tpot_ms = _first_ok(p, "tpot_mean_ms", "itl_mean_ms", "tpot_p50_ms", "itl_p50_ms")
    if tpot_ms is not None:
        out.append(Observation(tpot, tpot_ms / 1000, LATENCY_WEIGHT, "tpot", row))
    ttft_ms = _first_ok(p, "ttft_mean_ms", "ttft_p50_ms")
    if ttft_ms is not None:
        out.append(Observation(ttft, ttft_ms / 1000, TTFT_WEIGHT, "ttft", row))
    return out


def _first_ok(p: pd.Series, *columns: str) -> float | None:
    for column in columns:
        if _ok(p[column]):
            return float(p[column])
    return None


def _ok(value: Any) -> bool:
    try:
        return value is not None and not pd.isna(value) and float(value) > 0
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------- fitting

@dataclass(frozen=True)
class Fit:
    theta: np.ndarray
    cov: np.ndarray           # covariance of theta (zero for fixed parameters)
    sigma: float              # relative residual scale (floored at NOISE_FLOOR)
    free: tuple[bool, ...]
    n_obs: int

    @property
    def is_full(self) -> bool:
        """Fitted to data that separates the fixed step cost (t0 free), not to saturated throughputs alone."""
        return bool(self.free[0])


def fit_observations(obs: list[Observation], floors: Floors, full: bool, noise: float = NOISE_FLOOR,
                     prior: PhysicsPrior | None = None) -> Fit:
    """Bounded linear least squares on relative errors; `full=False` fits (a, k, q) only.

    In the reduced fit t0 and m are placed at the roofline over an assumed achievable
    bandwidth (t0 at the prior's calibrated step cost where that is higher) and h = 0, and r at its
    physics prior (0 without one; its variance the prior's): a table of saturated
    throughputs cannot separate them.  m (routed experts' weights) is fitted only when some
    observation sees it (an MoE model).  A physics prior adds one pseudo-observation per length
    term (k, r): its relative deviation from the prior, weighted as `noise` over the prior's sd,
    so a group whose prompts and contexts are short keeps the physics' attention and KV-read
    cost (its own data cannot see them), and a group measured at long lengths moves them as far
    as its data insist.
    """
    from scipy.optimize import lsq_linear  # here, not at the top: a warm start reads fits back without scipy

    phi = np.array([o.phi for o in obs])
    target = np.array([o.seconds for o in obs])
    weight = np.array([o.weight for o in obs])
    moe = bool(np.any(phi[:, -1] > 0))
    free = (*((True,) * (N_PARAMS - 1)), moe) if full else (False, True, True, True, False, False, False, False)
    fixed = np.zeros(N_PARAMS)
    if not full:
        fixed[0], fixed[-1] = (floors.t0 / ACHIEVABLE_BANDWIDTH_FRACTION,
                               floors.m / ACHIEVABLE_BANDWIDTH_FRACTION if moe else 0.0)
        if prior is not None:
            fixed[PARAM_NAMES.index("r")] = prior.r
            if prior.t0 > floors.t0:  # the engine's calibrated step cost: weights and the work around them
                fixed[0] = prior.t0
    mask = np.array(free)
    design = phi[:, mask] * (weight / target)[:, None]
    rhs = weight * (1.0 - (phi[:, ~mask] @ fixed[~mask]) / target)
    design, rhs = _with_prior_rows(design, rhs, mask, prior, noise)
    scale = np.linalg.norm(design, axis=0)
    scale[scale == 0] = 1.0
    floor_of = {"t0": floors.t0, "m": floors.m}
    lower = np.array([floor_of.get(name, 0.0) for name in np.array(PARAM_NAMES)[mask]]) * scale
    result = lsq_linear(design / scale, rhs, bounds=(lower, np.inf), method="bvls")
    theta = fixed.copy()
    theta[mask] = result.x / scale
    # The residual scale is the observations' alone (the prior rows' deviation is not measurement noise); each
    # prior row still counts as one more equation for the degrees of freedom.
    resid = (design @ (result.x / scale) - rhs)[:len(obs)]
    dof = max(len(rhs) - int(mask.sum()), 1)
    sigma = max(noise, math.sqrt(float(resid @ resid) / dof))
    cov = np.zeros((N_PARAMS, N_PARAMS))
    cov[np.ix_(mask, mask)] = sigma**2 * np.linalg.pinv(design.T @ design)
    r = PARAM_NAMES.index("r")
    if prior is not None and not mask[r] and fixed[r] > 0:  # r placed at the prior keeps the prior's uncertainty
        cov[r, r] = (prior.r * prior.r_sd) ** 2
    return Fit(theta, cov, sigma, free, len(obs))


def _with_prior_rows(design: np.ndarray, rhs: np.ndarray, mask: np.ndarray, prior: PhysicsPrior | None,
                     noise: float) -> tuple[np.ndarray, np.ndarray]:
    """The least-squares system with one row per free prior term: (theta_j / prior_j - 1) * noise / sd_j."""
    if prior is None:
        return design, rhs
    columns = np.flatnonzero(mask)
    rows, values = [], []
    for index, value, sd in prior.rows():
        if value > 0 and sd > 0 and mask[index]:
            row = np.zeros(len(columns))
            weight = noise / sd
            row[int(np.searchsorted(columns, index))] = weight / value
            rows.append(row)
            values.append(weight)
    if not rows:
        return design, rhs
    return np.vstack([design, np.array(rows)]), np.concatenate([rhs, np.array(values)])


def _stored_fit(obs: list[Observation], floors: Floors, full: bool, noise: float,
                prior: PhysicsPrior | None = None) -> Fit:
    """fit_observations(), memoised on disk by its inputs (planner.engine.fitcache): a warm start reads the
    fit back (JSON floats round-trip exactly) and does not import scipy (a quarter of a second)."""
    arrays = (np.array([o.phi for o in obs], dtype=float), np.array([o.seconds for o in obs], dtype=float),
              np.array([o.weight for o in obs], dtype=float))
    content = b"".join(a.tobytes() for a in arrays) + repr((arrays[0].shape, floors, full, noise, prior)).encode()

    def fit() -> dict[str, Any]:
        f = fit_observations(obs, floors, full, noise, prior)
        return {"theta": f.theta.tolist(), "cov": f.cov.tolist(), "sigma": f.sigma, "free": list(f.free),
                "n_obs": f.n_obs}

    v = memo("curve-fit", content, fit)
    return Fit(np.array(v["theta"], dtype=float), np.array(v["cov"], dtype=float), float(v["sigma"]),
               tuple(bool(x) for x in v["free"]), int(v["n_obs"]))


def _is_rich(group: pd.DataFrame, obs: list[Observation]) -> bool:
    """Enough variety to identify all six parameters: latency data, or batch sweeps."""
    if len(obs) < MIN_POINTS_FULL_FIT:
        return False
    has_latency = any(o.kind != "throughput" for o in obs)
    loads = pd.concat([group["batch_size"], group["concurrency"]]).dropna().nunique()
    return has_latency or loads >= 3


# ---------------------------------------------------------------- curve

@dataclass(frozen=True)
class Range:
    input_len: tuple[float, float]
    output_len: tuple[float, float]
    load: tuple[float, float]


@dataclass(frozen=True, eq=False)
class Curve:
    """A fitted group: predicts one replica's throughput and latency at any shape."""

    key: GroupKey
    caps: Caps
    fit: Fit
    source_provenance: str          # "measured" | "published"
    has_latency: bool
    covered: Range
    points: pd.DataFrame = field(repr=False)  # the group's rows, for exact-shape lookups
    note: str = ""
    front_end: FrontEnd | None = None         # the OpenAI server's share of TTFT (planner.latency fits it)
    prior: PhysicsPrior | None = None         # the physics its length terms were fitted toward (None: no prior)

    @property
    def async_scheduling(self) -> bool:
        """Whether the engine schedules each iteration while the previous one runs (planner.latency.simulate)."""
        return uses_async_scheduling(self.key.engine, self.key.engine_version)

    @property
    def latency_basis(self) -> str:
        """measured (the group has latency rows), transferred (front end borrowed), or unverified."""
        if self.front_end is not None and self.front_end.basis.startswith("transferred"):
            return "transferred"
        return "measured" if self.has_latency else "unverified"

    @property
    def kv_cache_tokens(self) -> int:
        return self.caps.kv_cache_tokens

    @property
    def max_num_seqs(self) -> int:
        return self.caps.max_num_seqs

    @property
    def host_kv_gib(self) -> float:
        """GiB of the host-memory KV tier behind each replica's prefix cache (0: none; with_host_tier)."""
        return self.caps.host_kv_gib

    @property
    def host_kv_tokens(self) -> int:
        """KV tokens of the host-memory tier behind each replica's prefix cache (0: none; with_host_tier)."""
        return self.caps.host_kv_tokens

    @property
    def host_load_s_per_token(self) -> float:
        """Seconds to bring one token's KV back from the host tier."""
        return self.caps.host_load_s_per_token

    @property
    def max_num_batched_tokens(self) -> int:
        return self.caps.max_batched_tokens

    @property
    def theta(self) -> dict[str, float]:
        return dict(zip(PARAM_NAMES, map(float, self.fit.theta), strict=True))

    def step_time_s(self, batch: float, context: float, prefill_tokens: float = 0.0,
                    prefill_context: float = 0.0) -> float:
        """Seconds of one engine iteration (the simulator's clock)."""
        t0, a, k, q, r, _, g, _ = self._theta_tuple
        caps = self.caps
        over = batch - caps.cuda_graph_max_batch
        if caps.window_share:
            context, prefill_context = caps.kv_len(context), _attention_len(caps, prefill_context)
        return (t0 + a * batch + k * batch * context + q * prefill_tokens + r * prefill_tokens * prefill_context
                + (g * over if over > 0 else 0.0) + self.expert_read_s(batch + prefill_tokens))

    def expert_read_s(self, tokens: float) -> float:
        """Seconds a step of `tokens` tokens spends reading routed experts' weights (0 for a dense model)."""
        return float(self.fit.theta[7]) * expert_cover(self.caps.expert_share, tokens)

    @property
    def _theta_tuple(self) -> tuple[float, ...]:
        return tuple(float(x) for x in self.fit.theta)

    @property
    def request_overhead_s(self) -> float:
        return float(self.fit.theta[5])

    def max_batch(self, input_len: float, output_len: float) -> int:
        return self.caps.max_batch(input_len, output_len)

    def predict_offline(self, input_len: float, output_len: float, batch_size: int) -> Prediction:
        """N = batch_size identical requests submitted at once."""
        phi = offline_features(self.caps, int(batch_size), input_len, output_len)
        seconds = float(phi @ self.fit.theta)
        tok_s = batch_size * output_len / seconds
        exact = self._exact("offline", input_len, output_len, batch_size)
        c = min(batch_size, self.max_batch(input_len, output_len))
        ttft_phi, tpot_phi = offline_latency_features(self.caps, int(batch_size), c, input_len, output_len)
        ttft, tpot = float(ttft_phi @ self.fit.theta) * 1000, float(tpot_phi @ self.fit.theta) * 1000
        return self._prediction(tok_s, phi, seconds, (input_len, output_len, batch_size), exact,
                                ttft, tpot, seconds * 1000, c)

    def predict_concurrency(self, input_len: float, output_len: float, concurrency: float) -> Prediction:
        """A closed loop keeping `concurrency` requests in flight (latencies are means)."""
        ttft_phi, tpot_phi, e2e_phi = concurrency_features(self.caps, concurrency, input_len, output_len)
        e2e = float(e2e_phi @ self.fit.theta)
        tok_s = concurrency * output_len / e2e
        exact = self._exact("concurrency", input_len, output_len, concurrency)
        ttft = float(ttft_phi @ self.fit.theta)
        if self.front_end is not None:  # staggered clients: each waits for the server's front end on top
            ttft += self.front_end.mean_delay_s(input_len, concurrency / e2e, output_len)
        return self._prediction(tok_s, e2e_phi, e2e, (input_len, output_len, concurrency), exact,
                                ttft * 1000, float(tpot_phi @ self.fit.theta) * 1000, e2e * 1000, concurrency)

    def predict_rounds(self, input_len: float, output_len: float, concurrency: float, num_requests: int
                       ) -> Prediction:
        """A benchmark's closed loop: `concurrency` clients start together and send `num_requests` in all.

        The clients stay in step (closed_loop_features), so mean TTFT is a place in each round's prefill
        burst, far above steady state's; this is what `vllm bench serve --max-concurrency` measures.
        """
        ttft_phi, tpot_phi, run_phi = closed_loop_features(self.caps, concurrency, int(num_requests),
                                                           input_len, output_len)
        seconds = float(run_phi @ self.fit.theta)
        tok_s = num_requests * output_len / seconds
        ttft, tpot = float(ttft_phi @ self.fit.theta), float(tpot_phi @ self.fit.theta)
        if self.front_end is not None:
            ttft += self.front_end.mean_delay_s(input_len, num_requests / seconds, output_len)
        return self._prediction(tok_s, run_phi, seconds, (input_len, output_len, concurrency), None,
                                ttft * 1000, tpot * 1000, (ttft + (output_len - 1) * tpot) * 1000, concurrency)

    def saturated(self, input_len: float, output_len: float) -> Prediction:
        """Maximum offline throughput: a batch many times larger than the engine's cap."""
        cap = self.max_batch(input_len, output_len)
        published = self._exact("offline", input_len, output_len, None)
        pred = self.predict_offline(input_len, output_len, SATURATION_WAVES * cap)
        if published is None:
            return pred
        return _replace_with_point(pred, published, self.fit.sigma)

    def latency_interval(self, phi_time_s: np.ndarray) -> tuple[float, float]:
        """(low, high) seconds for a latency with features phi."""
        seconds = float(phi_time_s @ self.fit.theta)
        sd = self._relative_sd(phi_time_s, seconds)
        return seconds * math.exp(-Z_90 * sd), seconds * math.exp(Z_90 * sd)

    # -- internals
    def _relative_sd(self, phi: np.ndarray, seconds: float) -> float:
        var = float(phi @ self.fit.cov @ phi) / seconds**2
        return math.sqrt(max(var, 0.0) + self.fit.sigma**2)

    def _distance_outside(self, shape: tuple[float, float, float], dims: tuple[int, ...] = (0, 1, 2)) -> float:
        """Largest log-distance of the shape outside the covered range (0 inside), over the dimensions `dims`
        (0 input length, 1 output length, 2 load)."""
        worst = 0.0
        ranges = (self.covered.input_len, self.covered.output_len, self.covered.load)
        for value, (lo, hi) in (pair for d, pair in enumerate(zip(shape, ranges, strict=True)) if d in dims):
            if value < lo:
                worst = max(worst, math.log(lo / value))
            elif value > hi:
                worst = max(worst, math.log(value / hi))
        return worst

    def _prediction(self, tok_s, phi, seconds, shape, exact, ttft, tpot, e2e, concurrency) -> Prediction:
        # Beyond the measured lengths a curve fitted toward its physics prior continues as the physics does, and
        # its covariance (the prior's uncertainty on k and r) widens the interval: only the load is extrapolated.
        physics = self.prior is not None and self._distance_outside(shape, LENGTH_DIMS) > 1e-9
        distance = self._distance_outside(shape, LOAD_DIM if self.prior is not None else (0, 1, 2))
        sd = min(self._relative_sd(phi, seconds) * (1.0 + EXTRAPOLATION_WIDENING * distance), MAX_RELATIVE_SD)
        extrapolated = distance > 1e-9
        note = self.note
        if not self.has_latency:
            note = (note + "; " if note else "") + "latency predicted without latency measurements"
        if exact is None and self._host_bound_risk(concurrency):
            note = (note + "; " if note else "") + HOST_BOUND_NOTE.format(graphs=self.caps.cuda_graph_max_batch)
        if physics:
            note = (note + "; " if note else "") + PHYSICS_NOTE
        pred = Prediction(tok_s, tok_s * math.exp(-Z_90 * sd), tok_s * math.exp(Z_90 * sd), ttft, tpot, e2e,
                          float(concurrency), extrapolated, self._label(extrapolated, physics), note)
        return _replace_with_point(pred, exact, self.fit.sigma) if exact is not None else pred

    def _host_bound_risk(self, concurrency: float) -> bool:
        """More sequences than vLLM's largest CUDA graph, on a model or precision whose steps were measured
        host-bound there (an MoE model, a quantised one): see HOST_BOUND_NOTE."""
        quantised = bytes_per_value(self.key.precision) < bytes_per_value("bf16")
        return (self.key.engine in HOST_BOUND_ENGINES and concurrency > self.caps.cuda_graph_max_batch
                and (self.caps.expert_share > 0 or quantised))

    def _label(self, extrapolated: bool, physics: bool = False) -> str:
        """A prediction's provenance: "transferred" for a transferred curve (planner.engine.transfer), else
        "extrapolated" outside the covered load, "physics" beyond the measured lengths (continued by the physics
        prior) and "predicted" inside the range."""
        if self.source_provenance == "transferred":
            return "transferred"
        if extrapolated:
            return "extrapolated"
        return "physics" if physics else "predicted"

    def _exact(self, mode: str, input_len: float, output_len: float, load: float | None) -> pd.Series | None:
        pts = self.points
        match = (pts["mode"] == mode) & (pts["input_len"] == input_len) & (pts["output_len"] == output_len)
        if load is not None:
            column = "batch_size" if mode == "offline" else "concurrency"
            match &= pts[column] == load
        match &= pts["output_tok_per_s"].notna()
        if not match.any():
            return None
        return pts[match].sort_values("output_tok_per_s").iloc[-1]


def _replace_with_point(pred: Prediction, point: pd.Series, sigma: float) -> Prediction:
    """Use the measured or published throughput at an exactly matching shape."""
    value = float(point.output_tok_per_s)
    spread = math.exp(Z_90 * max(NOISE_FLOOR, min(sigma, 0.1)))
    return Prediction(value, value / spread, value * spread, pred.ttft_ms, pred.tpot_ms, pred.e2e_ms,
                      pred.concurrency, False, str(point.provenance), pred.note)


# ---------------------------------------------------------------- public API

def load_profiles(directory: str | Path | None = None) -> pd.DataFrame:
    """Every profile CSV under `directory` (default: the bundled profiles/), validated; ok rows only."""
    root = Path(directory) if directory is not None else BUNDLED_PROFILES_DIR
    if not root.exists():
        raise InputError(f"{root}: profiles directory not found")
    paths = sorted(p for p in root.rglob("*.csv")
                   if not p.name.startswith("_") and RUN_RECORDS_DIR not in p.relative_to(root).parts[:-1])
    frame = _validated_tables(paths)
    # A replica is tp GPUs in this planner; pipeline-parallel groups (tp x pp GPUs) are not sized yet.
    staged = frame["pp"].fillna(1) > 1
    if staged.any():
        log.info("skipping %d pipeline-parallel profile rows (pp > 1): not modelled yet", int(staged.sum()))
    return frame[(frame["status"] == "ok") & ~staged].reset_index(drop=True)


def _validated_tables(paths: list[Path]) -> pd.DataFrame:
    """load_tables(paths, PROFILE), read from the fit cache when the files' bytes were validated before."""
    try:
        content = b"".join(str(p).encode() + b"\0" + p.read_bytes() + b"\0" for p in paths)
    except OSError:
        return load_tables(paths, PROFILE)  # unreadable: its own one-line error, uncached
    return memo_frame("profiles", content, lambda: load_tables(paths, PROFILE))


def group_key(row: pd.Series) -> GroupKey:
    return GroupKey.from_values(tuple(row[c] for c in PROFILE_GROUP))


def fit_group(key: GroupKey, group: pd.DataFrame, prior: PhysicsPrior | None = None) -> Curve | None:
    """Fit one group (toward `prior` on its length terms, where given); None when it has too few usable points
    (logged)."""
    group = group.reset_index(drop=True)
    caps = _caps_for(group, key)
    obs = observations(group, caps)
    rich = _is_rich(group, obs)
    if len(obs) < (7 if rich else 4):
        log.info("%s: %d usable observations, too few to fit; exact shapes only", key.label(), len(obs))
        return None
    floors = _roofline_floors(key)
    fit = _stored_fit(obs, floors, rich, repeat_noise(group), prior)
    provenance = "measured" if (group["provenance"] == "measured").all() else "published"
    has_latency = any(o.kind != "throughput" for o in obs)
    t0 = ("the engine's calibrated step cost" if prior is not None and prior.t0 > floors.t0
          else "the roofline, assumed 80% of datasheet bandwidth")
    note = "" if rich else f"fitted to saturated throughputs only (t0 from {t0})"
    return Curve(key, caps, fit, provenance, has_latency, _covered(group), group, note, prior=prior)


# Columns that make two profile rows the same measurement point (repeats); the arrival process by its CV.
REPEAT_KEY = ("mode", "input_len", "output_len", "batch_size", "concurrency", "request_rate", "arrival_cv")


def repeat_noise(group: pd.DataFrame) -> float:
    """Relative run-to-run spread of throughput from a group's repeated points, at least NOISE_FLOOR.

    Pooled sample standard deviation of output_tok_per_s over every point measured more than once
    (relative to that point's mean); the shared, power-capped H200 shows 5-15% between identical runs,
    which intervals must cover.
    """
    rows = group[pd.to_numeric(group.get("output_tok_per_s"), errors="coerce") > 0]
    arrivals = rows["arrival"] if "arrival" in rows else pd.Series("", index=rows.index)
    rows = rows.assign(arrival_cv=[_arrival_cv(a) for a in arrivals])
    key = [c for c in REPEAT_KEY if c in rows]
    deviations, dof = 0.0, 0
    for _, same in rows.groupby(key, dropna=False):
        if len(same) < 2:
            continue
        tok = same["output_tok_per_s"].to_numpy(dtype=float)
        deviations += float(np.sum((tok / tok.mean() - 1.0) ** 2))
        dof += len(tok) - 1
    return max(NOISE_FLOOR, math.sqrt(deviations / dof)) if dof else NOISE_FLOOR


def _arrival_cv(arrival: object) -> float:
    try:
        return arrival_cv(str(arrival)) if isinstance(arrival, str) and arrival else math.nan
    except InputError:
        return math.nan


def _covered(group: pd.DataFrame) -> Range:
    load = pd.concat([group["batch_size"], group["concurrency"]]).dropna().astype(float)
    if group["mode"].eq("rate").any() or load.empty:
        load = pd.concat([load, pd.Series([1.0])])
    return Range((float(group.input_len.min()), float(group.input_len.max())),
                 (float(group.output_len.min()), float(group.output_len.max())),
                 (float(load.min()), float(load.max())))


def fit_curves(profiles: pd.DataFrame, priors: Mapping[GroupKey, PhysicsPrior] | None = None
               ) -> dict[GroupKey, Curve]:
    """Fit every group in `profiles` (rows as returned by load_profiles), each toward its physics prior where
    `priors` has one (planner.engine.physics_prior)."""
    curves = {}
    for values, group in profiles.groupby(list(PROFILE_GROUP), sort=True):
        key = GroupKey.from_values(values)
        curve = fit_group(key, group, (priors or {}).get(key))
        if curve is not None:
            curves[key] = curve
    return curves


def find_curve(curves: dict[GroupKey, Curve], engine: str, gpu: str, model: str, precision: str | None = None,
               tp: int | None = None, engine_version: str | None = None, config: str | None = None) -> Curve:
    """The curve matching the given identifiers; raises NoCurveError naming the available groups.

    Unspecified: the newest version, the smallest tp, and the default config when one
    matches (else another config: settings the caller did not ask for are a last resort).
    """
    optional = {"precision": precision, "tp": tp, "engine_version": engine_version, "config": config}
    wanted = [k for k in curves if (k.engine, k.gpu, k.model) == (engine, gpu, model) and _has(k, optional)]
    if not wanted:
        raise NoCurveError(_no_curve_message(curves, engine, gpu, model, precision, tp, config))
    defaults = [k for k in wanted if k.config == DEFAULT_CONFIG]
    return curves[max(defaults or wanted, key=lambda k: (version_order(k.engine_version), -k.tp))]


def _has(key: GroupKey, values: Mapping[str, object]) -> bool:
    """Whether `key` has each of these field values (None: any)."""
    return all(value is None or getattr(key, field) == value for field, value in values.items())


def _no_curve_message(curves: dict[GroupKey, Curve], engine: str, gpu: str, model: str, precision: str | None,
                      tp: int | None, config: str | None) -> str:
    """What was asked for, and the curves there are for that model (or that there are none)."""
    available = sorted(k.label() for k in curves if k.model == model)
    hint = "; available for this model: " + ", ".join(available) if available else \
        f"; no curve for model {model!r} at all"
    return (f"no fitted curve for {engine} on {gpu} / {model} "
            f"{precision or ''} tp={tp or 'any'}{f' config={config}' if config else ''}{hint}")


# Engines that schedule the next iteration while the current one runs, and the first version doing it by
# default: vLLM 0.14 release notes, "Async scheduling is now enabled by default" (2026-01).
ASYNC_SCHEDULING_SINCE = {"vllm": Version("0.14")}


def uses_async_scheduling(engine: str, engine_version: str) -> bool:
    """Whether `engine` at `engine_version` schedules iterations asynchronously by default."""
    since = ASYNC_SCHEDULING_SINCE.get(engine)
    try:
        return since is not None and Version(str(engine_version)) >= since
    except InvalidVersion:
        return False


def version_order(version: str) -> tuple:
    """Sort key of an engine version: PEP 440 versions after (newer than) unparseable ones."""
    try:
        return (1, Version(str(version)))
    except InvalidVersion:
        return (0, Version("0"))


def leave_one_out(profiles: pd.DataFrame, priors: Mapping[GroupKey, PhysicsPrior] | None = None) -> pd.DataFrame:
    """Per group: leave each throughput point out, refit (toward its physics prior, where given), predict it;
    median and max % error."""
    rows = []
    for values, group in profiles.groupby(list(PROFILE_GROUP), sort=True):
        key = GroupKey.from_values(values)
        errors = _stored_loo_errors(key, group.reset_index(drop=True), (priors or {}).get(key))
        if errors is None:
            continue
        rows.append({"group": key.label(), "provenance": group["provenance"].iloc[0], "n_points": len(errors),
                     "median_err_pct": float(np.median(errors)), "max_err_pct": float(np.max(errors))})
    return pd.DataFrame(rows, columns=["group", "provenance", "n_points", "median_err_pct", "max_err_pct"])


def _stored_loo_errors(key: GroupKey, group: pd.DataFrame, prior: PhysicsPrior | None = None
                       ) -> list[float] | None:
    """_loo_errors(), memoised on disk by the group's rows (planner.engine.fitcache): a plan reads its options'
    errors back instead of refitting each group once per point (and importing scipy)."""
    content = f"{key!r}\n{prior!r}\n".encode() + group.drop(columns=["file"], errors="ignore").to_csv(index=False).encode()
    return memo("loo-errors", content, lambda: _loo_errors(key, group, prior))


def _loo_errors(key: GroupKey, group: pd.DataFrame, prior: PhysicsPrior | None = None) -> list[float] | None:
    caps = _caps_for(group, key)
    obs = observations(group, caps)
    rich = _is_rich(group, obs)
    floor = _roofline_floors(key)
    errors = []
    for held in {o.row for o in obs if o.kind == "throughput"}:
        train = [o for o in obs if o.row != held]
        test = [o for o in obs if o.row == held and o.kind == "throughput"]
        if len(train) < (7 if rich else 4):
            return None
        fit = fit_observations(train, floor, full=rich, prior=prior)
        predicted = float(test[0].phi @ fit.theta)
        errors.append(abs(test[0].seconds / predicted - 1.0) * 100)  # throughput error, %
    return errors or None
