"""Predicted against measured for the H200 round trip (issue 22): every `measure verify --record` run.

    .venv/bin/python benchmarks/roundtrip_check.py [RESULTS_DIR ...]

For each recorded run (benchmarks/roundtrip/results/*.jsonl) the requests verify sent are rebuilt exactly
(the same code, arguments and seed: synthetic arrivals, or the route's log stretched to the run's rate) and
replayed through the planner's latency door (planner.latency.predict, tier "replayed log") on the plan's
curve; beside it, the door's open-loop prediction at the run's nominal rate and the route's arrival CV (what
`plan` reports at 1x; routes without a log only: a route with a log is planned on its log).  Prints measured and predicted TTFT p95 and TPOT p95 (ms) and output tok/s, the
ratios, the server's prefix-cache hit rate and whether the run was usable (a run whose prompts the prefix
cache served is not).  Not a test: it prints, it does not assert.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from measure import verify  # noqa: E402
from measure.loadgen import RequestSpec, load_request_log  # noqa: E402
from planner.latency import Lengths, OpenLoop, Replay, predict  # noqa: E402
from planner.planning.catalog import load_inputs  # noqa: E402
from planner.traffic.routes import Route  # noqa: E402

RESULTS = REPO / "benchmarks" / "roundtrip" / "results"
ROUNDTRIP = REPO / "benchmarks" / "roundtrip"
# A run whose server served more than this share of prompt tokens from its prefix cache measured too little prefill.
MAX_PREFIX_HIT = 0.05


def _curve(catalog, plan_row: dict):
    for key, curve in catalog.curves.items():
        if (key.engine, key.gpu, key.model, key.precision, key.tp) == (
                plan_row["engine"], plan_row["gpu"], plan_row["model"], plan_row["precision"], int(plan_row["tp"])):
            return curve
    raise SystemExit(f"no curve for {plan_row['engine']} {plan_row['gpu']} {plan_row['precision']}")


def _requests(record: dict, route_row: dict, plan_row: dict) -> tuple:
    argv = record["argv"]
    share = verify.share_of(route_row, plan_row, int(argv["replicas"]), float(argv.get("scale") or 1.0))
    if record["arrival"].startswith("replay:"):
        if "share_method" not in record:  # the first H200 runs (2026-12-03): the whole log stretched to the share
            return _stretched(route_row, share, float(argv["duration"]), int(argv["max_requests"]))
        return verify.replayed_requests(route_row["log"], share, float(argv["duration"]), int(argv["max_requests"]),
                                        float(route_row["rate_rps"]), record["route"])
    return verify.synthetic_requests(route_row, share, float(argv["duration"]), int(argv["max_requests"]),
                                     int(argv["seed"]))


def _stretched(route_row: dict, share: verify.Share, duration_s: float, max_requests: int) -> tuple:
    """verify's log replay before round-robin shares: every request, times stretched to the share's rate."""
    specs = load_request_log(route_row["log"])
    stretch = float(route_row["rate_rps"]) / share.rate_rps
    kept = [RequestSpec(r.input_len, r.output_len, (r.send_at_s or 0.0) * stretch) for r in specs]
    return tuple(r for r in kept if (r.send_at_s or 0.0) <= duration_s)[:max_requests]


def _pct(values: list, q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


def rows(results: list[Path]) -> pd.DataFrame:
    catalog = load_inputs()
    out = []
    for path in results:
        for line in path.read_text().splitlines():
            record = json.loads(line)
            argv = record["argv"]
            precision = "bf16" if "bf16" in argv["plan"] else "fp8"
            plan_path, routes_path = ROUNDTRIP / f"plan-{precision}.csv", ROUNDTRIP / f"routes-{precision}.csv"
            plan_row = verify.plan_row(plan_path, record["route"])
            route_row = verify.route_row(routes_path, record["route"])
            curve = _curve(catalog, plan_row)
            route = Route.from_row(route_row)
            specs = _requests(record, route_row, plan_row)
            t = np.array([r.send_at_s for r in specs])
            replayed = predict(curve, Replay(t, tuple(r.input_len for r in specs), tuple(r.output_len for r in specs)))
            nominal = predict(curve, OpenLoop(record["rate_rps"], route.arrival_cv), Lengths.of_route(route))
            # (the door at the run's rate with the route's arrival CV and length distribution: the synthetic
            # stand-in for a log route, which the plan no longer uses for routes with a log)
            measured = record["measured"]
            server = record.get("server") or {}
            counters = server.get("counters", {})
            hit = counters.get("prefix_cache_hits", 0) / counters["prefix_cache_queries"] \
                if counters.get("prefix_cache_queries") else math.nan
            served = next((v["measured"] for v in record["verdicts"] if v["metric"] == "output_tok_per_s"), math.nan)
            out.append({
                "run": path.stem, "route": record["route"], "precision": precision,
                "x": argv.get("scale") or 1.0, "rate": record["rate_rps"], "n": len(measured["ttft_ms"]),
                "prefix_hit": hit, "usable": not hit > MAX_PREFIX_HIT,
                "ttft95": _pct(measured["ttft_ms"], 95), "ttft95_replay": replayed.value("ttft", 95),
                "ttft95_door": math.nan if route.log else nominal.value("ttft", 95),
                "tpot95": _pct(measured["tpot_ms"], 95), "tpot95_replay": replayed.value("tpot", 95),
                "tpot95_door": math.nan if route.log else nominal.value("tpot", 95),
                "tok_s": served, "tok_s_replay": replayed.output_tok_per_s,
            })
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="*", default=[str(RESULTS)], help="folders or .jsonl files")
    args = parser.parse_args(argv)
    files = sorted(f for p in map(Path, args.results) for f in (p.glob("*.jsonl") if p.is_dir() else [p]))
    table = rows(files)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table.round(3).to_string(index=False))
    usable = table[table["usable"]]
    for metric in ("ttft95", "tpot95"):
        for kind in ("replay", "door"):
            ratio = (usable[f"{metric}_{kind}"] / usable[metric]).dropna()
            within = float(np.mean(np.abs(ratio - 1) <= 0.30))
            print(f"{metric} {kind:6s}: predicted/measured median {ratio.median():.2f}, range {ratio.min():.2f}-"
                  f"{ratio.max():.2f}, within 30%: {within:.0%} of {len(ratio)} usable runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
