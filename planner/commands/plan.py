"""`python -m planner plan`: size and price every route, write the plan (CSV, assumptions, options, minutes, workbook),
print it.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
from rich import box
from rich.markup import escape
from rich.table import Table

from fleetfacts.errors import InputError
from fleetfacts.schema import atomic_write_all, csv_bytes, terminal_safe
from planner.commands.base import (
    Command,
    assumption_arguments,
    assumptions_from_args,
    input_arguments,
    num,
    print_lines,
    refuse_overwriting_inputs,
    register,
    terminal_console,
)
from planner.engine.curves import engine_label
from planner.planning.catalog import load_inputs
from planner.planning.plan import make_plan, plan_coverage, runner_up_caveat
from planner.planning.plan_files import assumptions_path, plan_file_bytes, read_plan
from planner.planning.route_table import load_routes
from planner.sizing.plan_row import PlanRow, plan_rows


def _plan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--routes", required=True, help="routes CSV (schema ROUTES)")
    p.add_argument("--out", required=True, help="where to write the plan CSV (its assumptions and sources go "
                   "beside it, in <name>.assumptions.json)")
    input_arguments(p)
    assumption_arguments(p, "which price rows to use (default on-demand)")
    p.add_argument("--no-simulate", action="store_true", help="keep the one-replica screen's replica counts (skip the "
                   "continuous-batching simulation check of the cheapest online options)")
    p.add_argument("--options-out", metavar="CSV", help="also write every evaluated option")
    p.add_argument("--minutes-out", metavar="CSV", help="also write each online route's SLO windows minute by "
                   "minute (arrivals, TTFT and TPOT at the SLO percentile, breach) for the recommended fleet and "
                   "fewer replicas down to the whole-log count (at most 8 fleet sizes on a big fleet); not with "
                   "--no-simulate, which skips the simulation they come from")
    p.add_argument("--xlsx", metavar="FILE.xlsx", help="also write a workbook: plan, totals per route and fleet, "
                   "assumptions, sources (and the baseline difference with --baseline)")
    p.add_argument("--baseline", metavar="PLAN.csv", help="a saved plan to compare with: prints the differences "
                   "per route (engine, GPUs, $/month) and writes them to <out>.baseline-diff.csv")
    scale = p.add_mutually_exclusive_group()
    scale.add_argument("--workers", type=int, metavar="N", help="plan routes (and their simulation checks) in N "
                       "local processes; 1: in this process (default on Linux: one process per route up to the "
                       "usable CPUs; elsewhere: 1)")
    scale.add_argument("--ray", metavar="ADDRESS", help="plan routes as Ray tasks: a cluster address, auto, or "
                       "local (start Ray here); needs pip install '.[ray]'")


def _plan_outputs(args: argparse.Namespace) -> dict[str, str | Path | None]:
    return {"--out": args.out, "--out (assumptions)": assumptions_path(args.out), "--options-out": args.options_out,
            "--minutes-out": args.minutes_out, "--xlsx": args.xlsx, "--out (baseline diff)": _diff_path(args.out) if args.baseline else None}


def _diff_path(out: str) -> Path:
    path = Path(out)
    return path.with_name(path.stem + ".baseline-diff.csv")


def _run_plan(args: argparse.Namespace) -> int:
    from planner.planning.exports import baseline_diff, format_diff
    from planner.planning.fanout import auto_map, route_map

    inputs = {"--routes": args.routes, "--prices": args.prices, "--ops": args.ops, "--baseline": args.baseline,
              "--assumptions-from": args.assumptions_from}
    if args.no_simulate and args.minutes_out:
        raise InputError(f"--minutes-out {args.minutes_out}: needs the simulation check, which --no-simulate skips "
                         "(its SLO windows come from the simulated fleets); drop one of the two")
    refuse_overwriting_inputs(_plan_outputs(args), inputs)
    assumptions = assumptions_from_args(args)
    # A bad flag or missing Ray fails before the curves are fitted.
    mapper = route_map(args.workers, args.ray) if args.workers is not None or args.ray else auto_map()
    routes = load_routes(args.routes)
    baseline = plan_rows(read_plan(args.baseline)[0]) if args.baseline else None
    catalog = load_inputs(args.profiles, args.prices, args.ops, transfer=args.transfer, models=routes["model"])
    result = make_plan(routes, catalog, assumptions, check_by_simulation=not args.no_simulate,
                       **({"map_routes": mapper} if mapper else {}))
    diff = None if baseline is None else baseline_diff(result.rows, baseline)
    files = _output_files(args, result, diff)
    atomic_write_all(files)  # every output to a temp file first, then all renamed: all replaced, or none
    print_plan(result)
    if diff is not None:
        print_lines([f"compared with {args.baseline}:", *(format_diff(diff) or ["no route changed"])])
    written = [str(path) for path, _ in (files[1], files[0], *files[2:])]  # the plan CSV first, then its assumptions
    print(f"plan written to {', '.join(written)}")
    return 0


def _output_files(args: argparse.Namespace, result, diff) -> list[tuple[Path, bytes]]:
    """Every output of this run as (path, bytes): the plan's assumptions and CSV first, then the ones asked for."""
    from planner.planning.exports import minutes_frame, workbook_bytes

    files = plan_file_bytes(result, args.out)
    if args.options_out:
        files.append((Path(args.options_out), csv_bytes(result.options)))
    if args.minutes_out:
        files.append((Path(args.minutes_out), csv_bytes(minutes_frame(result))))
    if diff is not None:
        files.append((_diff_path(args.out), csv_bytes(diff)))
    if args.xlsx:
        files.append((Path(args.xlsx), workbook_bytes(result, diff)))
    return files


def _money(value: float) -> str:
    return "" if value is None or not math.isfinite(value) else f"${value:,.0f}"


def _cell(value: object) -> str:
    """A user string for a rich table cell: terminal controls shown as escapes, markup shown as text."""
    return escape(terminal_safe(value))


def _range(mid: str, low: str, high: str) -> str:
    """'3' when the range is one value, else '3' over '2–5'."""
    return mid if (low == high == mid) or not low else f"{mid}\n{low}–{high}"


def _money_range(mid: float, low: float, high: float) -> str:
    """'$7,651' over '$7,651–112,876' (the range's second figure without its '$', to fit 120 columns)."""
    if _money(low) == _money(high) == _money(mid):
        return _money(mid)
    return _range(_money(mid), _money(low), _money(high).lstrip("$"))


# Plan table: the columns never wrapped (a route name or a runner-up cut in two is unreadable).
NO_WRAP = ("route", "runner-up")
# A route name longer than this is shortened in the table ('…'; print_plan lists it whole below): unwrapped, a
# 100-character name left no room for the decision columns in 120.
ROUTE_CELL_CHARS = 28
BASIS = {"measured": "meas", "published": "pub", "predicted": "pred", "physics": "phys", "extrapolated": "extrap"}


def plan_table(result) -> Table:
    """The plan as a compact table that fits PIPED_WIDTH (120) columns: the option on two lines,
    ranges under the GPUs and $/month, basis (provenance) abbreviated."""
    table = Table(title="Fleetplan", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for name in ("route", "engine / option", "GPUs", "$/month", "runner-up", "saves/mo", "b-even", "basis"):
        table.add_column(name, justify="right" if name in ("GPUs", "$/month", "saves/mo") else "left",
                         no_wrap=name in NO_WRAP)
    for r in result.rows:
        if not r.ok:
            table.add_row(_cell(_short_route(r.route)), "(infeasible)", *[""] * 6)
            continue
        engine = engine_label(r.engine, r.engine_version, r.engine_config)
        option = f"{engine}\n{r.gpu} {r.precision} tp{num(r.tp)}"
        breakeven = num(r.breakeven_updates_per_month, "{:.2f}") or ("never" if r.breakeven_note.startswith(
            "never") else "-" if r.runner_up else "")
        table.add_row(_cell(_short_route(r.route)), _cell(option), _range(num(r.gpus), num(r.gpus_low), num(r.gpus_high)),
                      _money_range(r.total_usd_per_month, r.total_usd_per_month_low, r.total_usd_per_month_high),
                      _cell(r.runner_up), _savings(r), breakeven, BASIS.get(r.provenance, r.provenance))
    return table


def _short_route(name: str) -> str:
    """A route name as the plan table shows it: whole up to ROUTE_CELL_CHARS, else its start and '…'."""
    return name if len(name) <= ROUTE_CELL_CHARS else name[: ROUTE_CELL_CHARS - 1] + "…"


def _savings(row: PlanRow) -> str:
    """What the pick saves against its runner-up; 'none' when the runner-up is cheaper (print_plan says why)."""
    return "none" if runner_up_caveat(row) else _money(row.savings_usd_per_month)


def _sum(rows: list[PlanRow], field: str) -> float:
    """A column's total over rows, blanks counted as 0 (as pandas sums a column)."""
    values = [getattr(r, field) for r in rows]
    return float(np.nansum(np.array([math.nan if v is None else v for v in values], dtype=float)))


def print_plan(result) -> None:
    """The plan as a readable table, what the totals cover, infeasible routes' reasons and the assumptions."""
    console = terminal_console()
    console.print(plan_table(result))
    ok = [r for r in result.rows if r.ok]
    console.print(f"total: {num(_sum(ok, 'gpus'))} GPUs ({num(_sum(ok, 'gpus_low'))}–{num(_sum(ok, 'gpus_high'))}), "
                  f"{_money(_sum(ok, 'total_usd_per_month'))}/month ({_money(_sum(ok, 'total_usd_per_month_low'))}–"
                  f"{_money(_sum(ok, 'total_usd_per_month_high'))}) over {terminal_safe(plan_coverage(result.rows))}",
                  markup=False, highlight=False)
    console.print("second lines: GPUs and $/month if each replica delivers the low or high end of its throughput "
                  "interval (at least the curve's leave-one-out error). b-even: model updates/month at which the "
                  "runner-up costs the same ('-': same engine build, not meaningful). basis: measured, published, "
                  "predicted or extrapolated.", markup=False, style="dim")
    for r in result.rows:
        if _short_route(r.route) != r.route:
            console.print(terminal_safe(f"{_short_route(r.route)} is route {r.route}"), markup=False, highlight=False)
    for r in ok:
        if verdict := r.window_verdict():
            console.print(terminal_safe(f"{r.route}: {verdict}"), markup=False, highlight=False)
    for r in ok:
        if caveat := runner_up_caveat(r):
            console.print(terminal_safe(f"{r.route}: {caveat}"), markup=False, highlight=False)
    for r in result.rows:
        if not r.ok:
            console.print(terminal_safe(f"infeasible: {r.route}: {r.notes}"), markup=False)
    for name, value, what in result.assumptions.describe():
        console.print(f"  {name} = {value}  ({what})", markup=False, style="dim")


register(Command("plan", "size and price a fleet for every route; writes a plan CSV", _plan_arguments, _run_plan))
