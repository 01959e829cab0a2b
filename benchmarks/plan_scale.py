"""Benchmark: plan time (with the simulation check) for 10 / 100 / 1,000 routes on one core, on local
processes and on a local Ray cluster.

    .venv/bin/python benchmarks/plan_scale.py [--sizes 10,100,1000] [--workers N] [--executors one,processes,ray]
                                              [--no-simulate]

Routes are the example routes (examples/routes.csv) cycled with varied rates and job sizes
(benchmarks/replan.py).  The curves are fitted once, before the clock starts; each timing is one
`make_plan` call.  `ray` starts a one-node Ray cluster on this machine with --workers CPUs (its start-up
is timed separately) and needs pip install '.[ray]'.  Not a timed test: it prints, it does not assert;
it checks that every executor gives the same plan as one core.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from replan import twenty_routes  # noqa: E402

from planner.planning.catalog import load_inputs  # noqa: E402
from planner.planning.fanout import ProcessMap, RayMap  # noqa: E402
from planner.planning.plan import make_plan  # noqa: E402
from planner.planning.route_table import load_routes  # noqa: E402

EXECUTORS = ("one", "processes", "ray")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000", help="route counts, comma-separated")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes / Ray CPUs")
    parser.add_argument("--executors", default=",".join(EXECUTORS), help=f"subset of {','.join(EXECUTORS)}")
    parser.add_argument("--routes", default=str(REPO / "examples" / "routes.csv"))
    parser.add_argument("--no-simulate", action="store_true", help="analytical sizing only")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    catalog = load_inputs()
    print(f"fit curves: {time.perf_counter() - start:.1f} s (once, not in the timings below)", flush=True)
    base = load_routes(args.routes)
    executors = [e for e in args.executors.split(",") if e]
    for size in (int(s) for s in args.sizes.split(",")):
        routes = twenty_routes(base, size)
        reference = None
        for name in executors:
            with executor(name, args.workers) as mapper:
                start = time.perf_counter()
                result = make_plan(routes, catalog, check_by_simulation=not args.no_simulate,
                                   **({"map_routes": mapper} if mapper else {}))
                seconds = time.perf_counter() - start
            same = "" if reference is None else (" same plan as one core" if result.plan.equals(reference)
                                                 else " DIFFERENT plan from one core")
            reference = result.plan if reference is None else reference
            print(f"{size:5d} routes  {name:9s} ({1 if name == 'one' else args.workers} cpu): {seconds:8.1f} s "
                  f"({seconds / size * 1000:.0f} ms/route){same}", flush=True)
    return 0


class executor:
    """Context manager yielding the map function of an executor (None: the builtin map, one core)."""

    def __init__(self, name: str, workers: int):
        self.name, self.workers, self.ray = name, workers, None

    def __enter__(self):
        if self.name == "one":
            return None
        if self.name == "processes":
            return ProcessMap(self.workers)
        import ray  # noqa: PLC0415 - optional

        start = time.perf_counter()
        ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=False)
        print(f"      (local Ray cluster with {self.workers} CPUs started in {time.perf_counter() - start:.1f} s)",
              flush=True)
        self.ray = ray
        return RayMap("local")

    def __exit__(self, *exc) -> None:
        if self.ray is not None:
            self.ray.shutdown()


if __name__ == "__main__":
    pd.set_option("display.width", 160)
    sys.exit(main())
