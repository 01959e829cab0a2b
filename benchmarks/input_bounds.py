"""Benchmark: how long the planner takes on inputs at or over its stated bounds (issue 14 item 14).

    .venv/bin/python benchmarks/input_bounds.py [--repeats N]

Times, each in this process, min / median / max over N runs (wall clock):
- a batch job of MAX_BATCH_REQUESTS requests (a 20,000-request sample) simulated on a million replicas
  and on a thousand (`predict(curve, Job(...))`, the bundled vLLM Llama-3.1-8B FP8 H200 curve);
- `python -m planner fleet` refusing MAX_FLEET_ROUTES + 1 routes (the CLI's main, the bundled profiles);
- the app's check of a 20,000-route upload: read, validated and refused (ui.scenario, no page).
Targets (the tests' former time bounds): batch job <= 30 s, fleet refusal <= 10 s, app upload <= 30 s, on
the 2-core machine. Not a timed test: it prints, it does not assert. The tests check the behaviour (memory
bound, refusal before any profile is read, the routes table unchanged).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fleetfacts.errors import InputError  # noqa: E402
from fleetfacts.schema import MAX_BATCH_REQUESTS, ROUTES  # noqa: E402
from planner.cli import main  # noqa: E402
from planner.engine.curves import Curve, find_curve, load_profiles  # noqa: E402
from planner.engine.physics_prior import fit_with_physics  # noqa: E402
from planner.latency import Job, predict  # noqa: E402
from planner.planning.fleet_size import MAX_FLEET_ROUTES  # noqa: E402
from ui import scenario  # noqa: E402

TARGETS_S = {"batch job at the bound": 30.0, "fleet over the route bound": 10.0, "app 20k-route upload": 30.0}
EXAMPLE_ROUTES = REPO / "examples" / "routes.csv"


def batch_job(curve: Curve) -> Callable[[], None]:
    gen = np.random.default_rng(0)
    sample = (gen.integers(100, 1000, 20_000), gen.integers(10, 300, 20_000))

    def run() -> None:
        for replicas in (1_000_000, 1_000):
            predict(curve, Job(*sample, replicas=replicas, total_requests=int(MAX_BATCH_REQUESTS)))
    return run


def fleet_refusal(folder: Path) -> Callable[[], None]:
    routes = pd.read_csv(EXAMPLE_ROUTES)
    online = routes[routes["traffic"] == "online"].iloc[[0]]
    many = pd.concat([online.assign(name=f"r{i}") for i in range(MAX_FLEET_ROUTES + 1)], ignore_index=True)
    path = folder / "many.csv"
    many.drop(columns=[c for c in ("log",) if c in many.columns]).to_csv(path, index=False)

    def run() -> None:
        with contextlib.redirect_stderr(io.StringIO()):  # its one-line refusal
            code = main(["fleet", "--routes", str(path), "--out", str(folder / "fleet.csv")])
        if code != 2:
            raise SystemExit("the fleet was not refused")
    return run


def app_upload() -> Callable[[], None]:
    text = EXAMPLE_ROUTES.read_bytes().splitlines()
    header, row = text[0] + b"\n", text[1]
    first = row.split(b",", 1)
    data = header + b"".join(f"route{i},".encode() + first[1] + b"\n" for i in range(20_000))

    def run() -> None:
        try:
            scenario.check_routes_count(scenario.read_csv_upload(data, ROUTES, "many.csv"), "many.csv")
        except InputError:
            return
        raise SystemExit("the upload was not refused")
    return run


def timed(run: Callable[[], None], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        out.append(time.perf_counter() - start)
    return out


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each case (at least 1)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    with tempfile.TemporaryDirectory() as tmp:
        curve = find_curve(fit_with_physics(load_profiles()), "vllm", "h200", "llama-3.1-8b", "fp8")
        cases = {"batch job at the bound": batch_job(curve), "fleet over the route bound": fleet_refusal(Path(tmp)),
                 "app 20k-route upload": app_upload()}
        for name, run in cases.items():
            seconds = timed(run, args.repeats)
            print(f"{name:28s} min {min(seconds):6.2f} s  median {statistics.median(seconds):6.2f} s  "
                  f"max {max(seconds):6.2f} s  (target <= {TARGETS_S[name]:g} s)")


if __name__ == "__main__":
    main_()
