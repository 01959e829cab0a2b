"""Transfer: curves for a (model, GPU, precision, TP) nobody profiled, from architecture and datasheet.

Every parameter of the iteration-time model (planner.engine.curves: t = t0 + a*b + k*b*c + q*p + r*p*I,
h per request, g per sequence beyond the CUDA-graph batch) is written as physical quantities
times engine-specific coefficients c (seconds per unit of each quantity):

    t0 = c_weights * (W_read - W_experts) / (tp BW) + c_step * L + c_tp_latency * 2L [tp > 1]
         + c_moe_step * L + c_moe_fixed [MoE]
    m  = c_weights * W_experts / (tp BW)
    a  = c_decode_flops * G_decode + c_seq * L + c_tp_bytes * X + c_expert_tokens * E
         + c_untuned_pairs * E [vLLM, no tuned fused-MoE config for the expert shape on the GPU]
    k  = c_kv * KV_token / (tp BW)
    q  = c_prefill_flops * G_prefill + c_tp_bytes * X + c_expert_tokens * E
    r  = c_attn_flops * 2 L_kv H d / (tp F_bf16)
    h  = c_request + c_prefill_flops * G_head
    g  = c_graph + c_expert_graph * E

W_read: weight bytes streamed per decode step, each part at the precision it is stored in (a
quantised checkpoint keeps its LM head and embeddings in 16 bits; a natively MXFP4 checkpoint such as
gpt-oss stores only its experts in 4 bits).  W_experts: the routed experts' share of it (0 for a dense
model); a step reads them in proportion to the experts its tokens touch (planner.engine.curves, m), with the
same bandwidth efficiency as every other weight: no coefficient of its own.  G_decode: seconds of GEMM FLOPs per decoded token at the
datasheet dense peak of the precision each part is computed in (the LM head in 16 bits; MXFP4 experts
with 16-bit activations on GPUs without FP4 tensor cores, 8-bit on Blackwell); G_prefill the same
without the LM head, which runs once per prompt (G_head, in h).  BW, F: datasheet memory bandwidth and
dense tensor FLOPS; KV_token: KV-cache bytes per token; X = 2L * 2(tp-1)/tp * hidden * 2 bytes /
interconnect bandwidth: one token's share of the two all-reduces per layer; L: layers (fixed
per-layer costs: kernel launches and small-kernel latency); E = L * experts per token / tp: routed
(token, expert) pairs of an MoE layer stack (dispatch, combine and small grouped GEMMs); c_moe_step the
fixed cost an MoE layer adds to every step (router, top-k, token sorting and the fused-MoE launches).
g: a sequence decoded beyond the largest captured CUDA graph runs without it, paying a fixed amount
(c_graph, whatever the layer count) and, in an MoE model, an amount per routed (token, expert) pair
(c_expert_graph). Each profile's own fit on the H200 (vLLM 0.26), in us per such sequence: 21 and 29 for the
dense GQA 7-8B models, 36 for Mixtral-8x7B (64 routed pairs), 42 for OLMoE-1B-7B (128) and 77 for
Qwen3-30B-A3B (384): about 25 + 0.14 per pair; per layer it would be 2.6 us for OLMoE and 0.8 for the dense
models.
c_moe_fixed: a per-step cost of an MoE model that does not grow with its layers. With Mixtral-8x7B (32 layers)
and Qwen3-30B-A3B (48) alone the data put the MoE overhead per layer (c_moe_step); OLMoE-1B-7B (16 layers, 2.1 ms
a step at batch 1) puts it per step (about 0.9 ms, c_moe_step then 0): Qwen3-30B-A3B predicted from the others
went from 11.7% to 6.3% median. It is not identified from two MoE models (OLMoE from the other two barely moves),
which the MoE interval widening carries.
c_untuned_pairs: what a routed pair costs on top in decode when vLLM runs its fused-MoE kernel on the default
config, because it ships no tuned file for that (experts, expert width per GPU, GPU, dtype)
(fleetfacts.moe_configs). On the H200 OLMoE-1B-7B and Granite-3.1-3B-A800M run so, Mixtral-8x7B and
Qwen3-30B-A3B on tuned files; one more sequence costs Granite (twice OLMoE's layers and pairs) less than OLMoE,
so no per-layer or per-pair cost common to all four fits. With it, Granite from the others went from 6.2% / 118%
to 9.3% / 67.3%, OLMoE from 5.1% / 46.5% to 6.1% / 28.1%, Qwen3-30B-A3B from 4.6% / 40.1% to 3.2% / 34.0%
(validate --transfer, 2026-12-04). Prefill, with thousands of tokens per step, is left out (adding it made
Granite 104%).
The five MoE coefficients are fitted, labelled engine parameters: zero until MoE profiles are pooled.
1/c_weights is then the fraction of datasheet bandwidth an engine achieves, 1/c_decode_flops the
fraction of peak FLOPs, and so on.

Efficiency is not one number per engine: it moves with the engine version, the GPU generation
(Ampere, Ada, Hopper, Blackwell: `arch` in gpu_specs.csv) and the precision family (16-bit, FP8,
FP4).  Each group's coefficients are the engine-wide ones times a multiplicative effect per level it
belongs to, c_g = c * exp(d_version + d_arch + d_precision), and every effect is shrunk toward zero
(a normal prior in log space, EFFECT_SD): partial pooling, so a level seen in one or two tables moves
only as far as its data insist, and a level never seen (a new GPU generation) gets the engine-wide
value.  `calibrate` fits c by bounded linear least squares on relative errors (every observation is
linear in c for fixed effects), then c and the effects together (`scipy.optimize.least_squares`),
with weak priors on the efficiencies so a coefficient the data cannot see stays physical.

The published TensorRT-LLM tables are `trtllm-bench` runs: the tool sizes each run's batch and token
budget from the memory the KV cache gets at that ISL/OSL (`trtllm_bench_caps`), so the batch a table
row ran at, and how its per-step costs amortise, follow from the facts too.  Rows that give no
request count are maximum-throughput figures: modelled as many full waves.

`transferred_curve` then builds an ordinary planner.engine.curves.Curve for the new target: caps from
the engine's memory rules (KV capacity from memory left after the weights), theta = P(target) c_g,
provenance "transferred", and an interval widened by the transfer error that `validate_transfer`
measures (leave-one-model/GPU/TP/precision-out).  A measured or published curve of the same
option always wins (planner.planning.plan).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from fleetfacts.moe_configs import fused_moe_shape
from fleetfacts.roofline import GIB, kv_cache_tokens
from fleetfacts.schema import DEFAULT_CONFIG, PROFILE_GROUP
from fleetfacts.specs import (
    GpuSpec,
    ModelSpec,
    bundled_gpu_specs,
    bundled_model_specs,
    kv_bytes_per_token,
)
from planner.engine.curves import (
    DEFAULT_CUDA_GRAPH_MAX_BATCH,
    DEFAULT_MAX_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    KV_FREE_MEMORY_FRACTION,
    N_PARAMS,
    NOISE_FLOOR,
    PREEMPTING_ENGINES,
    SATURATION_WAVES,
    Z_90,
    Caps,
    Curve,
    Fit,
    GroupKey,
    NoCurveError,
    Observation,
    Range,
    _caps_for,
    _point_observations,
    model_expert_share,
    row_caps,
    version_order,
    window_caps,
)
from planner.engine.transfer_physics import (
    COEF_INDEX,
    COEF_NAMES,
    N_COEF,
    Target,
    architecture,
    kv_precision,
    levels,
    on_default_moe_config,
    physics_matrix,
    resident_weight_bytes,
    trtllm_bench_caps,
)

log = logging.getLogger(__name__)

# Weak priors on the physical efficiencies (as seconds per unit): datasheet bandwidth achieved at 80%
# (the same assumption curves.ACHIEVABLE_BANDWIDTH_FRACTION makes) and tensor FLOPs at 50% (typical
# model-FLOPs utilisation of serving GEMMs); they decide only what the data cannot (e.g. how a fixed
# step cost splits between weight reads and launch overhead when every group is one GPU type).
PRIORS = {"weights": 1.25, "kv": 1.25, "tp_bytes": 1.25, "decode_flops": 2.0, "prefill_flops": 2.0,
          "attn_flops": 2.0}
# Weight of each prior, in observations' worth (a calibration has tens to hundreds of observations).
PRIOR_WEIGHT = 2.0
# Which coefficients may differ by engine version, GPU generation and precision family: a version
# changes kernels and the scheduler (every efficiency and overhead); a generation changes memory and
# tensor cores (bandwidth and FLOP efficiencies, launch latency); a precision family changes the GEMM
# kernels and the dequantisation of weights as they are read, and what a step run outside the CUDA graphs
# launches per sequence (vLLM's dynamic FP8 quantises each GEMM's activations on the fly).
EFFECT_COEFS = {
    "version": ("weights", "step", "decode_flops", "seq", "kv", "prefill_flops", "attn_flops", "request",
                "expert_tokens", "moe_step"),
    "arch": ("weights", "step", "decode_flops", "kv", "prefill_flops", "attn_flops"),
    "precision": ("weights", "decode_flops", "prefill_flops", "expert_tokens", "graph"),
}
# Prior spread of each effect (standard deviation of the log factor): 0.3 lets a level be ~1.35x off
# the engine-wide efficiency at one sd (FP4 GEMMs reaching a smaller share of their doubled peak, a
# doc version with CUDA graphs off), while a level seen in few tables stays near the engine's value.
EFFECT_SD = {"version": 0.3, "arch": 0.3, "precision": 0.3}
# Effects are bounded to a factor e^2 either way: past that the physics, not an efficiency, is wrong.
MAX_EFFECT = 2.0
# Gauss-Newton steps of the level fit, the relative gain in the objective below which it has converged,
# and how many times a step that does not lower the objective is halved before the fit stops.
LEVEL_ITERATIONS = 30
LEVEL_TOLERANCE = 1e-3
LEVEL_HALVINGS = 8
# Added to the diagonal of the (unit-scaled) normal equations: keeps a column no data sees solvable.
NORMAL_JITTER = 1e-10
# Level fits: the first weighs the effects against the pooled fit's residual scale, the second against
# the (smaller) scale left once the effects are in.
NOISE_PASSES = 2
# Engines that can be transferred, and which one lends the TP coefficients to an engine whose
# profiles are all TP1 (vLLM's measured H200 profiles): the all-reduce costs are the interconnect's,
# NCCL-like in both engines.
TRANSFER_ENGINES = ("vllm", "trtllm")
TP_DONOR = {"vllm": "trtllm"}
TP_COEFS = ("tp_latency", "tp_bytes")
# vLLM sizes its KV cache from gpu_memory_utilization (default 0.9) of the whole memory, less the
# weights and an activation reserve; the reserve is calibrated from the measured kv_cache_tokens.
VLLM_MEMORY_UTILIZATION = 0.9
# A replica needs at least this many KV tokens to serve anything (one long request).
MIN_KV_TOKENS = 4096
PROVENANCE = "transferred"
# Key suffix of the transfer error for an architecture no calibrated profile has ("vllm/unseen").
UNSEEN_ARCHITECTURE = "unseen"
# Local version tag of a transferred curve: '<newest profiled version>+transfer' (its efficiencies are that version's).
TRANSFER_TAG = "+transfer"
# Profile columns the observations never read (long free text): dropped before building them.
TEXT_COLUMNS = ("source", "notes", "error", "date", "arrival")


# ---------------------------------------------------------------- physics


# ---------------------------------------------------------------- the tables' batch: trtllm-bench's caps


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
                                                                   key.precision, key.tp, key.engine_version))
        if data is not None:
            out.append(data)
    return out


def _one_group(key: GroupKey, group: pd.DataFrame, target: Target) -> GroupData | None:
    try:
        p = physics_matrix(target)
    except (NoCurveError, KeyError) as err:
        log.info("%s: no physics (%s)", key.label(), err)
        return None
    caps = _group_caps(group, key, target)
    obs = tuple(_observations(group, caps, target))
    if not obs:
        return None
    design = np.array([(o.phi @ p) * o.weight / o.seconds for o in obs])
    kv = pd.to_numeric(group["kv_cache_tokens"], errors="coerce").dropna()
    load = pd.concat([group["batch_size"], group["concurrency"]]).dropna().astype(float)
    covered = Range((float(group.input_len.min()), float(group.input_len.max())),
                    (float(group.output_len.min()), float(group.output_len.max())),
                    (float(load.min()) if len(load) else 1.0, float(load.max()) if len(load) else 1.0))
    return GroupData(key, target, caps, obs, design, covered, float(kv.iloc[0]) if len(kv) else None)


def _group_caps(group: pd.DataFrame, key: GroupKey, target: Target) -> Caps:
    """The group's caps, with the KV tokens an unreported profile had from the engine's own memory rule."""
    caps = replace(_caps_for(group, key), expert_share=model_expert_share(target.model))
    if pd.to_numeric(group["kv_cache_tokens"], errors="coerce").notna().any():
        return caps
    tokens = kv_cache_tokens(target.gpu.memory_gib * GIB * target.tp, resident_weight_bytes(target),
                             kv_bytes_per_token(target.model, kv_precision(key.engine, key.precision)),
                             free_fraction=KV_FREE_MEMORY_FRACTION)
    return replace(caps, kv_cache_tokens=max(1, int(tokens)))


def _observations(group: pd.DataFrame, caps: Caps, target: Target) -> list[Observation]:
    """curves.observations, except for TensorRT-LLM's published throughput tables: each row ran with
    trtllm-bench's caps for its ISL/OSL, and a row with no request count is a saturated maximum."""
    obs: list[Observation] = []
    for row, point in group.iterrows():
        row_c = row_caps(point, caps)
        if _is_bench_row(point, target):
            row_c = trtllm_bench_caps(target, float(point.input_len), float(point.output_len))
            if not _has_count(point):
                point = point.copy()
                point["batch_size"] = SATURATION_WAVES * row_c.max_batch(point.input_len, point.output_len)
        obs.extend(_point_observations(point, row_c, int(row)))
    return obs


def _is_bench_row(point: pd.Series, target: Target) -> bool:
    reported = any(_positive(point.get(c)) for c in ("max_num_seqs", "max_num_batched_tokens"))
    return target.engine == "trtllm" and point["mode"] == "offline" and not reported


def _has_count(point: pd.Series) -> bool:
    return _positive(point.get("batch_size")) or _positive(point.get("num_requests"))


def _positive(value: object) -> bool:
    try:
        return value is not None and not pd.isna(value) and float(value) > 0  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------- calibration

Level = tuple[str, str]


@dataclass(frozen=True)
class Calibration:
    """An engine's fitted coefficients (seconds per physical unit), its level effects, and what they rest on."""

    engine: str
    coef: np.ndarray
    cov: np.ndarray
    sigma: float                 # relative residual of the pooled fit
    groups: tuple[str, ...]
    borrowed: tuple[str, ...]    # coefficients taken from another engine's calibration
    covered: Range
    vllm_reserve_gib: float = 0.0
    effects: dict[Level, np.ndarray] = field(default_factory=dict)   # log factors per level, N_COEF each

    def coef_for(self, target: Target) -> np.ndarray:
        """The coefficients of the target's levels: the engine-wide ones times each known level's factor."""
        log_factor = sum((self.effects[lv] for lv in levels(target) if lv in self.effects), np.zeros(N_COEF))
        return self.coef * np.exp(log_factor)

    def theta(self, target: Target) -> np.ndarray:
        return physics_matrix(target) @ self.coef_for(target)

    def describe(self) -> str:
        parts = [f"{name}={value:.3g}" for name, value in zip(COEF_NAMES, self.coef, strict=True)]
        return (f"{self.engine} calibrated on {len(self.groups)} groups, {len(self.effects)} level effects: "
                + ", ".join(parts))


def calibrate(data: Iterable[GroupData], engine: str, fixed: dict[str, float] | None = None,
              borrowed: tuple[str, ...] = ()) -> Calibration:
    """Fit the engine's coefficients and level effects to every observation of `data` (its groups of
    that engine).  fixed: coefficients held at given values (e.g. TP costs borrowed from another engine).
    Raises NoCurveError when no group of the engine is given.
    """
    groups = [d for d in data if d.key.engine == engine]
    if not groups:
        raise NoCurveError(f"no {engine} profile to calibrate a transfer on")
    fixed = {**_unidentified(groups), **(fixed or {})}
    problem = _Problem.build(groups, fixed)
    coef = _solve_pooled(problem)
    effects: dict[Level, np.ndarray] = {}
    sigma, cov = _uncertainty(problem, coef, effects)
    for _ in range(NOISE_PASSES):  # effects weighed against the noise left once they are fitted
        coef, effects = _solve_levels(problem, coef, effects, sigma)
        sigma, cov = _uncertainty(problem, coef, effects)
    return Calibration(engine, coef, cov, sigma, tuple(d.label for d in groups), borrowed, _union_range(groups),
                       _vllm_reserve_gib(groups), effects)


def _unidentified(groups: list[GroupData]) -> dict[str, float]:
    """The coefficients these groups cannot identify, held at zero: the TP costs without TP > 1 data, and
    a quantity no observation has (no sequence beyond the CUDA graphs)."""
    single_gpu = all(d.target.tp == 1 for d in groups)
    return {name: 0.0 for name in COEF_NAMES
            if (single_gpu and name in TP_COEFS) or not any(np.any(d.design[:, COEF_INDEX[name]]) for d in groups)}


@dataclass(frozen=True)
class _Problem:
    """The stacked observations of a calibration: design rows, weights, the group of each row, the levels."""

    design: np.ndarray        # n_obs x N_COEF
    weights: np.ndarray       # n_obs
    group_of: np.ndarray      # n_obs: index into the groups
    membership: np.ndarray    # n_groups x n_levels, 0/1
    levels: tuple[Level, ...]
    free: np.ndarray          # N_COEF booleans
    fixed: np.ndarray         # N_COEF values (those not free)

    @classmethod
    def build(cls, groups: list[GroupData], fixed: dict[str, float]) -> _Problem:
        seen = sorted({lv for d in groups for lv in levels(d.target) if lv[0] in EFFECT_COEFS})
        kinds = [lv[0] for lv in seen]
        seen = [lv for lv in seen if kinds.count(lv[0]) > 1]  # a kind with one value is the engine-wide c
        member = np.array([[lv in levels(d.target) for lv in seen] for d in groups], dtype=float)
        return cls(np.vstack([d.design for d in groups]),
                   np.concatenate([[o.weight for o in d.obs] for d in groups]),
                   np.concatenate([np.full(len(d.obs), i) for i, d in enumerate(groups)]),
                   member.reshape(len(groups), len(seen)), tuple(seen),
                   np.array([name not in fixed for name in COEF_NAMES]),
                   np.array([fixed.get(name, 0.0) for name in COEF_NAMES]))

    def effect_slots(self) -> list[tuple[int, int]]:
        """(level index, coefficient index) of every free effect."""
        return [(i, COEF_INDEX[name]) for i, (kind, _) in enumerate(self.levels) for name in EFFECT_COEFS[kind]
                if self.free[COEF_INDEX[name]]]


def _solve_pooled(pb: _Problem, factor: np.ndarray | None = None) -> np.ndarray:
    """Coefficients for fixed level factors (n_obs x N_COEF; none: engine-wide only): bounded linear
    least squares on relative errors with the priors, a unique solution."""
    free = pb.free
    design = pb.design if factor is None else pb.design * factor
    rhs = pb.weights - design[:, ~free] @ pb.fixed[~free]
    prior_rows, prior_rhs = _prior_rows(free)
    a = np.vstack([design[:, free], prior_rows])
    b = np.concatenate([rhs, prior_rhs])
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1.0
    from scipy.optimize import lsq_linear  # here, not at the top: predict and plan import this module for
    # every command, and only a transfer fits (scipy costs a quarter of a second to import)

    result = lsq_linear(a / scale, b, bounds=(0.0, np.inf), method="bvls")
    coef = pb.fixed.copy()
    coef[free] = result.x / scale
    return coef


def _solve_levels(pb: _Problem, coef: np.ndarray, effects: dict[Level, np.ndarray], sigma: float
                  ) -> tuple[np.ndarray, dict[Level, np.ndarray]]:
    """Coefficients and shrunk log effects together by damped Gauss-Newton: each step solves the fit
    linearised in the effects (exactly linear in the coefficients), with the priors on the coefficients
    and the shrinkage of the effects as ridge rows, (sigma / EFFECT_SD)^2 for relative residuals of
    scale sigma; a step that does not lower the objective is halved."""
    fit = _LevelFit(pb, sigma)
    if not fit.slots:
        return coef, {}
    x = np.concatenate([coef[pb.free], [effects.get(pb.levels[i], np.zeros(N_COEF))[j] for i, j in fit.slots]])
    best = fit.objective(x)
    for _ in range(LEVEL_ITERATIONS):
        step = fit.step(x) - x
        for _ in range(LEVEL_HALVINGS):
            trial = x + step
            value = fit.objective(trial)
            if value <= best:
                break
            step = step / 2
        else:
            break
        x, gain, best = trial, best - value, value
        log.debug("level fit step: objective %.6g", best)
        if gain <= LEVEL_TOLERANCE * best:
            break
    return fit.unpack(x)


class _LevelFit:
    """The hierarchical least-squares problem: unknowns x = (free coefficients, log effects per slot)."""

    def __init__(self, pb: _Problem, sigma: float) -> None:
        self.pb, self.slots = pb, pb.effect_slots()
        self.rows = np.array([s[0] for s in self.slots], dtype=int)
        self.cols = np.array([s[1] for s in self.slots], dtype=int)
        self.ridge = np.array([sigma / EFFECT_SD[pb.levels[i][0]] for i, _ in self.slots])
        self.member = pb.membership[pb.group_of][:, self.rows]          # n_obs x n_slots
        self.prior_rows, self.prior_rhs = _prior_rows(pb.free)
        self.n_free = int(pb.free.sum())

    def unpack(self, x: np.ndarray) -> tuple[np.ndarray, dict[Level, np.ndarray]]:
        coef = self.pb.fixed.copy()
        coef[self.pb.free] = x[:self.n_free]
        log_effects = np.zeros((len(self.pb.levels), N_COEF))
        log_effects[self.rows, self.cols] = x[self.n_free:]
        return coef, {lv: log_effects[i] for i, lv in enumerate(self.pb.levels) if np.any(log_effects[i])}

    def _scaled(self, delta: np.ndarray) -> np.ndarray:
        return self.pb.design * _factor(self.pb, self.rows, self.cols, delta)

    def objective(self, x: np.ndarray) -> float:
        pb, delta = self.pb, x[self.n_free:]
        scaled = self._scaled(delta)
        data = scaled[:, pb.free] @ x[:self.n_free] + scaled[:, ~pb.free] @ pb.fixed[~pb.free] - pb.weights
        prior = self.prior_rows @ x[:self.n_free] - self.prior_rhs
        return float(data @ data + prior @ prior + np.sum((self.ridge * delta) ** 2))

    def step(self, x: np.ndarray) -> np.ndarray:
        """The Gauss-Newton solution of the problem linearised at x (coefficients >= 0, effects bounded)."""
        pb, delta = self.pb, x[self.n_free:]
        scaled = self._scaled(delta)
        coef, _ = self.unpack(x)
        jac = (scaled * coef)[:, self.cols] * self.member              # d residual / d effect
        rhs = pb.weights - scaled[:, ~pb.free] @ pb.fixed[~pb.free] + jac @ delta
        a = np.block([[scaled[:, pb.free], jac],
                      [self.prior_rows, np.zeros((len(self.prior_rows), len(self.slots)))],
                      [np.zeros((len(self.slots), self.n_free)), np.diag(self.ridge)]])
        b = np.concatenate([rhs, self.prior_rhs, np.zeros(len(self.slots))])
        new = _nonnegative_lstsq(a, b, self.n_free)
        new[self.n_free:] = np.clip(new[self.n_free:], -MAX_EFFECT, MAX_EFFECT)
        return new


def _nonnegative_lstsq(a: np.ndarray, b: np.ndarray, n_nonnegative: int) -> np.ndarray:
    """Least squares with the first `n_nonnegative` unknowns >= 0: unknowns that come out negative are
    held at zero one at a time (most negative first) and the rest re-solved (columns scaled to unit norm)."""
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1.0
    a = a / scale
    gram = a.T @ a + NORMAL_JITTER * np.eye(a.shape[1])
    moment = a.T @ b
    keep = np.ones(a.shape[1], dtype=bool)
    while True:
        x = np.zeros(a.shape[1])
        x[keep] = np.linalg.solve(gram[np.ix_(keep, keep)], moment[keep])
        negative = np.where(keep[:n_nonnegative] & (x[:n_nonnegative] < 0))[0]
        if not len(negative):
            return x / scale
        keep[negative[np.argmin(x[negative])]] = False


def _factor(pb: _Problem, rows: np.ndarray, cols: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Per observation, the multiplicative factor of each coefficient from its group's level effects."""
    log_effects = np.zeros((len(pb.levels), N_COEF))
    log_effects[rows, cols] = delta
    return np.exp(pb.membership @ log_effects)[pb.group_of]


def _uncertainty(pb: _Problem, coef: np.ndarray, effects: dict[Level, np.ndarray]) -> tuple[float, np.ndarray]:
    """Relative residual scale of the fit and the covariance of the engine-wide coefficients."""
    log_effects = np.array([effects.get(lv, np.zeros(N_COEF)) for lv in pb.levels]).reshape(len(pb.levels), N_COEF)
    factor = np.exp(pb.membership @ log_effects)[pb.group_of] if pb.levels else np.ones_like(pb.design)
    scaled = pb.design * factor
    resid = scaled @ coef - pb.weights
    free = pb.free
    dof = max(len(resid) - int(free.sum()), 1)
    sigma = max(NOISE_FLOOR, math.sqrt(float(resid @ resid) / dof))
    prior_rows, _ = _prior_rows(free)
    a = np.vstack([scaled[:, free], prior_rows])
    cov = np.zeros((N_COEF, N_COEF))
    cov[np.ix_(free, free)] = sigma**2 * np.linalg.pinv(a.T @ a)
    return sigma, cov


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
        reserves.append((budget - resident_weight_bytes(t) - kv) / (t.tp * GIB))
    return max(0.0, float(np.median(reserves))) if reserves else 0.0


# The coefficients only MoE layers have. MoE profiles calibrate these alone, with every other coefficient held
# at the dense profiles' values: pooled into one fit, two vLLM MoE profiles (and their first-use kernel
# compilation, which no dense model pays) moved the shared weight-bandwidth coefficient past the datasheet and
# doubled the worst dense prediction error (validate --transfer, 2026-12-04).
MOE_COEFS = ("expert_tokens", "moe_step", "expert_graph", "moe_fixed", "untuned_pairs")
# Engines calibrated that way. TensorRT-LLM's published MoE tables (Llama 4, Qwen3-235B, gpt-oss) pool better
# with its dense ones (validate --transfer: worst GPU-out error 113% pooled, 186% in two stages).
SEPARATE_MOE_CALIBRATION = frozenset({"vllm"})


def calibrate_engine(data: list[GroupData], engine: str) -> Calibration:
    """For SEPARATE_MOE_CALIBRATION engines, dense profiles calibrate the engine (`_calibrate_dense`), then its
    MoE profiles the MoE coefficients (`_with_moe_coefficients`); other engines (or one with MoE profiles only)
    calibrate on all their profiles at once."""
    own = [d for d in data if d.key.engine == engine]
    if engine not in SEPARATE_MOE_CALIBRATION:
        return _calibrate_dense(own, data, engine)
    dense = [d for d in own if not d.target.model.is_moe]
    moe = [d for d in own if d.target.model.is_moe]
    calibration = _calibrate_dense(dense or own, data, engine)
    return _with_moe_coefficients(calibration, moe) if dense and moe else calibration


def _calibrate_dense(own: list[GroupData], data: list[GroupData], engine: str) -> Calibration:
    """`calibrate` with the TP coefficients borrowed from TP_DONOR when the engine has no TP > 1 data."""
    donor = TP_DONOR.get(engine)
    if donor and own and all(d.target.tp == 1 for d in own) and any(d.key.engine == donor for d in data):
        lent = calibrate(data, donor)
        fixed = {name: float(lent.coef[COEF_INDEX[name]]) for name in TP_COEFS}
        return calibrate(own, engine, fixed, borrowed=tuple(f"{n} from {donor}" for n in TP_COEFS))
    return calibrate(own, engine)


def _with_moe_coefficients(calibration: Calibration, moe: list[GroupData]) -> Calibration:
    """MOE_COEFS fitted to the MoE groups' relative residuals under `calibration` (non-negative least
    squares), every other coefficient and effect unchanged."""
    slots = [COEF_INDEX[name] for name in MOE_COEFS]
    rows, rhs = [], []
    for d in moe:
        coef, p = calibration.coef_for(d.target), physics_matrix(d.target)
        for o in d.obs:
            rows.append([o.weight * float(o.phi @ p[:, j]) / o.seconds for j in slots])
            rhs.append(o.weight * (1.0 - float(o.phi @ p @ coef) / o.seconds))
    a, b = np.array(rows), np.array(rhs)
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1.0
    from scipy.optimize import lsq_linear  # imported where used: see _solve_pooled

    x = lsq_linear(a / scale, b, bounds=(0.0, np.inf), method="bvls").x / scale
    resid = a @ x - b
    sigma = max(NOISE_FLOOR, math.sqrt(float(resid @ resid) / max(len(b) - len(slots), 1)))
    coef, cov = calibration.coef.copy(), calibration.cov.copy()
    coef[slots] = x
    cov[np.ix_(slots, slots)] = sigma**2 * np.linalg.pinv(a.T @ a)
    groups = [*calibration.groups, *(d.label for d in moe)]
    return replace(calibration, coef=coef, cov=cov, groups=tuple(groups))


# ---------------------------------------------------------------- transferred curves

def transfer_caps(calibration: Calibration, target: Target) -> Caps:
    """Batch caps of the target: engine defaults and KV tokens from memory left after the weights."""
    engine = target.engine
    memory = target.gpu.memory_gib * GIB * target.tp
    weights = resident_weight_bytes(target)
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
                DEFAULT_CUDA_GRAPH_MAX_BATCH.get(engine, 10**9), model_expert_share(target.model),
                engine in PREEMPTING_ENGINES, **window_caps(target.model, engine))


def _default_moe_config_note(target: Target) -> str:
    """Where vLLM decodes the target's experts on its default fused-MoE config, a note saying so (a tuned config
    for that shape, vLLM's benchmarks/kernels/benchmark_moe.py --tune, would make the option faster)."""
    if not on_default_moe_config(target):
        return ""
    experts, width = fused_moe_shape(target.model, target.tp)
    return f"; vLLM ships no tuned fused-MoE config for E={experts}, N={width} on {target.gpu.gpu}: predicted on its default config"


def transferred_curve(calibration: Calibration, target: Target, transfer_error: float,
                      engine_version: str = "transfer") -> Curve:
    """A Curve for `target` from `calibration`; `transfer_error` (relative, e.g. 0.12) is the measured
    worst transfer error, added to the interval so a 90% interval spans it.  Raises NoCurveError."""
    factor = calibration.coef_for(target) / np.where(calibration.coef > 0, calibration.coef, 1.0)
    p = physics_matrix(target) * factor  # theta = p @ the engine-wide coefficients
    theta = p @ calibration.coef
    transfer_sd = transfer_error / Z_90
    sigma = math.sqrt(calibration.sigma**2 + transfer_sd**2)
    fit = Fit(theta, p @ calibration.cov @ p.T, sigma, (False,) * N_PARAMS, 0)
    key = GroupKey(target.engine, engine_version, target.gpu.gpu, target.model.model, target.precision, target.tp)
    borrowed = f"; {', '.join(calibration.borrowed)}" if calibration.borrowed else ""
    note = (f"transferred from {len(calibration.groups)} {target.engine} profiles (model facts: "
            f"{target.model.source}; GPU: gpu_specs.csv {target.gpu.gpu}{borrowed}); interval widened by the "
            f"measured transfer error {transfer_error:.0%}{_default_moe_config_note(target)}")
    points = pd.DataFrame(columns=["mode", "input_len", "output_len", "batch_size", "concurrency",
                                   "output_tok_per_s", "provenance"])
    # has_latency False: TTFT does not transfer well (validate --transfer), so a transferred option's latency
    # basis is "unverified" and ranks behind measured latency on online routes (planner.planning.plan).
    return Curve(key, transfer_caps(calibration, target), fit, PROVENANCE, False, calibration.covered, points, note)


@dataclass(frozen=True)
class Transfer:
    """Calibrations per engine and the transfer errors they carry: what `plan` and `predict` use.

    errors: per engine, and per "engine/architecture" where `validate --transfer` measured one
    (`transfer_error` picks); architectures: per engine, those its calibrated profiles cover."""

    calibrations: dict[str, Calibration]
    errors: dict[str, float]
    versions: dict[str, str]
    architectures: dict[str, frozenset[str]] = field(default_factory=dict)

    def transfer_error(self, engine: str, model: ModelSpec) -> float:
        """The relative error a transferred curve's interval spans: the engine's, or more where the model's
        architecture measured more (leaving another model of it out), or, for an architecture no calibrated
        profile has, the worst error measured with an architecture left out."""
        arch = architecture(model)
        seen = arch in self.architectures.get(engine, frozenset({arch}))
        own = self.errors.get(f"{engine}/{arch}" if seen else f"{engine}/{UNSEEN_ARCHITECTURE}", 0.0)
        return max(self.errors[engine], own)

    def curve(self, engine: str, model: ModelSpec, gpu: GpuSpec, precision: str, tp: int) -> Curve:
        """A transferred curve; NoCurveError when the engine has no calibration or the model does not fit."""
        if engine not in self.calibrations:
            raise NoCurveError(f"no transfer calibration for engine {engine!r}; calibrated: "
                               f"{', '.join(sorted(self.calibrations)) or 'none'}")
        version = self.versions[engine]
        target = Target(engine, model, gpu, precision, tp, version.removesuffix(TRANSFER_TAG))
        return transferred_curve(self.calibrations[engine], target, self.transfer_error(engine, model), version)


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
    archs = {e: frozenset(architecture(d.target.model) for d in data if d.key.engine == e) for e in cals}
    return Transfer(cals, {**errors, **{e: errors.get(e, worst) for e in cals}}, versions, archs)


def _newest_version(profiles: pd.DataFrame, engine: str) -> str:
    """'<newest profiled version>+transfer': a PEP 440 local version, never equal to a profiled one."""
    versions = profiles.loc[profiles["engine"] == engine, "engine_version"].astype(str).unique()
    return f"{max(versions, key=version_order)}{TRANSFER_TAG}" if len(versions) else "transfer"

