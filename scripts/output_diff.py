"""Are the example's outputs the same at another commit?  (Issue 36: cutting the big rooms changes no output.)

    .venv/bin/python scripts/output_diff.py --base COMMIT [--rtol 1e-6] [--routes examples/routes-long.csv]

Checks COMMIT out into a temporary git worktree and runs there and here, with this checkout's Python:
`plan` on examples/routes.csv or `--routes` (a path relative to the repository; plan, options and minutes CSVs), `fleet` on the same routes, and `predict` in each
mode (an offline batch, a closed loop, an open loop on one replica, a fleet).  Tables are compared cell by cell
after renaming columns renamed since (fleetfacts.schema: each schema's `renamed`), numbers within `--rtol`;
columns (and predict's JSON keys) only one side has are listed, not failed (a new column is not a changed
output).  Prints each
difference; exit status 1 when any cell differs.  Not a test: it needs the commit's history.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fleetfacts.schema import SCHEMAS  # noqa: E402

PREDICT = ["predict", "--gpu", "h200", "--engine", "vllm", "--model", "llama-3.1-8b", "--precision", "fp8",
           "--input-len", "1000", "--output-len", "200", "--json"]
PREDICT_MODES = {"offline batch 64": ["--batch-size", "64"], "closed loop 16": ["--concurrency", "16"],
                 "open loop 10 req/s": ["--request-rate", "10"],
                 "fleet of 3 at 30 req/s": ["--request-rate", "30", "--replicas", "3"]}
TABLES = ("plan.csv", "options.csv", "minutes.csv", "fleet.csv")
DEFAULT_ROUTES = "examples/routes.csv"


def renames() -> dict[str, str]:
    return {old: new for schema in SCHEMAS.values() for old, new in schema.renamed}


def run_outputs(cwd: Path, out: Path, routes_file: str = DEFAULT_ROUTES) -> dict[str, object]:
    """Every output of one checkout: tables (DataFrames) and predict answers (dicts)."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(cwd)}

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "planner", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, check=True)
        return done.stdout

    routes = str(cwd / routes_file)
    cli("plan", "--routes", routes, "--out", str(out / "plan.csv"), "--options-out", str(out / "options.csv"),
        "--minutes-out", str(out / "minutes.csv"))
    cli("fleet", "--routes", routes, "--out", str(out / "fleet.csv"))
    found: dict[str, object] = {name: pd.read_csv(out / name, comment="#") for name in TABLES if (out / name).exists()}
    for mode, flags in PREDICT_MODES.items():
        found[f"predict, {mode}"] = json.loads(cli(*PREDICT, *flags))
    return found


def same(a: object, b: object, rtol: float) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        fa, fb = float(a), float(b)
        return (math.isnan(fa) and math.isnan(fb)) or math.isclose(fa, fb, rel_tol=rtol, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rtol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, rtol) for x, y in zip(a, b, strict=True))
    return a == b or (pd.isna(a) and pd.isna(b)) if not isinstance(a, dict | list) else False


def table_differences(name: str, before: pd.DataFrame, after: pd.DataFrame, rtol: float) -> tuple[list[str], list[str]]:
    """(differing cells, columns on one side only) of two tables, before renamed to today's column names."""
    before = before.rename(columns=renames())
    only = [f"{name}: column {c!r} only before" for c in before.columns if c not in after.columns]
    only += [f"{name}: column {c!r} only now" for c in after.columns if c not in before.columns]
    if len(before) != len(after):
        return [f"{name}: {len(before)} rows before, {len(after)} now"], only
    cells = []
    for column in (c for c in after.columns if c in before.columns):
        for row, (x, y) in enumerate(zip(before[column].tolist(), after[column].tolist(), strict=True)):
            if not same(x, y, rtol):
                cells.append(f"{name} row {row} {column}: {x!r} -> {y!r}")
    return cells, only


def differences(before: dict[str, object], after: dict[str, object], rtol: float) -> tuple[list[str], list[str]]:
    cells, only = [], []
    for name in sorted(set(before) | set(after)):
        if name not in before or name not in after:
            only.append(f"{name}: only {'now' if name in after else 'before'}")
        elif isinstance(after[name], pd.DataFrame):
            c, o = table_differences(name, before[name], after[name], rtol)  # type: ignore[arg-type]
            cells, only = cells + c, only + o
        else:
            b, a = before[name], after[name]
            assert isinstance(b, dict) and isinstance(a, dict)
            only += [f"{name}: key {k!r} only {'now' if k in a else 'before'}" for k in sorted(set(a) ^ set(b))]
            cells += [f"{name} {k}: {b[k]!r} -> {a[k]!r}" for k in sorted(set(a) & set(b)) if not same(b[k], a[k], rtol)]
    return cells, only


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the commit to compare with")
    ap.add_argument("--rtol", type=float, default=1e-6, help="relative tolerance of numbers (default 1e-6)")
    ap.add_argument("--routes", default=DEFAULT_ROUTES, help=f"routes file relative to the repository (default "
                    f"{DEFAULT_ROUTES})")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), args.base], cwd=REPO, check=True,
                       capture_output=True)
        try:
            before = run_outputs(base, Path(tmp) / "before", args.routes)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO, check=False)
        after = run_outputs(REPO, Path(tmp) / "after", args.routes)
    cells, only = differences(before, after, args.rtol)
    for line in only + cells:
        print(line)
    print(f"{len(cells)} differing values (rtol {args.rtol:g}); {len(only)} columns or outputs on one side only")
    return 1 if cells else 0


if __name__ == "__main__":
    sys.exit(main())
