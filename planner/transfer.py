"""Transfer: curves for a (model, GPU, precision, TP) nobody profiled, from architecture and datasheet.

Every parameter of the iteration-time model (planner.curves: t = t0 + a*b + k*b*c + q*p + r*p*I,
h per request, g per sequence beyond the CUDA-graph batch) is written as physical quantities
times engine-specific coefficients c (seconds per unit of each quantity):

    t0 = c_weights * W_gpu / BW + c_step * L + c_tp_latency * 2L [tp > 1]
    a  = c_decode_flops * 2 N_active / (tp F) + c_seq * L + c_tp_bytes * X + c_expert_tokens * E
    k  = c_kv * KV_token / (tp BW)
    q  = c_prefill_flops * 2 N_active / (tp F) + c_tp_bytes * X + c_expert_tokens * E
    r  = c_attn_flops * 2 L_kv H d / (tp F)
    h  = c_request,   g = c_graph

W_gpu: weight bytes streamed per step on one GPU; BW, F: the GPU's datasheet memory bandwidth and
dense tensor FLOPS at the precision; KV_token: KV-cache bytes per token; X = 2L * 2(tp-1)/tp *
hidden * 2 bytes / interconnect bandwidth: one token's share of the two all-reduces per layer; L:
layers (fixed per-layer costs: kernel launches and small-kernel latency, per step and per sequence,
fitted better than per-step constants: TensorRT-LLM leave-one-TP-out median 12.7% vs 17.5%);
E = L * experts per token / tp: routed (token, expert) pairs of an MoE layer stack (dispatch,
combine and small grouped GEMMs, which the active-parameter FLOPs alone under-count).
1/c_weights is then the fraction of datasheet bandwidth an engine achieves, 1/c_decode_flops the
fraction of peak FLOPs, and so on.  Because every observation a profile makes is linear in theta
(planner.curves) and theta is linear in c, an engine's coefficients are fitted to every measured
and published group at once by bounded linear least squares on relative errors (`calibrate`),
with weak priors on the efficiencies so a coefficient the data cannot see stays physical.

`transferred_curve` then builds an ordinary planner.curves.Curve for the new target: caps from
the engine's memory rules (KV capacity from memory left after the weights), theta = P(target) c,
provenance "transferred", and an interval widened by the transfer error that `validate_transfer`
measures (leave-one-model/GPU/TP/precision-out).  A measured or published curve of the same
option always wins (planner.plan).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import lsq_linear

from fleetfacts.roofline import GIB, kv_cache_tokens
from fleetfacts.schema import DEFAULT_CONFIG, PROFILE_GROUP
from fleetfacts.specs import (
    GpuSpec,
    ModelSpec,
    bundled_gpu_specs,
    bundled_model_specs,
    kv_bytes_per_token,
    weight_bytes,
    weight_bytes_read_per_step,
)
from planner.curves import (
    DEFAULT_CUDA_GRAPH_MAX_BATCH,
    DEFAULT_MAX_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    KV_FREE_MEMORY_FRACTION,
    N_PARAMS,
    NOISE_FLOOR,
    Z_90,
    Caps,
    Curve,
    Fit,
    GroupKey,
    NoCurveError,
    Observation,
    Range,
    _caps_for,
    observations,
    version_order,
)

log = logging.getLogger(__name__)

COEF_NAMES = ("weights", "step", "tp_latency", "decode_flops", "seq", "tp_bytes", "kv", "prefill_flops",
              "attn_flops", "request", "graph", "expert_tokens")
N_COEF = len(COEF_NAMES)
_C = {name: i for i, name in enumerate(COEF_NAMES)}
# Weak priors on the physical efficiencies (as seconds per unit): datasheet bandwidth achieved at 80%
# (the same assumption curves.ACHIEVABLE_BANDWIDTH_FRACTION makes) and tensor FLOPs at 50% (typical
# model-FLOPs utilisation of serving GEMMs); they decide only what the data cannot (e.g. how a fixed
# step cost splits between weight reads and launch overhead when every group is one GPU type).
PRIORS = {"weights": 1.25, "kv": 1.25, "tp_bytes": 1.25, "decode_flops": 2.0, "prefill_flops": 2.0,
          "attn_flops": 2.0}
# Weight of each prior, in observations' worth (a calibration has tens to hundreds of observations).
PRIOR_WEIGHT = 2.0
# Engines that can be transferred, and which one lends the TP coefficients to an engine whose
# profiles are all TP1 (vLLM's measured H200 profiles): the all-reduce costs are the interconnect's,
# NCCL-like in both engines.
TRANSFER_ENGINES = ("vllm", "trtllm")
TP_DONOR = {"vllm": "trtllm"}
TP_COEFS = ("tp_latency", "tp_bytes")
# vLLM sizes its KV cache from gpu_memory_utilization (default 0.9) of the whole memory, less the
# weights and an activation reserve; the reserve is calibrated from the measured kv_cache_tokens.
VLLM_MEMORY_UTILIZATION = 0.9
# TP all-reduce traffic is in 16-bit activations whatever the weight precision.
ACTIVATION_BYTES = 2.0
# KV-cache precision by engine and weight precision: vLLM keeps the model dtype (kv_cache_dtype=auto,
# bf16 for fp8 weights); TensorRT-LLM's quantised checkpoints use an fp8 KV cache.
KV_PRECISION = {"vllm": {}, "trtllm": {"fp8": "fp8", "fp4": "fp8"}}
DEFAULT_KV_PRECISION = "bf16"
# A replica needs at least this many KV tokens to serve anything (one long request).
MIN_KV_TOKENS = 4096
PROVENANCE = "transferred"
# Profile columns the observations never read (long free text): dropped before building them.
TEXT_COLUMNS = ("source", "notes", "error", "date", "arrival")


# ---------------------------------------------------------------- physics

@dataclass(frozen=True)
class Target:
    """What a curve is transferred to: engine, model facts, GPU facts, weight precision, TP size."""

    engine: str
    model: ModelSpec
    gpu: GpuSpec
    precision: str
    tp: int


def kv_precision(engine: str, precision: str) -> str:
    """KV-cache precision an engine uses by default for a weight precision."""
    return KV_PRECISION.get(engine, {}).get(precision, DEFAULT_KV_PRECISION)


def physics_matrix(t: Target) -> np.ndarray:
    """P (7 x N_COEF): theta = P @ c for this target (see the module docstring)."""
    bw = t.gpu.mem_bandwidth_tb_s * 1e12
    flops = t.gpu.dense_tflops(t.precision) * 1e12 * t.tp
    bf16_flops = t.gpu.bf16_dense_tflops * 1e12 * t.tp  # attention runs in 16 bits
    m = t.model
    gemm = 2.0 * m.active_params / flops
    kv_layers = m.num_layers if m.kv_layers is None else m.kv_layers
    p = np.zeros((N_PARAMS, N_COEF))
    p[0, _C["weights"]] = weight_bytes_read_per_step(m, t.precision) / (t.tp * bw)
    p[0, _C["step"]] = float(m.num_layers)
    p[0, _C["tp_latency"]] = 2.0 * m.num_layers if t.tp > 1 else 0.0
    p[1, _C["decode_flops"]] = gemm
    p[1, _C["seq"]] = float(m.num_layers)
    p[1, _C["tp_bytes"]] = p[3, _C["tp_bytes"]] = _allreduce_s_per_token(t)
    p[2, _C["kv"]] = kv_bytes_per_token(m, kv_precision(t.engine, t.precision)) / (t.tp * bw)
    p[3, _C["prefill_flops"]] = gemm
    p[4, _C["attn_flops"]] = 2.0 * kv_layers * m.num_attention_heads * m.head_dim / bf16_flops
    p[5, _C["request"]] = 1.0
    p[6, _C["graph"]] = 1.0
    if m.is_moe:  # routed (token, expert) pairs per token on one GPU: dispatch, combine, small grouped GEMMs
        p[1, _C["expert_tokens"]] = p[3, _C["expert_tokens"]] = m.num_layers * m.experts_per_token / t.tp
    return p


def _allreduce_s_per_token(t: Target) -> float:
    """Seconds of ring all-reduce traffic per token at the datasheet interconnect bandwidth."""
    if t.tp <= 1:
        return 0.0
    link = t.gpu.interconnect_gb_s()
    if not link:
        raise NoCurveError(f"{t.gpu.gpu}: no interconnect bandwidth in gpu_specs.csv; cannot transfer to tp={t.tp}")
    per_layer = 2.0 * (t.tp - 1) / t.tp * t.model.hidden_size * ACTIVATION_BYTES
    return 2.0 * t.model.num_layers * per_layer / (link * 1e9 / 2.0)  # one direction of the both-ways figure


# ---------------------------------------------------------------- calibration data

@dataclass(frozen=True)
class GroupData:
    """One profile group with its physics: observations (curves' features) and P."""

    key: GroupKey
    target: Target
    caps: Caps
    obs: tuple[Observation, ...]
    design: np.ndarray   # one row per observation: (phi @ P) * weight / seconds
    covered: Range
    kv_cache_tokens: float | None   # as reported by the profile

    @property
    def label(self) -> str:
        return self.key.label()


def group_data(profiles: pd.DataFrame, specs: tuple[dict[str, GpuSpec], dict[str, ModelSpec]] | None = None
               ) -> list[GroupData]:
    """Every profile group of a transferable engine whose GPU and model have facts (others skipped)."""
    gpus, models = specs or (bundled_gpu_specs(), bundled_model_specs())
    wanted = profiles["engine"].isin(TRANSFER_ENGINES) & profiles["gpu"].isin(list(gpus)) \
        & profiles["model"].isin(list(models))
    slim = profiles.loc[wanted, [c for c in profiles.columns if c not in TEXT_COLUMNS]]  # iterrows is 3x faster
    out = []
    for values, group in slim.groupby(list(PROFILE_GROUP), sort=True):
        key = GroupKey.from_values(values)
        if key.engine not in TRANSFER_ENGINES or key.gpu not in gpus or key.model not in models:
            continue
        data = _one_group(key, group.reset_index(drop=True), Target(key.engine, models[key.model], gpus[key.gpu],
                                                                   key.precision, key.tp))
        if data is not None:
            out.append(data)
    return out


def _one_group(key: GroupKey, group: pd.DataFrame, target: Target) -> GroupData | None:
    try:
        p = physics_matrix(target)
    except (NoCurveError, KeyError) as err:
        log.info("%s: no physics (%s)", key.label(), err)
        return None
    caps = _caps_for(group, key)
    obs = tuple(observations(group, caps))
    if not obs:
        return None
    design = np.array([(o.phi @ p) * o.weight / o.seconds for o in obs])
    kv = pd.to_numeric(group["kv_cache_tokens"], errors="coerce").dropna()
    load = pd.concat([group["batch_size"], group["concurrency"]]).dropna().astype(float)
    covered = Range((float(group.input_len.min()), float(group.input_len.max())),
                    (float(group.output_len.min()), float(group.output_len.max())),
                    (float(load.min()) if len(load) else 1.0, float(load.max()) if len(load) else 1.0))
    return GroupData(key, target, caps, obs, design, covered, float(kv.iloc[0]) if len(kv) else None)


# ---------------------------------------------------------------- calibration

@dataclass(frozen=True)
class Calibration:
    """An engine's fitted coefficients (seconds per physical unit) and what they rest on."""

    engine: str
    coef: np.ndarray
    cov: np.ndarray
    sigma: float                 # relative residual of the pooled fit
    groups: tuple[str, ...]
    borrowed: tuple[str, ...]    # coefficients taken from another engine's calibration
    covered: Range
    vllm_reserve_gib: float = 0.0

    def theta(self, target: Target) -> np.ndarray:
        return physics_matrix(target) @ self.coef

    def describe(self) -> str:
        parts = [f"{name}={value:.3g}" for name, value in zip(COEF_NAMES, self.coef, strict=True)]
        return f"{self.engine} calibrated on {len(self.groups)} groups: " + ", ".join(parts)


def calibrate(data: Iterable[GroupData], engine: str, fixed: dict[str, float] | None = None,
              borrowed: tuple[str, ...] = ()) -> Calibration:
    """Fit the engine's coefficients to every observation of `data` (its groups of that engine).

    fixed: coefficients held at given values (e.g. TP costs borrowed from another engine).
    Raises NoCurveError when no group of the engine is given.
    """
    groups = [d for d in data if d.key.engine == engine]
    if not groups:
        raise NoCurveError(f"no {engine} profile to calibrate a transfer on")
    fixed = dict(fixed or {})
    for name in TP_COEFS:  # unidentified without TP > 1 data: zero unless given
        if name not in fixed and all(d.target.tp == 1 for d in groups):
            fixed[name] = 0.0
    design = np.vstack([d.design for d in groups])
    weights = np.concatenate([[o.weight for o in d.obs] for d in groups])
    return _solve(design, weights, fixed, engine, tuple(d.label for d in groups), borrowed,
                  _union_range(groups), _vllm_reserve_gib(groups))


def _solve(design: np.ndarray, weights: np.ndarray, fixed: dict[str, float], engine: str,
           labels: tuple[str, ...], borrowed: tuple[str, ...], covered: Range, reserve: float) -> Calibration:
    free = np.array([name not in fixed for name in COEF_NAMES])
    fixed_vec = np.array([fixed.get(name, 0.0) for name in COEF_NAMES])
    rhs = weights - design[:, ~free] @ fixed_vec[~free]
    prior_rows, prior_rhs = _prior_rows(free)
    a = np.vstack([design[:, free], prior_rows])
    b = np.concatenate([rhs, prior_rhs])
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1.0
    result = lsq_linear(a / scale, b, bounds=(0.0, np.inf), method="bvls")
    coef = fixed_vec.copy()
    coef[free] = result.x / scale
    resid = design[:, free] @ coef[free] - rhs
    dof = max(len(rhs) - int(free.sum()), 1)
    sigma = max(NOISE_FLOOR, math.sqrt(float(resid @ resid) / dof))
    cov = np.zeros((N_COEF, N_COEF))
    cov[np.ix_(free, free)] = sigma**2 * np.linalg.pinv(a.T @ a)
    return Calibration(engine, coef, cov, sigma, labels, borrowed, covered, reserve)


def _prior_rows(free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows sqrt(w) * c_j / prior_j = sqrt(w): each efficiency pulled gently toward its prior."""
    names = [n for n, f in zip(COEF_NAMES, free, strict=True) if f]
    rows, rhs = [], []
    for j, name in enumerate(names):
        if name in PRIORS:
            row = np.zeros(len(names))
            row[j] = math.sqrt(PRIOR_WEIGHT) / PRIORS[name]
            rows.append(row)
            rhs.append(math.sqrt(PRIOR_WEIGHT))
    return np.array(rows).reshape(-1, len(names)), np.array(rhs)


def _union_range(groups: list[GroupData]) -> Range:
    def span(pick: Callable[[Range], tuple[float, float]]) -> tuple[float, float]:
        return min(pick(g.covered)[0] for g in groups), max(pick(g.covered)[1] for g in groups)
    return Range(span(lambda r: r.input_len), span(lambda r: r.output_len), span(lambda r: r.load))


def _vllm_reserve_gib(groups: list[GroupData]) -> float:
    """Median activation reserve per GPU implied by vLLM groups' reported KV tokens (GiB; 0 if none)."""
    reserves = []
    for d in groups:
        if d.key.engine != "vllm" or d.kv_cache_tokens is None or d.key.config != DEFAULT_CONFIG:
            continue
        t = d.target
        kv = d.kv_cache_tokens * kv_bytes_per_token(t.model, kv_precision(t.engine, t.precision))
        budget = VLLM_MEMORY_UTILIZATION * t.gpu.memory_gib * GIB * t.tp
        reserves.append((budget - weight_bytes(t.model, t.precision) - kv) / (t.tp * GIB))
    return max(0.0, float(np.median(reserves))) if reserves else 0.0


def calibrate_engine(data: list[GroupData], engine: str) -> Calibration:
    """`calibrate` with the TP coefficients borrowed from TP_DONOR when the engine has no TP > 1 data."""
    own = [d for d in data if d.key.engine == engine]
    donor = TP_DONOR.get(engine)
    if donor and own and all(d.target.tp == 1 for d in own) and any(d.key.engine == donor for d in data):
        lent = calibrate(data, donor)
        fixed = {name: float(lent.coef[_C[name]]) for name in TP_COEFS}
        return calibrate(own, engine, fixed, borrowed=tuple(f"{n} from {donor}" for n in TP_COEFS))
    return calibrate(own, engine)


# ---------------------------------------------------------------- transferred curves

def transfer_caps(calibration: Calibration, target: Target) -> Caps:
    """Batch caps of the target: engine defaults and KV tokens from memory left after the weights."""
    engine = target.engine
    memory = target.gpu.memory_gib * GIB * target.tp
    weights = weight_bytes(target.model, target.precision)
    per_token = kv_bytes_per_token(target.model, kv_precision(engine, target.precision))
    if engine == "vllm":
        reserve = calibration.vllm_reserve_gib * GIB * target.tp
        tokens = kv_cache_tokens(memory, weights + reserve, per_token, memory_fraction=VLLM_MEMORY_UTILIZATION)
    else:
        tokens = kv_cache_tokens(memory, weights, per_token, free_fraction=KV_FREE_MEMORY_FRACTION)
    if tokens < MIN_KV_TOKENS:
        raise NoCurveError(f"{target.model.model} {target.precision} does not fit {target.tp} x {target.gpu.gpu} "
                           f"({weights / GIB:.0f} GiB of weights, {target.gpu.memory_gib:g} GiB per GPU)")
    return Caps(DEFAULT_MAX_NUM_SEQS.get(engine, 1024), int(tokens), DEFAULT_MAX_BATCHED_TOKENS.get(engine, 8192),
                DEFAULT_CUDA_GRAPH_MAX_BATCH.get(engine, 10**9))


def transferred_curve(calibration: Calibration, target: Target, transfer_error: float,
                      engine_version: str = "transfer") -> Curve:
    """A Curve for `target` from `calibration`; `transfer_error` (relative, e.g. 0.12) is the measured
    worst transfer error, added to the interval so a 90% interval spans it.  Raises NoCurveError."""
    p = physics_matrix(target)
    theta = p @ calibration.coef
    transfer_sd = transfer_error / Z_90
    sigma = math.sqrt(calibration.sigma**2 + transfer_sd**2)
    fit = Fit(theta, p @ calibration.cov @ p.T, sigma, (False,) * N_PARAMS, 0)
    key = GroupKey(target.engine, engine_version, target.gpu.gpu, target.model.model, target.precision, target.tp)
    borrowed = f"; {', '.join(calibration.borrowed)}" if calibration.borrowed else ""
    note = (f"transferred from {len(calibration.groups)} {target.engine} profiles (model facts: "
            f"{target.model.source}; GPU: gpu_specs.csv {target.gpu.gpu}{borrowed}); interval widened by the "
            f"measured transfer error {transfer_error:.0%}")
    points = pd.DataFrame(columns=["mode", "input_len", "output_len", "batch_size", "concurrency",
                                   "output_tok_per_s", "provenance"])
    # has_latency False: TTFT does not transfer well (validate --transfer), so a transferred option's latency
    # basis is "unverified" and ranks behind measured latency on online routes (planner.plan).
    return Curve(key, transfer_caps(calibration, target), fit, PROVENANCE, False, calibration.covered, points, note)


@dataclass(frozen=True)
class Transfer:
    """Calibrations per engine and the transfer error each carries: what `plan` and `predict` use."""

    calibrations: dict[str, Calibration]
    errors: dict[str, float]
    versions: dict[str, str]

    def curve(self, engine: str, model: ModelSpec, gpu: GpuSpec, precision: str, tp: int) -> Curve:
        """A transferred curve; NoCurveError when the engine has no calibration or the model does not fit."""
        if engine not in self.calibrations:
            raise NoCurveError(f"no transfer calibration for engine {engine!r}; calibrated: "
                               f"{', '.join(sorted(self.calibrations)) or 'none'}")
        return transferred_curve(self.calibrations[engine], Target(engine, model, gpu, precision, tp),
                                 self.errors[engine], self.versions[engine])


def build_transfer(profiles: pd.DataFrame, errors: dict[str, float], data: list[GroupData] | None = None) -> Transfer:
    """Calibrate every transferable engine on all of `profiles` (or its precomputed `data`); `errors`:
    per engine, the measured transfer error (engines without one get the largest measured)."""
    data = group_data(profiles) if data is None else data
    cals, versions = {}, {}
    for engine in TRANSFER_ENGINES:
        if any(d.key.engine == engine for d in data):
            cals[engine] = calibrate_engine(data, engine)
            versions[engine] = _newest_version(profiles, engine)
    worst = max(errors.values(), default=0.0)
    return Transfer(cals, {e: errors.get(e, worst) for e in cals}, versions)


def _newest_version(profiles: pd.DataFrame, engine: str) -> str:
    """'<newest profiled version>+transfer': a PEP 440 local version, never equal to a profiled one."""
    versions = profiles.loc[profiles["engine"] == engine, "engine_version"].astype(str).unique()
    return f"{max(versions, key=version_order)}+transfer" if len(versions) else "transfer"

