"""Benchmark: how long a user waits for one answer, cold (empty fit cache) and warm (cache filled).

    .venv/bin/python benchmarks/cli_speed.py [--repeats N] [--skip-app]

Times, as a user runs them (a fresh Python process each, wall clock):
- `python -m planner predict` for one profiled curve (README's first predict example), cold and warm;
- `python -m planner plan --routes examples/routes.csv` warm (its route logs replayed, simulation check on);
- the app's first page (`streamlit.testing` AppTest running app.py once), warm.
"Cold" is a new, empty FLEETPLAN_CACHE_DIR per run; "warm" reuses one filled by a first run. Targets
(issue 23): predict cold <= 1.5 s, warm <= 0.8 s; plan warm <= 3 s; app first page <= 10 s, on the 2-core
machine. Not a timed test: it prints min / median / max, it does not assert.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PREDICT = ["-m", "planner", "predict", "--gpu", "h200", "--engine", "vllm", "--model", "llama-3.1-8b",
           "--precision", "fp8", "--input-len", "1000", "--output-len", "1000", "--batch-size", "512", "--json"]
APP = "from streamlit.testing.v1 import AppTest; AppTest.from_file('app.py', default_timeout=300).run()"
TARGETS_S = {"predict cold": 1.5, "predict warm": 0.8, "plan warm": 3.0, "app first page warm": 10.0}


def timed(args: list[str], cache: str) -> float:
    """Seconds one `python ARGS` takes with FLEETPLAN_CACHE_DIR=cache; raises if it fails."""
    env = {**os.environ, "FLEETPLAN_CACHE_DIR": cache}
    env.pop("FLEETPLAN_NO_CACHE", None)
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def cold(args: list[str], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as cache:
            out.append(timed(args, cache))
    return out


def warm(args: list[str], repeats: int, cache: str) -> list[float]:
    timed(args, cache)  # fills the cache
    return [timed(args, cache) for _ in range(repeats)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-app", action="store_true", help="leave out the app's first page (the slowest)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
        plan = ["-m", "planner", "plan", "--routes", "examples/routes.csv", "--out", str(Path(out) / "plan.csv")]
        runs = {"predict cold": cold(PREDICT, args.repeats),
                "predict warm": warm(PREDICT, args.repeats, cache),
                "plan warm": warm(plan, args.repeats, cache)}
        if not args.skip_app:
            runs["app first page warm"] = warm(["-c", APP], args.repeats, cache)
    print(f"{'command':<22} {'min s':>7} {'median s':>9} {'max s':>7} {'target s':>9}  met")
    for name, seconds in runs.items():
        median = statistics.median(seconds)
        print(f"{name:<22} {min(seconds):7.2f} {median:9.2f} {max(seconds):7.2f} {TARGETS_S[name]:9.1f}  "
              f"{'yes' if median <= TARGETS_S[name] else 'no'}")
    print(f"({args.repeats} runs each, {os.cpu_count()} CPUs, python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
