"""What the plan's prefix cache costs (issue 49, item 3): plan wall time and the cache simulation's memory.

    .venv/bin/python benchmarks/prefix_plan_cost.py [--requests 1000000] [--repeats 3] [--conversations]

1. Plan wall time of the example route `chat-prefix` (examples/routes-prefix.csv, its Mooncake log) with its
   prefix data and without it (the same log with no hash_ids): `make_plan` with the simulation check, the
   catalog fitted once beforehand, the sizing memo cleared before each run; the median of --repeats runs.
   Issue target: with prefixes at most 2x the time without.
   With --conversations, the same on a SYNTHETIC conversation-sized log (issue 49's target names one: ~12k requests
   in an hour, ~12k-token prompts): multi-turn sessions, each turn's prompt its previous prompt plus the reply and
   new text (scripts/make_conversation_log.py), planned on the H100 8B bf16 with SLO TTFT 5 s / TPOT 100 ms.
2. Peak memory of the prefix-cache simulation on a synthetic Mooncake-style log of --requests requests (written
   in a temporary folder, seeded): read with its hash_ids, replayed on a fleet behind prefix-affinity (every
   replica keeps its LRU of blocks).  Measured in a child process as its peak resident set (ru_maxrss: the
   interpreter, the catalog and the log included, so an upper bound on the cache's own share).  Issue target:
   within 1 GiB.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from planner.cli import main as cli_main  # noqa: E402
from planner.latency import Fleet, predict  # noqa: E402
from planner.planning.catalog import load_inputs  # noqa: E402
from planner.planning.plan import make_plan  # noqa: E402
from planner.sizing import sizing  # noqa: E402
from planner.traffic.routes import Route  # noqa: E402
from planner.traffic.workload import route_load, route_log_load  # noqa: E402
from scripts.make_conversation_log import write_conversations  # noqa: E402

ROUTES = REPO / "examples" / "routes-prefix.csv"
ROUTE = "chat-prefix"
SEED = 49
BLOCK = 512  # tokens per hash id, as the Mooncake traces count them
# The synthetic log: a Zipf-popular system prompt of SYSTEM_BLOCKS blocks out of SYSTEM_PROMPTS, then 1-4 blocks of
# the request's own; arrivals Poisson at RATE_RPS, outputs 50-500 tokens (a chat mix like the example's).
SYSTEM_PROMPTS = 200
SYSTEM_BLOCKS = 3
ZIPF_A = 1.3
RATE_RPS = 40.0
REPLICAS = 24  # enough H100 replicas of the 8B model for RATE_RPS of these prompts (not overloaded)
GIB = 2**30
TARGET_RATIO = 2.0
TARGET_BYTES = GIB


def cold_copy(folder: Path) -> pd.DataFrame:
    """The example's chat-prefix route twice in `folder`: with its log, and with the log's rows minus hash_ids."""
    log = pd.read_json(REPO / "examples" / "traces" / "synthetic_chat_prefix.jsonl", lines=True)
    (folder / "warm.jsonl").write_text((REPO / "examples" / "traces" / "synthetic_chat_prefix.jsonl").read_text())
    pd.DataFrame({"timestamp": log["timestamp"] / 1000.0, "input_len": log["input_length"],
                  "output_len": log["output_length"]}).to_csv(folder / "cold.csv", index=False)
    routes = pd.read_csv(ROUTES)
    routes = routes[routes["name"] == ROUTE]
    warm, cold = routes.copy(), routes.copy()
    warm["log"], cold["log"] = str(folder / "warm.jsonl"), str(folder / "cold.csv")
    return pd.concat([warm.assign(name="warm"), cold.assign(name="cold")], ignore_index=True)


def conversation_routes(folder: Path) -> pd.DataFrame:
    """The conversation log's route twice (planner traffic's row): with its hash_ids, and without them."""
    log = folder / "conversations.jsonl"
    write_conversations(log)  # scripts/make_conversation_log.py's defaults: ~10k requests in an hour
    frame = pd.read_json(log, lines=True)
    pd.DataFrame({"timestamp": frame["timestamp"] / 1000.0, "input_len": frame["input_length"],
                  "output_len": frame["output_length"]}).to_csv(folder / "conversations-cold.csv", index=False)
    out = folder / "conversations-routes.csv"
    with contextlib.redirect_stdout(io.StringIO()):
        cli_main(["traffic", "--log", str(log), "--route", "conversations", "--model", "llama-3.1-8b", "--out",
                  str(out), "--ttft-slo-ms", "5000", "--tpot-slo-ms", "100"])
    warm = pd.read_csv(out).assign(engines="vllm", gpus="h100", precisions="bf16", log=str(log))
    return pd.concat([warm.assign(name="warm"), warm.assign(name="cold", log=str(folder / "conversations-cold.csv"))],
                     ignore_index=True)


def plan_seconds(routes: pd.DataFrame, catalog, repeats: int) -> tuple[float, object]:
    """Median wall seconds of make_plan on `routes` (memo cleared each time), and the last plan row."""
    times, row = [], None
    for _ in range(repeats):
        sizing.clear_cache()
        start = time.perf_counter()
        row = make_plan(routes, catalog, check_by_simulation=True).rows[0]
        times.append(time.perf_counter() - start)
    return statistics.median(times), row


def write_log(path: Path, n: int, seed: int = SEED) -> None:
    """A Mooncake-style JSONL log of n requests (timestamps in ms, hash_ids per 512-token block)."""
    gen = np.random.default_rng(seed)
    t = np.cumsum(gen.exponential(1000.0 / RATE_RPS, n)).astype(np.int64)
    system = np.minimum(gen.zipf(ZIPF_A, n), SYSTEM_PROMPTS) - 1
    own = gen.integers(1, 5, n)
    outputs = gen.integers(50, 501, n)
    fresh = SYSTEM_PROMPTS * SYSTEM_BLOCKS
    with path.open("w") as f:
        for k in range(n):
            ids = [int(system[k]) * SYSTEM_BLOCKS + j for j in range(SYSTEM_BLOCKS)]
            ids += range(fresh, fresh + int(own[k]))
            fresh += int(own[k])
            tokens = len(ids) * BLOCK - int(gen.integers(0, BLOCK))
            f.write(json.dumps({"timestamp": int(t[k]), "input_length": tokens, "output_length": int(outputs[k]),
                                "hash_ids": ids}) + "\n")


def memory_child(log: Path) -> None:
    """In a child process: replay `log` with its prefixes on REPLICAS H100 replicas behind prefix-affinity; print
    JSON with the peak RSS (bytes), seconds and the predicted hit rate."""
    catalog = load_inputs(models=["llama-3.1-8b"])
    curve = next(c for k, c in catalog.curves.items()
                 if (k.model, k.engine, k.gpu, k.precision, k.tp) == ("llama-3.1-8b", "vllm", "h100", "fp8", 1))
    route = Route.from_row({"name": "big", "model": "llama-3.1-8b", "traffic": "online", "rate_rps": RATE_RPS,
                            "log": str(log), "input_len_mean": 1.0, "output_len_mean": 1.0})
    start = time.perf_counter()
    load = route_load(route, *route_log_load(route))
    read = _peak_rss()
    held = _rss()
    report = predict(curve, Fleet(load, REPLICAS, "prefix-affinity"))
    print(json.dumps({"peak_rss_bytes": _peak_rss(), "read_peak_rss_bytes": read, "loaded_rss_bytes": held,
                      "seconds": time.perf_counter() - start, "hit_rate": report.prefix_hit_rate,
                      "requests": int(load.arrival_s.size)}))


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes


def _rss() -> int:
    """Resident bytes now (Linux /proc/self/statm: pages)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize()


def conversations(catalog, repeats: int) -> None:
    """Print the conversation-sized log's plan time with and without its prefix data, and the ratio."""
    with tempfile.TemporaryDirectory() as tmp:
        routes = conversation_routes(Path(tmp))
        frame = pd.read_json(Path(tmp) / "conversations.jsonl", lines=True)
        warm_s, warm = plan_seconds(routes[routes["name"] == "warm"], catalog, repeats)
        cold_s, cold = plan_seconds(routes[routes["name"] == "cold"], catalog, repeats)
    ratio = warm_s / cold_s
    print(f"# conversation-sized SYNTHETIC log: {len(frame):,} requests over "
          f"{(frame['timestamp'].max() - frame['timestamp'].min()) / 3.6e6:.2f} h, prompts mean "
          f"{frame['input_length'].mean():,.0f} tokens ({repeats} plan runs each, median)")
    print(f"plan with its prefixes: {warm_s:.2f} s ({warm.option} x{warm.replicas}, router {warm.router}, "
          f"prefix_hit_rate_pred {warm.prefix_hit_rate_pred:.4f}); cold: {cold_s:.2f} s ({cold.option} "
          f"x{cold.replicas})")
    print(f"ratio {ratio:.2f}x (target <= {TARGET_RATIO:g}x): {'met' if ratio <= TARGET_RATIO else 'MISSED'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--conversations", action="store_true", help="also time a conversation-sized log's plan")
    ap.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        memory_child(Path(args.memory_child))
        return 0
    catalog = load_inputs()
    if args.conversations:
        conversations(catalog, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        routes = cold_copy(Path(tmp))
        warm_s, warm = plan_seconds(routes[routes["name"] == "warm"], catalog, args.repeats)
        cold_s, cold = plan_seconds(routes[routes["name"] == "cold"], catalog, args.repeats)
        log = Path(tmp) / "big.jsonl"
        write_log(log, args.requests)
        child = subprocess.run([sys.executable, __file__, "--memory-child", str(log)], capture_output=True,
                               text=True, check=True)
    mem = json.loads(child.stdout.strip().splitlines()[-1])
    ratio = warm_s / cold_s
    print(f"# prefix_plan_cost ({args.repeats} plan runs each, median; {args.requests:,} requests for the memory)")
    print(f"plan of {ROUTE} with its prefixes: {warm_s:.2f} s ({warm.option} x{warm.replicas}, router "
          f"{warm.router}, prefix_hit_rate_pred {warm.prefix_hit_rate_pred:.4f})")
    print(f"plan of {ROUTE} cold (no hash_ids): {cold_s:.2f} s ({cold.option} x{cold.replicas})")
    print(f"ratio {ratio:.2f}x (target <= {TARGET_RATIO:g}x): {'met' if ratio <= TARGET_RATIO else 'MISSED'}")
    print(f"cache simulation of {mem['requests']:,} requests on {REPLICAS} replicas behind prefix-affinity: peak RSS "
          f"{mem['peak_rss_bytes'] / GIB:.2f} GiB (whole process; target <= 1 GiB: "
          f"{'met' if mem['peak_rss_bytes'] <= TARGET_BYTES else 'MISSED'}), {mem['seconds']:.0f} s, hit rate "
          f"{mem['hit_rate']:.4f}")
    print(f"  of which: peak while reading the log and building its block ids {mem['read_peak_rss_bytes'] / GIB:.2f} "
          f"GiB; resident once loaded {mem['loaded_rss_bytes'] / GIB:.2f} GiB; the simulation (caches and results) "
          f"added {(mem['peak_rss_bytes'] - mem['loaded_rss_bytes']) / GIB:.2f} GiB at most")
    return 0


if __name__ == "__main__":
    sys.exit(main())
