"""Pool one fleet window's replays, one per replica, and put them beside the plan's worst-window columns.

    .venv/bin/python scripts/gpu/pooled_window.py RECORDS.jsonl --plan PLAN.csv --route ROUTE [--percentile 95]

RECORDS.jsonl: `measure verify --assigned replica-K.csv --window at:START:SECONDS --record RECORDS.jsonl`, one line
per replica (`scripts/gpu/pooled_minute.sh` runs them on one server); the files from `planner simulate
--replica-out 'replica-{replica}.csv' --replica-window worst`, which prints START and SECONDS.  The plan's
`ttft_worst_window_ms` / `tpot_worst_window_ms` are the fleet simulation's figures for that window.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fleetfacts.errors import InputError  # noqa: E402
from measure.verify import parse_window, plan_row, pooled_window  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", type=Path)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--route", required=True)
    ap.add_argument("--percentile", type=float, default=95.0)
    args = ap.parse_args()
    try:
        return _compare(args)
    except (InputError, OSError, ValueError, KeyError, TypeError) as err:
        print(f"error: {args.records}: {err}", file=sys.stderr)
        return 2


def _compare(args: argparse.Namespace) -> int:
    records = [json.loads(line) for line in args.records.read_text().splitlines() if line.strip()]
    windows = {parse_window(r["argv"]["window"]) for r in records}
    if len(windows) != 1 or None in windows:
        print(f"error: the records replay different windows ({sorted(map(str, windows))})", file=sys.stderr)
        return 2
    pooled = pooled_window(records, windows.pop(), args.percentile)
    plan = plan_row(args.plan, args.route)
    for metric in ("ttft", "tpot"):
        planned = float(plan[f"{metric}_worst_window_ms"])
        print(f"{metric} p{args.percentile:g} ms over {pooled['requests']:.0f} requests of {len(records)} replicas: "
              f"measured {pooled[f'{metric}_ms']:.1f}, plan's worst window {planned:.1f} "
              f"({pooled[f'{metric}_ms'] / planned - 1:+.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
