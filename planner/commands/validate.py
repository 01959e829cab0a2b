"""`python -m planner validate`: leave-one-out prediction error per profile group (throughput, latency, transfer).
"""

from __future__ import annotations

import argparse
import json

from rich.markup import escape
from rich.table import Table

from planner.commands.base import Command, num, register, terminal_console
from planner.engine.curves import leave_one_out, load_profiles
from planner.engine.physics_prior import LONG_PROMPT_TOKENS, long_context_check, long_context_summary, physics_priors
from planner.engine.transfer_check import format_validation, published_fits, validate_transfer
from planner.latency import METRICS as LATENCY_METRICS
from planner.latency import latency_summary, validate_latency


def _validate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profiles", metavar="DIR", help="profiles directory (default: bundled profiles/)")
    p.add_argument("--latency", action="store_true",
                   help="leave-one-row-out error of TTFT p50/p99, TPOT p50/p99 and throughput on every open-loop "
                        "server row (curve and server front end refitted without the row; slower)")
    p.add_argument("--json", action="store_true", help="print the table as JSON records")
    p.add_argument("--transfer", action="store_true", help="validate the transfer to unprofiled models, GPUs, "
                   "TP sizes and precisions (leave-one-out experiments; published-table fits before/after)")
    p.add_argument("--long", action="store_true", help=f"hold out every offline row with prompts over "
                   f"{LONG_PROMPT_TOKENS:,} tokens (fits and physics calibration alike) and predict them: the "
                   "continuation beyond the measured lengths")


def _run_validate(args: argparse.Namespace) -> int:
    if args.transfer:
        return _run_validate_transfer(args)
    if args.latency:
        return _run_validate_latency(args)
    if args.long:
        return _run_validate_long(args)

    profiles = load_profiles(args.profiles)
    table = leave_one_out(profiles, physics_priors(profiles))
    if args.json:
        print(table.to_json(orient="records"))
        return 0
    print_validation(table)
    return 0


def _run_validate_transfer(args: argparse.Namespace) -> int:
    profiles = load_profiles(args.profiles)
    table, published = validate_transfer(profiles), published_fits(profiles)
    if args.json:
        print(json.dumps({"experiments": json.loads(table.to_json(orient="records")),
                          "published_fits": json.loads(published.to_json(orient="records"))}))
    else:
        print("\n".join(format_validation(table, published)))
    return 0


def _run_validate_long(args: argparse.Namespace) -> int:
    table = long_context_check(load_profiles(args.profiles))
    summary = long_context_summary(table)
    if args.json:
        print(json.dumps({"points": json.loads(table.to_json(orient="records")),
                          "groups": json.loads(summary.to_json(orient="records"))}))
        return 0
    console = terminal_console()
    if table.empty:
        console.print(f"no offline rows with prompts over {LONG_PROMPT_TOKENS:,} tokens in a fitted group",
                      markup=False)
        return 0
    out = Table(title=f"prompts over {LONG_PROMPT_TOKENS:,} tokens held out (fits and physics calibration): "
                      "output tok/s and TTFT at batch 1, error % and 90% interval cover")
    for name in ("group", "n", "median %", "max %", "TTFT median %", "TTFT max %", "covered"):
        out.add_column(name, justify="left" if name == "group" else "right")
    for r in summary.itertuples(index=False):
        out.add_row(escape(r.group), str(r.n), f"{r.median_err_pct:.1f}", f"{r.max_err_pct:.1f}",
                    _pct(r.ttft_median_err_pct), _pct(r.ttft_max_err_pct), f"{r.covered_share:.0%}")
    console.print(out)
    return 0


def _pct(value: float) -> str:
    return "-" if value != value else f"{value:.1f}"


def _run_validate_latency(args: argparse.Namespace) -> int:
    profiles = load_profiles(args.profiles)
    with terminal_console().status("leave-one-row-out over server rows...") as status:
        table = validate_latency(profiles, progress=lambda text: status.update(escape(text)))
    if args.json:
        print(table.to_json(orient="records"))
        return 0
    print_latency_validation(table)
    return 0


def print_latency_validation(table) -> None:
    """Per server row, then per group and per shape: measured vs predicted, and the median / max error."""
    console = terminal_console()
    if table.empty:
        console.print("no profile group has open-loop server rows (mode rate with TTFT)", markup=False)
        return
    rows = Table(title="leave-one-row-out latency (ms; throughput tok/s): measured -> predicted")
    for name in ("group", "shape", "load", "real /s", "engine", "front", "TTFT p50", "TTFT p99", "TPOT p50",
                 "TPOT p99", "tok/s"):
        rows.add_column(name, justify="left" if name in ("group", "shape", "load") else "right")
    for _, r in table.iterrows():
        rows.add_row(escape(str(r["group"])), str(r["shape"]), escape(str(r["load"])), f"{r['realized_rps']:.1f}",
                     f"{r['engine_load']:.2f}", f"{r['front_end_load']:.2f}",
                     *(f"{r[f'{m}_measured']:.1f} -> {r[f'{m}_predicted']:.1f}" for m, _ in LATENCY_METRICS))
    console.print(rows)
    console.print("real /s: the rate the row's arrivals drew; engine: offered output tok/s over the engine's "
                  "saturated throughput at the shape; front: the front end's steady-state utilisation there",
                  markup=False)
    for by in (("group",), ("group", "shape")):
        summary = Table(title=f"median / max |error| per {' and '.join(by)}")
        for column in (*by, "rows"):
            summary.add_column(column, justify="right" if column == "rows" else "left")
        for m, _ in LATENCY_METRICS:
            summary.add_column(m.replace("_", " "), justify="right")
        for _, r in latency_summary(table, by).iterrows():
            summary.add_row(*(escape(str(r[c])) for c in by), str(r["rows"]),
                            *(f"{100 * r[f'{m}_median']:.1f}% / {100 * r[f'{m}_max']:.1f}%" for m, _ in LATENCY_METRICS))
        console.print(summary)


def print_validation(table) -> None:
    """Leave-one-out errors per group as a table."""

    out = Table(title="leave-one-out throughput error")
    for name in ("group", "provenance", "points", "median %", "max %"):
        out.add_column(name, justify="left" if name in ("group", "provenance") else "right")
    for _, r in table.iterrows():
        out.add_row(escape(str(r["group"])), str(r["provenance"]), num(r["n_points"]),
                    num(r["median_err_pct"], "{:.1f}"), num(r["max_err_pct"], "{:.1f}"))
    console = terminal_console()
    console.print(out)
    if table.empty:
        console.print("no group has enough points for leave-one-out", markup=False)


register(Command("validate", "leave-one-out prediction error per profile group", _validate_arguments,
                 _run_validate))
