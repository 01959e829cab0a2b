"""The worst server rows of a latency validation, with what the server's own /metrics say about them.

    python -m planner validate --latency --json > table.json
    .venv/bin/python benchmarks/latency_worst.py table.json [--top 10]

For each metric (TTFT p50/p99, TPOT p50/p99), the `--top` rows with the largest
leave-one-row-out error: shape, load, the rate the row's arrivals really drew,
how close to saturation it ran (offered output tokens/s over the engine's
saturated throughput at its shape and caps), measured and predicted values, and
the server's means from `server_metrics.jsonl` where the row has them: queue
(WAITING), prefill (scheduled to first token), the server's TTFT, and the
client's mean TTFT minus queue + prefill (what happens outside the engine's
scheduler: the API process, the step a request waits for, HTTP).  Then the
repeated points.  Not a test: it prints.  docs/latency-analysis.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fleetfacts.errors import InputError  # noqa: E402
from fleetfacts.schema import PROFILE_GROUP  # noqa: E402
from planner.engine.curves import GroupKey, fit_group, load_profiles  # noqa: E402
from planner.latency import calibrate, load_shares, server_rows  # noqa: E402

METRICS = ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99")
# Columns that identify a server row in the validation table, the profiles and server_metrics.jsonl.
KEY = ("group", "shape", "load", "requests")


def server_metrics(root: Path) -> pd.DataFrame:
    """One row per server_metrics.jsonl line under `root`: its point's key and the server's means (ms)."""
    rows = []
    for path in sorted(root.rglob("server_metrics.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            point, server = rec["point"], rec.get("server", {})
            client = rec.get("client", {}).get("ttft_ms") or []
            rows.append({"shape": f"{point['input_len']}/{point['output_len']}",
                         "load": f"{float(point['request_rate']):g}/s {point['arrival']}",
                         "requests": int(point["num_requests"]),
                         "queue_ms": server.get("queue", {}).get("mean_ms"),
                         "prefill_ms": server.get("prefill", {}).get("mean_ms"),
                         "server_ttft_ms": server.get("ttft", {}).get("mean_ms"),
                         "client_ttft_ms": float(np.mean(client)) if client else np.nan,
                         "max_running": server.get("gauges", {}).get("running", {}).get("max"),
                         "max_waiting": server.get("gauges", {}).get("waiting", {}).get("max")})
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame["outside_engine_ms"] = frame["client_ttft_ms"] - frame["queue_ms"] - frame["prefill_ms"]
    return frame


def with_loads(table: pd.DataFrame, profiles: pd.DataFrame) -> pd.DataFrame:
    """`table` with realized rate and load shares (from a curve fitted on everything) where it lacks them."""
    if {"realized_rps", "engine_load"} <= set(table.columns):
        return table
    extra = []
    for values, group in profiles.groupby(list(PROFILE_GROUP), sort=True):
        key = GroupKey.from_values(values)
        curve = fit_group(key, group)
        if curve is None:
            continue
        curve = calibrate(curve, group)
        for _, row in server_rows(group).iterrows():
            extra.append({"group": key.label(), "shape": f"{int(row['input_len'])}/{int(row['output_len'])}",
                          "load": f"{float(row['request_rate']):g}/s {row['arrival']}",
                          "requests": int(row["num_requests"]), **load_shares(curve, row)})
    return table.merge(pd.DataFrame(extra), on=list(KEY), how="left")


def worst(table: pd.DataFrame, metric: str, top: int) -> pd.DataFrame:
    columns = ["shape", "load", "requests", "realized_rps", "engine_load", f"{metric}_measured",
               f"{metric}_predicted", f"{metric}_error", "queue_ms", "prefill_ms", "server_ttft_ms",
               "client_ttft_ms", "outside_engine_ms", "max_running"]
    order = table[f"{metric}_error"].abs().sort_values(ascending=False).index[:top]
    return table.loc[order, [c for c in columns if c in table.columns]]


def repeats(table: pd.DataFrame) -> pd.DataFrame:
    """Points measured twice: Poisson and its `gamma:cv=1` repeat (statistically the same process)."""
    rate = table["load"].str.split("/s ").str[0]
    kind = table["load"].str.split("/s ").str[1]
    first = table[kind == "poisson"].assign(rate=rate)
    again = table[kind == "gamma:cv=1"].assign(rate=rate)
    pairs = first.merge(again, on=["group", "shape", "rate"], suffixes=("", "_repeat"))
    cols = []
    for name in ("realized_rps", *(f"{m}_measured" for m in METRICS)):
        cols += [name, f"{name}_repeat"]
    return pairs[["shape", "rate", *[c for c in cols if c in pairs.columns]]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", help="JSON from `python -m planner validate --latency --json`")
    parser.add_argument("--top", type=int, default=10, help="rows per metric (default 10)")
    parser.add_argument("--profiles", default=str(REPO / "profiles"), help="profiles directory (default: bundled)")
    args = parser.parse_args(argv)
    try:
        table = pd.DataFrame(json.loads(Path(args.table).read_text()))
        if table.empty:
            raise InputError(f"{args.table}: no rows")
        table = with_loads(table, load_profiles(args.profiles))
    except (InputError, OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    metrics = server_metrics(Path(args.profiles))
    if not metrics.empty:
        table = table.merge(metrics, on=["shape", "load", "requests"], how="left")
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        for metric in METRICS:
            print(f"\n{metric}: the {args.top} largest |errors| (ms; load = offered output tok/s over saturated)")
            print(worst(table, metric, args.top).round(3).to_string(index=False))
        print("\nrepeated points (first measurement, then the repeat)")
        print(repeats(table).round(2).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
