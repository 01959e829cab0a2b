"""Out-of-sample check: server latency rows that the fit never saw.

    .venv/bin/python benchmarks/server_check.py [--held-out DIR] [--group LABEL]

Fits one measured group (curve and server front end, planner.latency) on every
row EXCEPT those of the held-out profile folder (default: the session-5 open-loop
campaign, `vllm-llama-3.1-8b-bf16-tp1-server-openloop/`: four new shapes at rates
the session-4 server rows never had), then predicts each held-out open-loop row
by replaying its measured arrivals.  Prints measured and predicted TTFT p50/p99,
TPOT p50/p99 and throughput, and the median / max errors.  Not a test: it prints,
it does not assert.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fleetfacts.errors import InputError  # noqa: E402
from fleetfacts.schema import PROFILE_GROUP  # noqa: E402
from planner.engine.curves import GroupKey, fit_group, load_profiles  # noqa: E402
from planner.latency import METRICS, calibrate, predict_row, server_rows  # noqa: E402

DEFAULT_GROUP = "vllm 0.26.0 / h200 x1 / llama-3.1-8b bf16"
DEFAULT_HELD_OUT = REPO / "profiles" / "measured" / "h200" / "vllm-llama-3.1-8b-bf16-tp1-server-openloop"
# Columns that identify a row across the two loads (the held-out folder and the whole tree).
ROW_ID = ("mode", "input_len", "output_len", "request_rate", "arrival", "arrival_seed", "num_requests")


def compare(profiles: pd.DataFrame, held_out: pd.DataFrame, label: str) -> pd.DataFrame:
    groups = {GroupKey.from_values(v): g for v, g in profiles.groupby(list(PROFILE_GROUP))}
    matches = [key for key in groups if key.label() == label]
    if not matches:
        raise InputError(f"no profile group {label!r}; groups: {', '.join(sorted(k.label() for k in groups))}")
    key, group = matches[0], groups[matches[0]].reset_index(drop=True)
    ids = set(map(tuple, held_out[list(ROW_ID)].astype(str).to_numpy()))
    seen = ~group[list(ROW_ID)].astype(str).apply(tuple, axis=1).isin(ids)
    curve = fit_group(key, group[seen])
    if curve is None:
        raise InputError(f"{label}: too few rows left to fit")
    curve = calibrate(curve, group[seen])
    rows = []
    for _, row in server_rows(group[~seen]).iterrows():
        predicted = predict_row(curve, row)
        record = {"shape": f"{row['input_len']}/{row['output_len']}", "load": f"{row['request_rate']:g}/s {row['arrival']}"}
        for name, column in METRICS:
            record[name] = row[column]
            record[f"pred_{name}"] = predicted[name]
        rows.append(record)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--held-out", default=str(DEFAULT_HELD_OUT), help="profile folder whose rows the fit never sees")
    parser.add_argument("--group", default=DEFAULT_GROUP, help=f"group label (default: {DEFAULT_GROUP})")
    args = parser.parse_args(argv)
    try:
        table = compare(load_profiles(), load_profiles(args.held_out), args.group)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{args.group}: fitted without {Path(args.held_out).name}; its open-loop rows predicted (ms, tok/s)")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.round(1).to_string(index=False))
    for name, _ in METRICS:
        err = np.abs(table[f"pred_{name}"] / table[name] - 1)
        print(f"{name:10s} median error {100 * err.median():5.1f}%   max {100 * err.max():6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
