"""Out-of-sample check: offline batches predict server latency under load.

    .venv/bin/python benchmarks/server_check.py [--profiles DIR] [--group LABEL] [--seeds N]

Fits one measured group from its *offline* rows only, then predicts each row of
the same group measured through an OpenAI-compatible server (`mode` rate or
concurrency), which the fit never saw:
- rate rows: the planner's simulator (planner.simulate) replays Poisson or
  gamma arrivals at the row's rate with its fixed lengths and request count,
  averaged over several seeds;
- concurrency rows: the benchmark's closed loop, clients in step
  (planner.curves.closed_loop_features).
Prints measured and predicted throughput, TTFT and TPOT side by side.  Not a
test: it prints, it does not assert.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fleetfacts.arrivals import arrival_times  # noqa: E402
from fleetfacts.errors import InputError  # noqa: E402
from fleetfacts.schema import PROFILE_GROUP  # noqa: E402
from planner.curves import GroupKey, closed_loop_features, fit_group, load_profiles, row_caps  # noqa: E402
from planner.simulate import simulate  # noqa: E402

DEFAULT_GROUP = "vllm 0.26.0 / h200 x1 / llama-3.1-8b bf16"


def predict_rate_row(curve, row: pd.Series, seeds: int) -> dict[str, float]:
    n, i, o = int(row["num_requests"]), int(row["input_len"]), int(row["output_len"])
    # The same arrival process the load generator drew ('poisson' or 'gamma:cv=X'), over several seeds.
    draws = [arrival_times(n, float(row["request_rate"]), str(row["arrival"] or "poisson"), seed)
             for seed in range(seeds)]
    runs = [simulate(curve, times, [i] * n, [o] * n) for times in draws]
    return {
        "tok_s": float(np.mean([n * o / r.makespan_s for r in runs])),
        "ttft_p50": float(np.mean([r.percentile_ms("ttft", 50) for r in runs])),
        "ttft_mean": float(np.mean([np.mean(r.ttft_s) * 1000 for r in runs])),
        "tpot_mean": float(np.mean([np.nanmean(r.tpot_s) * 1000 for r in runs])),
    }


def predict_concurrency_row(curve, row: pd.Series) -> dict[str, float]:
    """The benchmark's closed loop: clients in step (planner.curves.closed_loop_features)."""
    n, i, o = int(row["num_requests"]), float(row["input_len"]), float(row["output_len"])
    ttft, tpot, run = (float(phi @ curve.fit.theta) for phi in
                       closed_loop_features(curve.caps, float(row["concurrency"]), n, i, o))
    return {"tok_s": n * o / run, "ttft_p50": float("nan"), "ttft_mean": ttft * 1000, "tpot_mean": tpot * 1000}


def compare(profiles: pd.DataFrame, label: str, seeds: int) -> pd.DataFrame:
    groups = {GroupKey.from_values(values): group for values, group in profiles.groupby(list(PROFILE_GROUP))}
    matches = [key for key in groups if key.label() == label]
    if not matches:
        raise InputError(f"no profile group {label!r}; groups: {', '.join(sorted(k.label() for k in groups))}")
    key, group = matches[0], groups[matches[0]]
    offline = group[group["mode"] == "offline"]
    served = group[group["mode"] != "offline"]
    curve = fit_group(key, offline)
    if curve is None or served.empty:
        raise InputError(f"{label}: needs offline rows to fit and server rows to check")
    rows = []
    for _, row in served.iterrows():
        # The server's own caps (its token budget and KV cache differ from the offline engine's).
        served_curve = dataclasses.replace(curve, caps=row_caps(row, curve.caps))
        pred = (predict_rate_row(served_curve, row, seeds) if row["mode"] == "rate"
                else predict_concurrency_row(served_curve, row))
        load = f"{row['request_rate']:g}/s {row['arrival']}" if row["mode"] == "rate" else f"c={row['concurrency']:g}"
        rows.append({"shape": f"{row['input_len']}/{row['output_len']}", "load": load,
                     "tok_s": row["output_tok_per_s"], "pred_tok_s": pred["tok_s"],
                     "ttft_p50": row["ttft_p50_ms"], "pred_ttft_p50": pred["ttft_p50"],
                     "ttft_mean": row["ttft_mean_ms"], "pred_ttft_mean": pred["ttft_mean"],
                     "tpot_mean": row["tpot_mean_ms"], "pred_tpot_mean": pred["tpot_mean"]})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", help="profiles directory (default: bundled profiles/)")
    parser.add_argument("--group", default=DEFAULT_GROUP, help=f"group label (default: {DEFAULT_GROUP})")
    parser.add_argument("--seeds", type=int, default=5, help="arrival seeds averaged per rate row (default: 5)")
    args = parser.parse_args(argv)
    try:
        table = compare(load_profiles(args.profiles), args.group, args.seeds)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{args.group}: fitted on offline rows only; server rows predicted (ms, output tok/s)")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.round(1).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
