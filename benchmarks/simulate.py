"""Benchmark: simulated requests per second on one core, and the time to simulate the bundled one-hour trace.

    .venv/bin/python benchmarks/simulate.py [--requests N] [--repeats N]

The curve is fitted to the bundled measured profile of vLLM on an H200 with
Llama-3.1-8B bf16 (profiles/measured/h200/).  Throughput workloads: Poisson
arrivals with lengths resampled from the bundled Azure code trace, on fleets
of 1, 4 and 16 replicas behind join-shortest-queue and round robin, each at
the same rate per replica.  Trace: examples/traces/azure_llm_2023_code.csv
(8,819 requests; Azure Public Dataset, CC-BY, Patel et al., "Splitwise",
ISCA 2024) replayed on 2 replicas.  Targets: >= 200k simulated requests/s,
<= 2 s for the trace.  Not a timed test: it prints, it does not assert.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from planner.engine.curves import find_curve, load_profiles  # noqa: E402
from planner.engine.physics_prior import fit_with_physics  # noqa: E402
from planner.latency import simulate  # noqa: E402
from planner.traffic import logs as traffic  # noqa: E402
from planner.traffic import workload  # noqa: E402

TRACE = REPO / "examples" / "traces" / "azure_llm_2023_code.csv"
TARGET_REQ_PER_S = 200_000
TARGET_TRACE_S = 2.0
# Requests/s offered per replica in the throughput workloads: keeps an H200 8B replica busy, not overloaded.
RATE_PER_REPLICA = 6.0
FLEETS = (1, 4, 16)
TRACE_REPLICAS = 2


def best_of(repeats: int, fn) -> tuple[float, object]:
    """Fastest wall time of `repeats` calls (seconds) and the last result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000, help="requests per throughput workload")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (best is reported)")
    args = parser.parse_args()
    curve = find_curve(fit_with_physics(load_profiles()), "vllm", "h200", "llama-3.1-8b", "bf16", 1)
    log = traffic.read_log(TRACE)
    print(f"curve: {curve.key.label()}; lengths from {TRACE.name}")
    gen = np.random.default_rng(0)
    pick = gen.integers(0, len(log.requests), args.requests)
    inp = log.requests["input_len"].to_numpy()[pick]
    out = np.maximum(1, log.requests["output_len"].to_numpy()[pick])
    rates = []
    for replicas in FLEETS:
        t = workload.poisson(RATE_PER_REPLICA * replicas, args.requests, seed=replicas)
        for router in simulate.ROUTERS:
            seconds, result = best_of(args.repeats, lambda t=t, r=replicas, k=router: simulate.simulate(curve, t, inp, out, r, k))
            busy = result.busy_s.sum() / (result.makespan_s * replicas)
            rates.append(args.requests / seconds)
            print(f"  {replicas:3d} replicas {router:12s}: {args.requests / seconds:10,.0f} simulated requests/s "
                  f"(busy {busy:.0%}, p95 TTFT {result.percentile_ms('ttft', 95):.0f} ms)")
    median = float(np.median(rates))
    print(f"simulated requests/s on one core: median {median:,.0f}, min {min(rates):,.0f} "
          f"(target >= {TARGET_REQ_PER_S:,}) {'ok' if median >= TARGET_REQ_PER_S else 'BELOW TARGET'}")
    req = log.requests
    seconds, result = best_of(args.repeats, lambda: simulate.simulate(
        curve, req["t_s"].to_numpy(), req["input_len"].to_numpy(), np.maximum(1, req["output_len"].to_numpy()),
        TRACE_REPLICAS, "jsq"))
    read_s, _ = best_of(args.repeats, lambda: traffic.read_log(TRACE))
    print(f"bundled one-hour trace ({result.n} requests, {TRACE_REPLICAS} replicas, jsq): simulated in "
          f"{seconds:.3f} s (+ {read_s:.3f} s to read the log) (target <= {TARGET_TRACE_S:g} s) "
          f"{'ok' if seconds + read_s <= TARGET_TRACE_S else 'OVER TARGET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
