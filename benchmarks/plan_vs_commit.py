"""Benchmark: `plan` on the example against the same command at an earlier commit, as a user waits for it.

    .venv/bin/python benchmarks/plan_vs_commit.py --base COMMIT [--repeats N] [--routes CSV]

Checks the base commit out into a temporary git worktree, then runs `python -m planner plan --routes CSV` in
turn there and here (base, now, base, now, ...; one warm-up each first, so both read a filled fit cache), each a
fresh process with this checkout's Python.  Prints per side the median (min-max) of wall seconds and of CPU
seconds (the process and its children: `plan` forks a worker per route on Linux by default), and the median of
the now/base ratios pair by pair (a pair shares the machine's load of the moment).  Issue 34's budget: `plan`
at most 20% slower than before it (base: the commit before f84fe58).  Not a timed test: it prints, it does not
assert.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_plan(cwd: Path, routes: str, out: Path) -> tuple[float, float]:
    """(wall s, CPU s of the process and its children) of one `plan` run in `cwd`; raises if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "planner", "plan", "--routes", routes, "--out", str(out)], cwd=cwd,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": str(cwd)})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the commit to compare with")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--routes", default="examples/routes.csv", help="relative to each checkout")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), args.base], cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            sides = {"base": base, "now": REPO}
            times: dict[str, list[tuple[float, float]]] = {"base": [], "now": []}
            for name, cwd in sides.items():
                run_plan(cwd, args.routes, Path(tmp) / f"{name}.csv")  # warm-up: fills the fit cache
            for _ in range(args.repeats):
                for name, cwd in sides.items():
                    times[name].append(run_plan(cwd, args.routes, Path(tmp) / f"{name}.csv"))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO, check=False)
    for name in sides:
        print(f"{name:5s} wall {spread([w for w, _ in times[name]])}, cpu {spread([c for _, c in times[name]])}")
    for i, what in enumerate(("wall", "cpu")):
        ratios = [now[i] / base[i] for now, base in zip(times["now"], times["base"], strict=True)]
        print(f"now / base, {what}: median {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
