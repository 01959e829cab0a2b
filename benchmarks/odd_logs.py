"""Benchmark: `plan` on odd request logs, in bounded time and memory (issue 47 item 4).

    .venv/bin/python benchmarks/odd_logs.py [--timeout-s S] [--skip-dense]

Generates, in a temporary folder, generic-format logs (docs/traffic.md: CSV `timestamp, prompt_tokens,
completion_tokens`, epoch seconds; one route, lengths uniform 50-800 prompt and 10-200 output tokens, seeded):
- year gap: 1 request, then 100 over a minute a year later, replayed at its own timestamps (peak_to_mean set to 1:
  `traffic` derives 87.6, which squeezes the year into 100 hours); it never finished planning (killed at 300 s);
- 1e6 requests: a million Poisson arrivals at 50 req/s (5.6 hours; one replica holds it);
- 1e6 requests, dense: a million at 200 req/s (1.4 hours; five replicas), unless --skip-dense.
Each log gets its route from `python -m planner traffic` (model llama-3.1-8b, p95 TTFT 500 ms, TPOT 50 ms), then
`python -m planner plan` runs on it as a subprocess (default workers, simulation check on, the fits cached by a
first untimed plan).  Printed per case: wall seconds, CPU seconds (user + system) and peak RSS of the plan
process, read by a runner process of its own (resource.getrusage(RUSAGE_CHILDREN): its one child), so the
figures are that plan's alone.  Targets: the million-request logs in under 60 s and 1 GiB.  Not a timed test: it
prints, it does not assert.  On a shared machine the wall time follows the load: the CPU time says what the
plan cost.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
YEAR_S = 365 * 86400.0
EPOCH_S = 1.7e9  # 2023-11-14: where the logs start
CASES = {"year gap": (None, 0), "1e6 requests": (50.0, 1_000_000), "1e6 requests, dense": (200.0, 1_000_000)}
TARGET_S, TARGET_GIB = 60.0, 1.0
TRAFFIC = ["--route", "odd", "--model", "llama-3.1-8b", "--ttft-slo-ms", "500", "--tpot-slo-ms", "50"]


def arrivals(rate_rps: float | None, n: int, gen: np.random.Generator) -> np.ndarray:
    """Seconds from the log's start: the year-gap shape (rate None) or n Poisson arrivals at rate_rps."""
    if rate_rps is None:
        return np.concatenate([[0.0], YEAR_S + np.sort(gen.uniform(0.0, 60.0, 100))])
    return np.cumsum(gen.exponential(1.0 / rate_rps, n))


def write_log(path: Path, t: np.ndarray, gen: np.random.Generator) -> None:
    prompt, output = gen.integers(50, 801, t.size), gen.integers(10, 201, t.size)
    with open(path, "w") as handle:
        handle.write("timestamp,prompt_tokens,completion_tokens\n")
        handle.writelines(f"{EPOCH_S + s:.3f},{p},{o}\n" for s, p, o in zip(t, prompt, output, strict=True))


def planner(*args: str, timeout_s: float | None = None) -> None:
    subprocess.run([sys.executable, "-m", "planner", *args], cwd=REPO, check=True, stdout=subprocess.DEVNULL,
                   timeout=timeout_s)


def run_one(routes: str, out: str, timeout_s: float) -> None:
    """The runner: one `plan` as its only child; prints its wall and CPU seconds, peak RSS and exit as JSON."""
    start = time.perf_counter()
    try:
        code = subprocess.run([sys.executable, "-m", "planner", "plan", "--routes", routes, "--out", out],
                              cwd=REPO, stdout=subprocess.DEVNULL, timeout=timeout_s).returncode
    except subprocess.TimeoutExpired:  # killed (and waited for)
        code = None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"wall_s": time.perf_counter() - start, "cpu_s": usage.ru_utime + usage.ru_stime,
                      "maxrss_kib": usage.ru_maxrss, "returncode": code}))


def measured(routes: Path, out: Path, timeout_s: float) -> dict:
    runner = [sys.executable, __file__, "--run", str(routes), str(out), "--timeout-s", str(timeout_s)]
    return json.loads(subprocess.run(runner, check=True, capture_output=True, text=True).stdout)


def line(name: str, result: dict, timeout_s: float) -> str:
    if result["returncode"] is None:
        return f"{name:22s} killed at {timeout_s:.0f} s (never finished)"
    status = "" if result["returncode"] == 0 else f"  (exit {result['returncode']})"
    target = f"  (targets {TARGET_S:.0f} s, {TARGET_GIB:g} GiB)" if name.startswith("1e6") else ""
    return (f"{name:22s} wall {result['wall_s']:6.1f} s  CPU {result['cpu_s']:6.1f} s  "
            f"peak RSS {result['maxrss_kib'] / 2**20:5.2f} GiB{target}{status}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout-s", type=float, default=300.0, help="kill a plan after this long (default 300)")
    ap.add_argument("--skip-dense", action="store_true", help="leave out the dense million-request log")
    ap.add_argument("--only", metavar="TEXT", help="run only the cases whose name holds TEXT")
    ap.add_argument("--run", nargs=2, metavar=("ROUTES", "OUT"), help=argparse.SUPPRESS)  # the runner
    args = ap.parse_args()
    if args.run:
        run_one(*args.run, args.timeout_s)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder, gen = Path(tmp), np.random.default_rng(0)
        os.environ["FLEETPLAN_CACHE_DIR"] = str(folder / "fit-cache")  # the plans' own, filled by the first
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs")
        warm = False
        for k, (name, (rate, n)) in enumerate(CASES.items()):
            if (args.skip_dense and name.endswith("dense")) or (args.only and args.only not in name):
                continue
            log, routes = folder / f"log{k}.csv", folder / f"routes{k}.csv"
            write_log(log, arrivals(rate, n, gen), gen)
            planner("traffic", "--log", str(log), *TRAFFIC, "--out", str(routes))
            if rate is None:
                pd.read_csv(routes).assign(peak_to_mean=1.0).to_csv(routes, index=False)
            if not warm:  # fits the curves into the cache: every timed plan starts warm
                planner("plan", "--routes", str(routes), "--out", str(folder / "warm.csv"), "--no-simulate")
                warm = True
            print(line(name, measured(routes, folder / f"plan{k}.csv", args.timeout_s), args.timeout_s), flush=True)


if __name__ == "__main__":
    main()
