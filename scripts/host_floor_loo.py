"""Diagnostic (issue 38): would a host floor per sequence and decode step, one per machine, fix the transfer's
worst vLLM points? A prototype on top of `validate --transfer`'s leave-outs; the planner does not use it.

With vLLM's async scheduling the host prepares step n+1 while the GPU runs step n, so a decode step of b
sequences takes max(GPU time, host time), and the host's share grows with b (scheduling, input preparation,
output processing per sequence). Inside the CUDA graphs Granite-3.1-3B-A800M and OLMoE-1B-7B (32 and 16 layers)
took the same time per sequence-step at batch 512 on the H200 machine, and more than on the H100 machine whose GPU
is slower (scripts/large_batch_steps.py): a floor of the machine, not of the model.

For each vLLM leave-out experiment this script calibrates the transfer as `validate --transfer` does (linear, no
floor), then fits one floor h per machine (the GPU kind the profiles ran on) to the *training* groups' offline
runs on that machine, each decode step costing max(step predicted, h * sequences), and predicts the left-out
targets with it. Prints the floor and the median / worst error without and with it, and the worst inside and
beyond the CUDA graphs. Prototype limits: the linear coefficients are not refitted with the floor, preemption
segments are taken as full waves, and rows other than offline runs keep their linear prediction.

    .venv/bin/python scripts/host_floor_loo.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleetfacts.schema import PROFILE_GROUP  # noqa: E402
from planner.engine import curves as C  # noqa: E402
from planner.engine.transfer import GroupData, calibrate_engine, group_data  # noqa: E402
from planner.engine.transfer_check import beyond_graphs, experiments, one_blas_thread, split  # noqa: E402

FLOORS_S = np.arange(0.0, 80e-6, 0.5e-6)   # per sequence and step: 0 to 80 us
KINDS = ("model", "architecture", "moe model")
Wave = tuple[float, float, np.ndarray]      # (decode steps, sequences, one step's features)


def decode_waves(rows, d: GroupData, o: C.Observation) -> list[Wave]:
    """The decode steps of an offline run, wave by wave; none for other observations."""
    p = rows.loc[o.row]
    if p["mode"] != "offline" or o.kind != "throughput":
        return []
    caps = C.row_caps(p, d.caps)
    i, out = float(p.input_len), float(p.output_len)
    cap = C.admitted_batch(caps, i, out)
    full, rest = divmod(int(C._offline_n(p)), cap)
    return [((out - 1) * waves, float(w), C._step_features(caps, w, i + out / 2, 0.0, 0.0))
            for w, waves in ((cap, full), (rest, 1 if rest else 0)) if waves]


def predicted_s(theta: np.ndarray, floor: float, o: C.Observation, waves: list[Wave]) -> float:
    return float(o.phi @ theta) + sum(steps * max(0.0, floor * w - float(phi @ theta)) for steps, w, phi in waves)


def fitted_floor(cases: list[tuple[np.ndarray, C.Observation, list[Wave]]]) -> float:
    """The floor of FLOORS_S with the least squared relative error over `cases` (0 without any)."""
    if not cases:
        return 0.0
    costs = [sum((predicted_s(theta, h, o, w) / o.seconds - 1) ** 2 for theta, o, w in cases) for h in FLOORS_S]
    return float(FLOORS_S[int(np.argmin(costs))])


def main() -> None:
    profiles = C.load_profiles()
    data = group_data(profiles)
    rows = {C.GroupKey.from_values(v).label(): g.reset_index(drop=True)
            for v, g in profiles.groupby(list(PROFILE_GROUP), sort=True)}
    with one_blas_thread():
        for exp in experiments(data):
            if exp.engine != "vllm" or exp.kind not in KINDS:
                continue
            targets, train = split(data, exp)
            cal = calibrate_engine(train, "vllm")
            floors = {gpu: fitted_floor([(cal.theta(d.target), o, decode_waves(rows[d.label], d, o))
                                         for d in train if d.key.engine == "vllm" and d.key.gpu == gpu
                                         for o in d.obs if o.kind == "throughput"])
                      for gpu in sorted({d.key.gpu for d in targets})}
            linear, floored, inside, beyond = [], [], [], []
            for d in targets:
                theta = cal.theta(d.target)
                for o in (o for o in d.obs if o.kind == "throughput"):
                    linear.append(abs(o.seconds / float(o.phi @ theta) - 1) * 100)
                    error = abs(o.seconds / predicted_s(theta, floors[d.key.gpu], o,
                                                        decode_waves(rows[d.label], d, o)) - 1) * 100
                    floored.append(error)
                    (beyond if beyond_graphs(o) else inside).append(error)
            floor_text = ", ".join(f"{gpu} {h * 1e6:.1f} us" for gpu, h in floors.items())
            print(f"{exp.kind}: {exp.target[:48]:48s} floor {floor_text:22s} linear {np.median(linear):5.1f} / "
                  f"{max(linear):5.1f}  with floor {np.median(floored):5.1f} / {max(floored):5.1f}  (worst inside "
                  f"{max(inside, default=0):5.1f}, beyond {max(beyond, default=0):5.1f})")


if __name__ == "__main__":
    main()
