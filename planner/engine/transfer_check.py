"""How well the transfer predicts what it was not calibrated on: `python -m planner validate --transfer`.

Each experiment leaves something out of the calibration, predicts the left-out groups' observations
from architecture and datasheet alone, and reports the median and max relative error of output
tokens/s (and of mean TPOT / TTFT where the target measured latency), and the worst error of the runs whose
decode steps stayed inside the engine's CUDA graphs and of those that ran steps beyond them (vLLM: more than
512 sequences, where small-expert MoE steps are host-bound: planner.engine.curves.HOST_BOUND_NOTE):

- model: leave one model out (vLLM H200: Llama-3.1-8B <-> Qwen2.5-7B; TensorRT-LLM tables: each
  model from the others of the same engine version);
- gpu: each GPU's TensorRT-LLM tables from the other GPUs' tables of the same version;
- gpu-pair: H100 from the H200 tables alone, and the reverse, per version;
- tp: each TP size of the 70B tables from the other TP sizes (and the other models) of the same version;
- precision: each vLLM FP8 profile from BF16 only;
- precision model: each vLLM FP8 profile from BF16 and the other models' FP8 profiles.

`published_fits` compares the leave-one-point-out error of the published-table fits before
(planner.engine.curves: each table alone) and after anchoring on the pooled calibration (the transferred
curve, calibrated without the group, times one speed factor fitted to the group's other points).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from fleetfacts.specs import GpuSpec, ModelSpec, bundled_model_specs, kv_bytes_per_token, weight_bytes
from planner.engine.curves import PARAM_NAMES, Curve, NoCurveError, Observation, leave_one_out, version_order
from planner.engine.transfer import (
    UNSEEN_ARCHITECTURE,
    Calibration,
    GroupData,
    Transfer,
    build_transfer,
    calibrate_engine,
    group_data,
)
from planner.engine.transfer_physics import architecture

# GPU pairs predicted from each other's tables alone (source, target).
GPU_PAIRS = (("h200", "h100"), ("h100", "h200"))
# The 70B models whose tables span several TP sizes.
TP_MODELS = ("llama-3.1-70b", "llama-3.3-70b")
# Share of groups above this leave-one-out median error that the before/after comparison reports
# (the README quotes "one group in ten above 19%" for the table fits alone).
HIGH_ERROR_PCT = 19.0
# Joins the names of architectural twins in an experiment's target ("llama-3.1-70b+llama-3.3-70b").
ARCH_TWIN_SEPARATOR = "+"
EXPERIMENT_COLUMNS = ["experiment", "kind", "engine", "target", "calibrated_on", "n", "median_err_pct",
                      "max_err_pct", "tpot_median_err_pct", "ttft_median_err_pct", "architecture",
                      "inside_graphs_max_err_pct", "beyond_graphs_n", "beyond_graphs_max_err_pct"]
# The curves' feature counting sequences decoded beyond the largest CUDA graph (planner.engine.curves).
BEYOND_GRAPHS = PARAM_NAMES.index("g")
# Experiments that predict a model whose architecture the calibration has (another model of it), and the one
# that holds a whole architecture out (transfer_errors).
SEEN_ARCHITECTURE_KINDS = ("model", "moe model")
ARCHITECTURE_KIND = "architecture"


@dataclass(frozen=True)
class Experiment:
    """One leave-out: which groups are predicted, and which groups the calibration may use."""

    kind: str                                    # model | gpu | tp | precision
    engine: str
    target: str
    is_target: Callable[[GroupData], bool]
    may_calibrate: Callable[[GroupData], bool]   # applied to the engine's groups that are not targets
    calibrated_on: str
    architecture: str = ""                       # the targets' architecture, where the experiment is about one


def experiments(data: list[GroupData]) -> list[Experiment]:
    """Every experiment the data supports (see the module docstring)."""
    return (_vllm_model_experiments() + _vllm_precision_experiments(data) + _vllm_architecture_experiments(data)
            + _vllm_moe_model_experiments(data)
            + _trtllm_experiments(data, "model", _model_family(bundled_model_specs()))
            + _trtllm_experiments(data, "gpu", lambda d: d.key.gpu)
            + _gpu_pair_experiments(data) + _tp_experiments(data))


def _vllm_model_experiments() -> list[Experiment]:
    pairs = (("llama-3.1-8b", "qwen2.5-7b"), ("qwen2.5-7b", "llama-3.1-8b"))
    return [_vllm_model_experiment(source, target) for source, target in pairs]


def _vllm_model_experiment(source: str, target: str) -> Experiment:
    def is_target(d: GroupData) -> bool:
        return d.key.model == target and d.key.precision == "bf16" and _default(d)

    def may(d: GroupData) -> bool:
        return d.key.model == source
    return Experiment("model", "vllm", f"{target} bf16 on h200", is_target, may,
                      f"{source} (all its vLLM H200 profiles)", architecture(bundled_model_specs()[target]))


def _vllm_precision_experiments(data: list[GroupData]) -> list[Experiment]:
    """Each quantised model's default vLLM profile from the bf16 profiles alone ("precision": nothing of its
    kernels is seen), and from the bf16 ones plus the other models' profiles at its precision ("precision
    model": how a user's model is planned once one model of that precision was profiled)."""
    quantised = sorted({(d.key.model, d.key.precision) for d in data
                        if d.key.engine == "vllm" and d.key.precision != "bf16" and _default(d)})
    out = []
    for model, precision in quantised:
        def is_target(d: GroupData, m: str = model, p: str = precision) -> bool:
            return d.key.model == m and d.key.precision == p and _default(d)
        out.append(Experiment("precision", "vllm", f"{model} {precision} on h200", is_target,
                              lambda d: d.key.precision == "bf16", "bf16 profiles (every model)"))
        others = sorted({m for m, p in quantised if p == precision and m != model})
        if others:
            def may(d: GroupData, m: str = model, p: str = precision) -> bool:
                return d.key.model != m and d.key.precision in ("bf16", p)
            out.append(Experiment("precision model", "vllm", f"{model} {precision} on h200", is_target, may,
                                  f"bf16 profiles and {precision} of {', '.join(others)}"))
    return out


def _vllm_architecture_experiments(data: list[GroupData]) -> list[Experiment]:
    """Leave one architecture out: each family's bf16 H200 profiles predicted from the other families' bf16 ones."""
    specs = bundled_model_specs()
    family = {d.key.model: architecture(specs[d.key.model]) for d in data
              if d.key.engine == "vllm" and d.key.model in specs}
    out = []
    for arch in sorted(set(family.values())):
        models = sorted(m for m, f in family.items() if f == arch)
        others = sorted(m for m, f in family.items() if f != arch)
        if others:
            out.append(_architecture_experiment(arch, family, models, others))
    return out


def _vllm_moe_model_experiments(data: list[GroupData]) -> list[Experiment]:
    """Leave one MoE model out: its bf16 H200 profiles predicted from every other bf16 profile, the other MoE
    models' included (how a user's new MoE model is planned: from config.json and the pooled profiles)."""
    specs = bundled_model_specs()
    moes = sorted({d.key.model for d in data if d.key.engine == "vllm" and d.key.model in specs
                   and specs[d.key.model].is_moe})
    return [_model_out_experiment(model, [m for m in moes if m != model], _gpus_of(data, model))
            for model in moes if len(moes) > 1]


def _gpus_of(data: list[GroupData], model: str) -> str:
    """The GPUs a model's vLLM bf16 profiles were measured on, e.g. 'h100+h200'."""
    return "+".join(sorted({d.key.gpu for d in data if d.key.engine == "vllm" and d.key.model == model
                            and d.key.precision == "bf16"}))


def _model_out_experiment(model: str, other_moes: list[str], gpus: str) -> Experiment:
    def is_target(d: GroupData) -> bool:
        return d.key.model == model and d.key.precision == "bf16" and _default(d)

    def may(d: GroupData) -> bool:
        return d.key.model != model and d.key.precision == "bf16"
    return Experiment("moe model", "vllm", f"{model} bf16 on {gpus}", is_target, may,
                      f"bf16 profiles of every other model (MoE: {', '.join(other_moes)})", "moe")


def _architecture_experiment(arch: str, family: dict[str, str], models: list[str], others: list[str]) -> Experiment:
    def is_target(d: GroupData) -> bool:
        return family.get(d.key.model) == arch and d.key.precision == "bf16" and _default(d)

    def may(d: GroupData) -> bool:
        return family.get(d.key.model, arch) != arch and d.key.precision == "bf16"
    return Experiment(ARCHITECTURE_KIND, "vllm", f"{arch} ({', '.join(models)}) bf16 on h200", is_target, may,
                      f"bf16 profiles of {', '.join(others)}", arch)


def _default(d: GroupData) -> bool:
    return d.key.config == "default"


def _trtllm_experiments(data: list[GroupData], kind: str, attr: Callable[[GroupData], str]) -> list[Experiment]:
    """Each value of `attr` (a model, a GPU) per engine version, from every group without that value, in
    any version: the version's own efficiencies come from its other tables, the rest is pooled."""
    out = []
    for value in sorted({attr(d) for d in data if d.key.engine == "trtllm"}):
        versions = {d.key.engine_version for d in data if d.key.engine == "trtllm" and attr(d) == value}
        for version in sorted(versions, key=version_order):
            def is_target(d: GroupData, v: str = value, ver: str = version) -> bool:
                return attr(d) == v and d.key.engine_version == ver

            def may(d: GroupData, v: str = value) -> bool:
                return attr(d) != v
            out.append(Experiment(kind, "trtllm", f"{value} (trtllm {version})", is_target, may,
                                  f"other {kind}s, all trtllm versions"))
    return out


def _model_family(models: dict[str, ModelSpec]) -> Callable[[GroupData], str]:
    """A group's model, with architectural twins (the same config but the name, e.g. Llama 3.1 and 3.3
    70B) as one: leaving a model out leaves its twin out too."""
    def fingerprint(m: ModelSpec) -> tuple:
        return tuple(v for k, v in sorted(vars(m).items()) if k not in ("model", "source"))
    names: dict[tuple, list[str]] = {}
    for name in sorted(models):
        names.setdefault(fingerprint(models[name]), []).append(name)
    family = {name: ARCH_TWIN_SEPARATOR.join(group) for group in names.values() for name in group}
    return lambda d: family.get(d.key.model, d.key.model)


def _gpu_pair_experiments(data: list[GroupData]) -> list[Experiment]:
    """H100 from the H200 tables only (every version), and the reverse, per engine version of the target."""
    out = []
    for source, target in GPU_PAIRS:
        versions = sorted({d.key.engine_version for d in data if d.key.engine == "trtllm" and d.key.gpu == target}
                          & {d.key.engine_version for d in data if d.key.engine == "trtllm" and d.key.gpu == source},
                          key=version_order)
        for version in versions:
            def is_target(d: GroupData, g: str = target, ver: str = version) -> bool:
                return d.key.gpu == g and d.key.engine_version == ver

            def may(d: GroupData, g: str = source) -> bool:
                return d.key.gpu == g
            out.append(Experiment("gpu-pair", "trtllm", f"{target} from {source} (trtllm {version})", is_target, may,
                                  f"{source} tables only, all trtllm versions"))
    return out


def _tp_experiments(data: list[GroupData]) -> list[Experiment]:
    """Each TP size of the 70B tables per version, from every group but the 70B ones at that TP size."""
    out = []
    seen = sorted({(d.key.engine_version, d.key.tp) for d in data
                   if d.key.engine == "trtllm" and d.key.model in TP_MODELS}, key=lambda v: (version_order(v[0]), v[1]))
    for version, tp in seen:
        tps = {d.key.tp for d in data if d.key.engine == "trtllm" and d.key.model in TP_MODELS
               and d.key.engine_version == version}
        if len(tps) < 2:
            continue

        def is_target(d: GroupData, ver: str = version, t: int = tp) -> bool:
            return d.key.model in TP_MODELS and d.key.tp == t and d.key.engine_version == ver

        def may(d: GroupData, t: int = tp) -> bool:
            return not (d.key.model in TP_MODELS and d.key.tp == t)
        out.append(Experiment("tp", "trtllm", f"70B tp{tp} (trtllm {version})", is_target, may,
                              "70B at other TP sizes, other models, all versions"))
    return out


def split(data: list[GroupData], exp: Experiment) -> tuple[list[GroupData], list[GroupData]]:
    """(targets, calibration groups) of an experiment: the engine's groups it predicts, and every group it may
    calibrate on (other engines' too: vLLM borrows TensorRT-LLM's TP coefficients)."""
    targets = [d for d in data if d.key.engine == exp.engine and exp.is_target(d)]
    train = [d for d in data if not (d.key.engine == exp.engine and (exp.is_target(d) or not exp.may_calibrate(d)))]
    return targets, train


def run_experiment(data: list[GroupData], exp: Experiment) -> dict | None:
    """Calibrate without the targets, predict them; one result row (None when either side is empty)."""
    targets, train = split(data, exp)
    if not targets or not any(d.key.engine == exp.engine for d in train):
        return None
    try:
        calibration = calibrate_engine(train, exp.engine)
    except NoCurveError:
        return None
    errors = _errors(calibration, targets)
    if not errors["throughput"]:
        return None
    return {"experiment": f"{exp.kind}: {exp.target}", "kind": exp.kind, "engine": exp.engine, "target": exp.target,
            "calibrated_on": exp.calibrated_on, "n": len(errors["throughput"]),
            "median_err_pct": float(np.median(errors["throughput"])), "max_err_pct": float(max(errors["throughput"])),
            "tpot_median_err_pct": _median_or_nan(errors["tpot"]), "ttft_median_err_pct": _median_or_nan(errors["ttft"]),
            "architecture": exp.architecture, "inside_graphs_max_err_pct": _max_or_nan(errors["inside graphs"]),
            "beyond_graphs_n": len(errors["beyond graphs"]), "beyond_graphs_max_err_pct": _max_or_nan(errors["beyond graphs"])}


def _errors(calibration: Calibration, targets: list[GroupData]) -> dict[str, list[float]]:
    """Relative errors (%) per observation kind of the calibration's prediction of the targets; the throughput
    ones also split by whether the run decoded beyond the CUDA graphs ("inside graphs", "beyond graphs")."""
    out: dict[str, list[float]] = {"throughput": [], "tpot": [], "ttft": [], "inside graphs": [], "beyond graphs": []}
    for d in targets:
        theta = calibration.theta(d.target)
        for o in d.obs:
            predicted = float(o.phi @ theta)
            if predicted > 0:
                error = abs(o.seconds / predicted - 1.0) * 100
                out[o.kind].append(error)
                if o.kind == "throughput":
                    out["beyond graphs" if beyond_graphs(o) else "inside graphs"].append(error)
    return out


def beyond_graphs(observation: Observation) -> bool:
    """Whether the observed run decoded steps of more sequences than the engine's largest CUDA graph."""
    return bool(observation.phi[BEYOND_GRAPHS] > 0)


def _median_or_nan(values: list[float]) -> float:
    return float(np.median(values)) if values else math.nan


def _max_or_nan(values: list[float]) -> float:
    return float(max(values)) if values else math.nan


def validate_transfer(profiles: pd.DataFrame, data: list[GroupData] | None = None) -> pd.DataFrame:
    """Every experiment's median / max error, one row each (EXPERIMENT_COLUMNS)."""
    data = group_data(profiles) if data is None else data
    with one_blas_thread():
        rows = [row for exp in experiments(data) if (row := run_experiment(data, exp)) is not None]
    return pd.DataFrame(rows, columns=EXPERIMENT_COLUMNS)


def one_blas_thread() -> threadpool_limits:
    """The calibrations' solves are small (a few hundred columns at most): BLAS worker threads cost more than
    they save, and on a busy 2-core machine made a calibration 20x slower (258 s against 12 s)."""
    return threadpool_limits(limits=1, user_api="blas")


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """Per (engine, kind): median of the experiments' median errors, and the largest max error."""
    if table.empty:
        return pd.DataFrame(columns=["engine", "kind", "experiments", "median_err_pct", "max_err_pct"])
    grouped = table.groupby(["engine", "kind"], sort=True)
    return grouped.agg(experiments=("n", "size"), median_err_pct=("median_err_pct", "median"),
                       max_err_pct=("max_err_pct", "max")).reset_index()


def transfer_errors(table: pd.DataFrame) -> dict[str, float]:
    """Relative transfer errors an interval must span, from `validate_transfer`'s table: per engine the
    median over its experiments of each one's max error; per "engine/architecture" the same over the
    experiments that predict a model of that architecture from another of it (else the experiment that
    held the architecture out); per "engine/unseen" the worst architecture-out error."""
    if table.empty:
        return {}
    out = {engine: _median_max(group) for engine, group in table.groupby("engine")}
    for (engine, arch), group in table[table["architecture"].fillna("") != ""].groupby(["engine", "architecture"]):
        seen = group[group["kind"].isin(SEEN_ARCHITECTURE_KINDS)]
        out[f"{engine}/{arch}"] = _median_max(seen if len(seen) else group)
    for engine, group in table[table["kind"] == ARCHITECTURE_KIND].groupby("engine"):
        out[f"{engine}/{UNSEEN_ARCHITECTURE}"] = float(group["max_err_pct"].max()) / 100
    return out


def _median_max(experiments: pd.DataFrame) -> float:
    return float(experiments["max_err_pct"].median()) / 100


# ---------------------------------------------------------------- published-table fits, before / after

def published_fits(profiles: pd.DataFrame) -> pd.DataFrame:
    """Per published group with facts: leave-one-point-out median and max error alone and anchored."""
    before = leave_one_out(profiles)
    before = before[before["provenance"] == "published"].set_index("group")
    data = group_data(profiles)
    rows = []
    for d in data:
        if d.label not in before.index:
            continue
        errors = _anchored_loo(data, d)
        if errors:
            rows.append({"group": d.label, "n": len(errors),
                         "before_median_pct": float(before.loc[d.label, "median_err_pct"]),
                         "before_max_pct": float(before.loc[d.label, "max_err_pct"]),
                         "after_median_pct": float(np.median(errors)), "after_max_pct": float(max(errors))})
    return pd.DataFrame(rows, columns=["group", "n", "before_median_pct", "before_max_pct", "after_median_pct",
                                       "after_max_pct"])


def _anchored_loo(data: list[GroupData], group: GroupData) -> list[float]:
    """Leave each throughput point out: the pooled calibration without this group, scaled by one
    factor fitted to the group's other observations, predicts it."""
    try:
        calibration = calibrate_engine([d for d in data if d is not group], group.key.engine)
    except NoCurveError:
        return []
    theta = calibration.theta(group.target)
    ratio = np.array([float(o.phi @ theta) / o.seconds for o in group.obs])
    weight = np.array([o.weight for o in group.obs])
    errors = []
    for i, o in enumerate(group.obs):
        if o.kind != "throughput":
            continue
        keep = np.arange(len(group.obs)) != i
        u, w2 = ratio[keep], weight[keep] ** 2
        if not len(u) or float(w2 @ (u * u)) <= 0:
            continue
        scale = float(w2 @ u) / float(w2 @ (u * u))
        errors.append(abs(1.0 / (scale * ratio[i]) - 1.0) * 100)
    return errors


def published_summary(table: pd.DataFrame) -> dict[str, float]:
    """Median of the groups' median errors, share above HIGH_ERROR_PCT and the largest max, before and after."""
    if table.empty:
        return {}
    out = {"groups": float(len(table))}
    for side in ("before", "after"):
        med = table[f"{side}_median_pct"]
        out[f"{side}_median_pct"] = float(med.median())
        out[f"{side}_share_above_pct"] = float((med > HIGH_ERROR_PCT).mean() * 100)
        out[f"{side}_p90_median_pct"] = float(med.quantile(0.9))
        out[f"{side}_max_pct"] = float(table[f"{side}_max_pct"].max())
    return out


# ---------------------------------------------------------------- the calibrated transfer, for plan and predict

# What `plan` adds: "auto" transferred options only for a route whose model has no fitted curve,
# "all" for every (engine, GPU, precision, TP) no fitted curve covers, "off" none.
TRANSFER_MODES = ("off", "auto", "all")
# Precisions a transferred option is offered at, per engine (each only where the GPU has the tensor cores).
OFFERED_PRECISIONS = {"vllm": ("bf16", "fp8"), "trtllm": ("bf16", "fp8", "fp4")}
TP_SIZES = (1, 2, 4, 8)


# Transfers already built in this process, by a fingerprint of the profiles they were calibrated on: the
# calibration runs every leave-out experiment to widen its intervals (tens of seconds), and a process (the
# app, a test session, a campaign) asks for the same one many times.
_TRANSFERS: dict[int, Transfer] = {}
TRANSFER_MEMO_SIZE = 8


def transfer_for(profiles: pd.DataFrame) -> Transfer:
    """Calibrations on all of `profiles`, each engine's interval widened by its validated transfer error
    (memoised per process on the profiles' content)."""
    key = int(pd.util.hash_pandas_object(profiles.astype(str), index=False).sum())
    if key not in _TRANSFERS:
        data = group_data(profiles)
        if len(_TRANSFERS) >= TRANSFER_MEMO_SIZE:
            _TRANSFERS.pop(next(iter(_TRANSFERS)))
        errors = transfer_errors(validate_transfer(profiles, data))
        with one_blas_thread():
            _TRANSFERS[key] = build_transfer(profiles, errors, data)
    return _TRANSFERS[key]


def offered(engine: str, gpu: GpuSpec, precision: str) -> bool:
    """Whether a transferred option is offered at this precision on this GPU."""
    if precision not in OFFERED_PRECISIONS.get(engine, ()):
        return False
    if precision == "fp8":
        return gpu.fp8_dense_tflops is not None
    if precision == "fp4":
        return gpu.fp4_dense_tflops is not None
    return True


def transferred_candidates(transfer: Transfer, model: ModelSpec, gpus: list[GpuSpec],
                           admits: Callable[[str, str, str, int], bool]) -> list[Curve]:
    """Transferred curves for `model` on `gpus`, every engine, offered precision and TP that fits and
    that `admits(engine, gpu, precision, tp)`."""
    out = []
    for engine in sorted(transfer.calibrations):
        for gpu in gpus:
            for precision in OFFERED_PRECISIONS.get(engine, ()):
                if not offered(engine, gpu, precision):
                    continue
                out.extend(_fitting(transfer, engine, model, gpu, precision, admits))
    return out


def _fitting(transfer: Transfer, engine: str, model: ModelSpec, gpu: GpuSpec, precision: str,
             admits: Callable[[str, str, str, int], bool]) -> list[Curve]:
    curves = []
    for tp in TP_SIZES:
        if not admits(engine, gpu.gpu, precision, tp):
            continue
        try:
            curves.append(transfer.curve(engine, model, gpu, precision, tp))
        except NoCurveError:
            continue  # does not fit this TP size, or no interconnect figure for TP > 1
    return curves


def default_transfer_target(transfer: Transfer, engine: str, model: ModelSpec, gpu: GpuSpec,
                            precision: str | None, tp: int | None) -> Curve:
    """The transferred curve `predict` shows: the given precision (default bf16 for vLLM, else the GPU's
    narrowest offered) and TP (default the smallest that fits).  Raises NoCurveError."""
    if precision is None:
        narrowest = [p for p in OFFERED_PRECISIONS.get(engine, ("bf16",)) if offered(engine, gpu, p)]
        precision = "bf16" if engine == "vllm" or not narrowest else narrowest[-1]
    errors = []
    for size in (tp,) if tp else TP_SIZES:
        try:
            return transfer.curve(engine, model, gpu, precision, size)
        except NoCurveError as err:
            errors.append(str(err))
    raise NoCurveError(errors[-1] if errors else f"no transfer for {engine} on {gpu.gpu}")


# ---------------------------------------------------------------- text for the CLI

def format_validation(table: pd.DataFrame, published: pd.DataFrame) -> list[str]:
    """`validate --transfer`'s report: every experiment, a summary per engine and kind, published fits."""
    lines = ["transfer validation: output tokens/s error of curves predicted without the target's data",
             f"{'experiment':<58} {'calibrated on':<44} {'n':>4} {'median %':>9} {'max %':>7} {'TPOT %':>7} {'TTFT %':>7}"
             f" {'max % in / beyond CUDA graphs (n)'}"]
    for r in table.itertuples(index=False):
        lines.append(f"{r.engine + ' ' + r.experiment:<58.58} {r.calibrated_on:<44.44} {r.n:>4d} "
                     f"{r.median_err_pct:>9.1f} {r.max_err_pct:>7.1f} {_pct(r.tpot_median_err_pct):>7} "
                     f"{_pct(r.ttft_median_err_pct):>7} {_graphs(r)}")
    lines += ["", "summary (median of the experiments' medians; largest max):"]
    for r in summarise(table).itertuples(index=False):
        lines.append(f"  {r.engine:<7} {r.kind:<10} {r.experiments:>3d} experiments  median {r.median_err_pct:5.1f}%"
                     f"  max {r.max_err_pct:6.1f}%")
    errors = transfer_errors(table)
    lines.append("interval widening (median of the experiments' max errors; per architecture where measured): "
                 + ", ".join(f"{e} {v:.0%}" for e, v in sorted(errors.items())))
    return lines + [""] + _published_lines(published)


def _published_lines(published: pd.DataFrame) -> list[str]:
    s = published_summary(published)
    if not s:
        return ["published-table fits: no group with facts to compare"]
    return [f"published-table fits, leave-one-point-out over {s['groups']:.0f} groups (median of group medians / "
            f"90th percentile / share above {HIGH_ERROR_PCT:g}% / largest max):",
            f"  before (each table alone):              {s['before_median_pct']:5.1f}% / "
            f"{s['before_p90_median_pct']:5.1f}% / {s['before_share_above_pct']:4.1f}% / {s['before_max_pct']:6.1f}%",
            f"  after (pooled transfer x one factor):   {s['after_median_pct']:5.1f}% / "
            f"{s['after_p90_median_pct']:5.1f}% / {s['after_share_above_pct']:4.1f}% / {s['after_max_pct']:6.1f}%"]


def _graphs(r) -> str:
    """'12.3 / 45.6 (7)': worst error inside and beyond the CUDA graphs, and how many runs went beyond; blank
    when no run went beyond."""
    if not r.beyond_graphs_n:
        return ""
    return f"{_pct(r.inside_graphs_max_err_pct) or '-'} / {_pct(r.beyond_graphs_max_err_pct)} ({r.beyond_graphs_n})"


def _pct(value: float) -> str:
    return "" if value is None or not math.isfinite(value) else f"{value:.1f}"


def models_table(specs: dict[str, ModelSpec]) -> pd.DataFrame:
    """The bundled models' derived facts, one row each (for `python -m planner models`)."""
    rows = [{"model": m.model, "params_b": round(m.params_b, 2), "active_params_b": round(m.active_params_b, 2),
             "moe": f"{m.experts_per_token}/{m.num_experts}" if m.is_moe else "",
             "layers": m.num_layers, "kv_heads": m.num_kv_heads, "vocab": m.vocab_size,
             "tied": m.tied_embeddings, "context": m.context_window or "",
             "bf16_gib": round(weight_bytes(m, "bf16") / 2**30, 1), "fp8_gib": round(weight_bytes(m, "fp8") / 2**30, 1),
             "kv_kib_per_token_bf16": round(kv_bytes_per_token(m, "bf16") / 1024, 1),
             "window": f"{m.sliding_window} x{m.num_layers - (m.kv_layers or 0)}" if m.windowed_share else "",
             "source": m.source}
            for m in specs.values()]
    return pd.DataFrame(rows)
