"""Benchmark: time to fit all bundled profiles from scratch, and to re-plan 20 routes with fits cached.

    .venv/bin/python benchmarks/replan.py [--profiles DIR] [--prices F] [--ops F] [--routes F] [--repeats N]

The 20 routes are the example routes (examples/routes.csv) replicated with
varied rates (online) and job sizes (batch).  Target: re-plan <= 100 ms on one
core.  Not a timed test: it prints, it does not assert.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fleetfacts.errors import InputError  # noqa: E402
from planner.engine.curves import load_profiles  # noqa: E402
from planner.engine.physics_prior import fit_with_physics  # noqa: E402
from planner.planning.catalog import Catalog, load_inputs  # noqa: E402
from planner.planning.plan import make_plan  # noqa: E402
from planner.planning.route_table import load_routes  # noqa: E402
from planner.sizing.assumptions import Assumptions  # noqa: E402

ROUTES = 20
# Rate / job-size multipliers cycled over the replicated routes (spread over 1/4x .. 4x).
FACTORS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
TARGET_MS = 100.0


def twenty_routes(routes: pd.DataFrame, n: int = ROUTES) -> pd.DataFrame:
    """The routes cycled to `n` rows (default ROUTES), each with a unique name and a scaled load."""
    rows = []
    for i in range(n):
        row = routes.iloc[i % len(routes)].copy()
        factor = FACTORS[i % len(FACTORS)]
        row["name"] = f"{row['name']}-{i}"
        if row["traffic"] == "online":
            row["rate_rps"] = row["rate_rps"] * factor
        else:
            row["num_requests"] = max(1, int(row["num_requests"] * factor))
        rows.append(row)
    return pd.DataFrame(rows).reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", help="profiles directory (default: bundled profiles/)")
    parser.add_argument("--prices", help="prices CSV (default: bundled)")
    parser.add_argument("--ops", help="engine-ops CSV (default: bundled)")
    parser.add_argument("--routes", default=str(REPO / "examples" / "routes.csv"))
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    profiles = load_profiles(args.profiles)
    start = time.perf_counter()
    curves = fit_with_physics(profiles)
    fit_s = time.perf_counter() - start
    print(f"fit {len(curves)} curves from {len(profiles)} profile rows from scratch: {fit_s * 1000:.0f} ms")
    loaded = load_inputs(args.profiles, args.prices, args.ops)
    inputs = Catalog(curves, loaded.prices_df, loaded.ops_df, profiles)
    routes = twenty_routes(load_routes(args.routes))
    assumptions = Assumptions()
    start = time.perf_counter()
    result = make_plan(routes, inputs, assumptions)
    first_ms = (time.perf_counter() - start) * 1000
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        make_plan(routes, inputs, assumptions)
        times.append((time.perf_counter() - start) * 1000)
    median = statistics.median(times)
    print(f"plan {len(routes)} routes, {len(result.options)} options: first {first_ms:.0f} ms (predictions not yet "
          f"memoised), re-plan median {median:.1f} ms over {args.repeats} runs "
          f"(target <= {TARGET_MS:.0f} ms: {'met' if median <= TARGET_MS else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
