"""Diagnostic (issue 24): fit each vLLM H200 profile with beyond-graph decode steps costing max(GPU step, host time).

Beyond vLLM's largest CUDA graph (512 sequences) every kernel is launched from the host; for small-expert MoE
models and FP8 the GPU was then 15-53% busy (profiles/measured/h200/RUNS.md). The planner's curves are linear
in their parameters and add a per-sequence term there (g). This script refits each default-config group with
one more parameter, the host time j of a step beyond the graphs, as

    seconds = phi @ theta + sum over beyond-graph decode steps of count * max(0, j - step_phi @ theta)

by non-linear least squares (scipy), and prints j and the leave-one-point-out error (median / max, %) of the
linear fit and of this one. A prototype: waves are taken without the preemption segments, and the planner
does not use it.

    PYTHONPATH=. python scripts/host_bound_fit.py [label filter]
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from fleetfacts.schema import PROFILE_GROUP
from planner.engine import curves as C

HOST_STARTS_S = (0.0, 0.005, 0.01, 0.02, 0.04, 0.08)  # starting points of j: the objective is piecewise smooth
MIN_OBSERVATIONS = 8


def eager_steps(point: pd.Series, caps: C.Caps) -> list[tuple[float, np.ndarray]]:
    """(count, step features) of an offline row's decode steps beyond the graphs, wave by wave."""
    n = C._offline_n(point)
    if point["mode"] != "offline" or n is None:
        return []
    i, o = float(point.input_len), float(point.output_len)
    cap = C.admitted_batch(caps, i, o)
    full, rest = divmod(int(n), cap)
    return [((o - 1) * waves, C._step_features(caps, w, i + o / 2, 0.0, 0.0))
            for w, waves in ((cap, full), (rest, 1 if rest else 0)) if waves and w > caps.cuda_graph_max_batch]


def predicted(theta: np.ndarray, host: float, obs: C.Observation, eager: list) -> float:
    return float(obs.phi @ theta) + sum(count * max(0.0, host - float(phi @ theta)) for count, phi in eager)


def fit(obs: list, eager: list, floors: C.Floors, full: bool) -> tuple[np.ndarray, float]:
    linear = C.fit_observations(obs, floors, full)
    if not any(eager):
        return linear.theta, 0.0
    free = np.array(linear.free)

    def residuals(x: np.ndarray) -> np.ndarray:
        theta = linear.theta.copy()
        theta[free] = x[:-1]
        return np.array([o.weight * (predicted(theta, x[-1], o, e) / o.seconds - 1)
                         for o, e in zip(obs, eager, strict=True)])
    best = None
    for start in HOST_STARTS_S:
        x0 = np.concatenate([linear.theta[free], [start]])
        result = least_squares(residuals, x0, bounds=(np.zeros(len(x0)), np.inf),
                               x_scale=np.maximum(np.abs(x0), 1e-9), max_nfev=400)
        best = result if best is None or result.cost < best.cost else best
    theta = linear.theta.copy()
    theta[free] = best.x[:-1]
    return theta, float(best.x[-1])


def main(label_filter: str = "") -> None:
    profiles = C.load_profiles()
    for values, group in profiles.groupby(list(PROFILE_GROUP), sort=True):
        key = C.GroupKey.from_values(values)
        if key.engine != "vllm" or key.gpu != "h200" or key.config != "default" or label_filter not in key.label():
            continue
        group = group.reset_index(drop=True)
        caps, floors = C._caps_for(group, key), C._roofline_floors(key)
        obs = C.observations(group, caps)
        if len(obs) < MIN_OBSERVATIONS:
            continue
        eager = [eager_steps(group.loc[o.row], C.row_caps(group.loc[o.row], caps)) if o.kind == "throughput" else []
                 for o in obs]
        full = C._is_rich(group, obs)
        _, host = fit(obs, eager, floors, full)
        linear_err = C._loo_errors(key, group) or [float("nan")]  # the planner's own leave-one-out (`validate`)
        host_err = []
        for held in sorted({o.row for o in obs if o.kind == "throughput"}):
            keep = [k for k, o in enumerate(obs) if o.row != held]
            test = next(k for k, o in enumerate(obs) if o.row == held and o.kind == "throughput")
            theta, j = fit([obs[k] for k in keep], [eager[k] for k in keep], floors, full)
            host_err.append(abs(obs[test].seconds / predicted(theta, j, obs[test], eager[test]) - 1) * 100)
        print(f"{key.model:22s} {key.precision:5s} host {host * 1000:6.1f} ms ({host * 1000 / max(_layers(key), 1):.2f}"
              f" per layer)  linear LOO {np.median(linear_err):5.1f} / {max(linear_err):5.1f}"
              f"   max(GPU, host) LOO {np.median(host_err):5.1f} / {max(host_err):5.1f}")


def _layers(key: C.GroupKey) -> int:
    model = C._model_spec(key.model)
    return model.num_layers if model else 0


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
