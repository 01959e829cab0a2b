"""`python -m planner`: plan fleets, predict one shape, validate the fitted curves.

Each subcommand is a small `Command` (its arguments and its run function)
registered in COMMANDS; adding one is a function pair and one `register(...)`
line.  Run functions only arrange inputs, call planner functions and print.
Expected errors (InputError, NoCurveError, ...) become `error: ...` and exit 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fleetfacts.errors import FleetplanError, InputError
from fleetfacts.schema import (
    ROUTES,
    atomic_write_bytes,
    load_plan_rows,
    slug,
    terminal_safe,
    write_csv,
    write_table,
)
from fleetfacts.specs import bundled_model_specs, gpu_spec, load_model_config, model_facts, model_spec_from_config
from planner.engine.curves import (
    BUNDLED_PROFILES_DIR,
    Curve,
    NoCurveError,
    engine_label,
    find_curve,
    fit_curves,
    leave_one_out,
    load_profiles,
)
from planner.engine.transfer_check import (
    TRANSFER_MODES,
    default_transfer_target,
    format_validation,
    models_table,
    published_fits,
    transfer_for,
    validate_transfer,
)
from planner.latency import (
    DEFAULT_ROUTER,
    ROUTERS,
    Fleet,
    LatencyReport,
    Lengths,
    OpenLoop,
    Replay,
    latency_summary,
    predict,
    validate_latency,
    with_server_latency_of,
)
from planner.latency import METRICS as LATENCY_METRICS
from planner.latency.analytic import AnalyticLoad, Offline, Rounds, Steady, analytic
from planner.outputs import check_output, write_files
from planner.planning import deploy
from planner.planning.catalog import load_inputs
from planner.planning.fleet_size import MAX_FLEET_ROUTES, check_fleet_size
from planner.planning.plan import make_plan, plan_coverage, runner_up_caveat
from planner.planning.plan_files import (
    ASSUMPTIONS_SUFFIX,
    assumptions_path,
    check_plan_file,
    read_assumptions,
    read_plan,
    write_plan,
)
from planner.planning.route_table import load_routes
from planner.sizing.assumptions import Assumptions
from planner.sizing.plan_row import PlanRow, plan_rows
from planner.traffic.logs import log_to_routes, read_log
from planner.traffic.routes import Route
from planner.traffic.workload import replay_requests, route_requests

# The fleet optimiser, the workbook and plan-diff writer, the process pool and the simulation check are imported
# by the commands that use them (plan, fleet, simulate): predict, the answer a user waits for most, does not
# load them (issue 23).

log = logging.getLogger(__name__)

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C
# How `predict --concurrency` runs its clients (see --closed-loop).
CLOSED_LOOPS = ("staggered", "rounds")
# Width of tables when stdout is not a terminal: a review terminal's 120 columns (issue 15).
PIPED_WIDTH = 120


@dataclass(frozen=True)
class Command:
    """One subcommand: `add_arguments(parser)` declares its flags, `run(args)` returns the exit code."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {}


def register(command: Command) -> Command:
    """Add a subcommand to `python -m planner`."""
    COMMANDS[command.name] = command
    return command


def _expected_errors() -> tuple[type[BaseException], ...]:
    """Errors that are the user's to fix: reported in one line, no traceback."""
    return (FleetplanError, FileNotFoundError, IsADirectoryError)


# ---------------------------------------------------------------- plan

def _plan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--routes", required=True, help="routes CSV (schema ROUTES)")
    p.add_argument("--out", required=True, help="where to write the plan CSV (its assumptions and sources go "
                   "beside it, in <name>.assumptions.json)")
    _input_arguments(p)
    _assumption_arguments(p, "which price rows to use (default on-demand)")
    p.add_argument("--no-simulate", action="store_true", help="keep the one-replica screen's replica counts (skip the "
                   "continuous-batching simulation check of the cheapest online options)")
    p.add_argument("--options-out", metavar="CSV", help="also write every evaluated option")
    p.add_argument("--minutes-out", metavar="CSV", help="also write each online route's SLO windows minute by "
                   "minute (arrivals, TTFT and TPOT at the SLO percentile, breach) for the recommended fleet and "
                   "fewer replicas down to the whole-log count")
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


def _assumption_arguments(p: argparse.ArgumentParser, pricing_help: str) -> None:
    """The flags that set a plan's assumptions and options (plan and fleet)."""
    p.add_argument("--provider", type=slug, help="price GPUs from this provider only (default: cheapest)")
    p.add_argument("--pricing-type", type=slug, choices=("on-demand", "reserved", "spot"), help=pricing_help)
    p.add_argument("--engineer-rate", type=float, metavar="USD", help="loaded engineering cost, USD per hour")
    p.add_argument("--scale-up-s", type=float, metavar="S", help="seconds from a load rise until an added replica "
                   "serves, for the autoscaled option (default 160: 30 s detection + a 130 s vLLM start; 82-116 s recorded on the H200)")
    p.add_argument("--assumptions-from", metavar="PLAN.csv", help="start from the assumptions of a saved plan")
    p.add_argument("--allow-prerelease", action="store_true", help="also recommend pre-release and development "
                   "engine builds (e.g. 0.20+main; not recommended by default)")
    p.add_argument("--transfer", choices=TRANSFER_MODES, default="auto",
                   help="transferred (unprofiled) options: auto = for routes whose model has no profile (default), "
                   "all = for every engine/GPU/precision/TP no profile covers, off = none")
    p.add_argument("--allow-unverified-latency", action="store_true",
                   help="let options whose TTFT/TPOT rest on no latency measurement win online routes on cost "
                        "(by default they rank behind options with measured or transferred latency)")


def _input_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profiles", metavar="DIR", help="profiles directory (default: bundled profiles/)")
    p.add_argument("--prices", metavar="F", help="prices CSV (default: planner/data/prices.csv)")
    p.add_argument("--ops", metavar="F", help="engine-ops CSV (default: planner/data/engine_ops.csv)")


def _assumptions_from_args(args: argparse.Namespace):
    given = args.assumptions_from
    if given and not str(given).endswith(ASSUMPTIONS_SUFFIX) and assumptions_path(given).exists():
        check_plan_file(given)  # a plan CSV whose assumptions beside it were written for another plan
    base = read_assumptions(given) if given else Assumptions()
    changes: dict[str, Any] = {}
    if args.provider:
        changes["provider"] = args.provider
    if args.pricing_type:
        changes["pricing_type"] = args.pricing_type
    if args.engineer_rate is not None:
        changes["engineer_usd_per_hour"] = args.engineer_rate
    if args.scale_up_s is not None:
        changes["scale_up_s"] = args.scale_up_s
    if args.allow_prerelease:
        changes["allow_prerelease"] = True
    if args.allow_unverified_latency:
        changes["allow_unverified_latency"] = True
    return replace(base, **changes)


def refuse_overwriting_inputs(outputs: dict[str, str | Path | None], inputs: dict[str, str | Path | None]) -> None:
    """InputError when an output would replace an input file (or two outputs are one file), or cannot take a
    file (planner.outputs.check_output: a device, pipe or folder, a missing folder, a name too long)."""
    seen: dict[Path, str] = {}
    for flag, value in inputs.items():
        if value:
            seen[Path(value).resolve()] = flag
    for flag, value in outputs.items():
        if not value:
            continue
        check_output(flag, value)
        path = Path(value).resolve()
        if path in seen:
            raise InputError(f"{flag} {value}: is also {seen[path]}; refusing to overwrite an input (choose another "
                             f"file name)")
        seen[path] = flag


def _plan_outputs(args: argparse.Namespace) -> dict[str, str | Path | None]:
    return {"--out": args.out, "--out (assumptions)": assumptions_path(args.out), "--options-out": args.options_out,
            "--minutes-out": args.minutes_out, "--xlsx": args.xlsx, "--out (baseline diff)": _diff_path(args.out) if args.baseline else None}


def _diff_path(out: str) -> Path:
    path = Path(out)
    return path.with_name(path.stem + ".baseline-diff.csv")


def _run_plan(args: argparse.Namespace) -> int:
    from planner.planning.exports import baseline_diff, format_diff, minutes_frame, workbook_bytes
    from planner.planning.fanout import auto_map, route_map

    inputs = {"--routes": args.routes, "--prices": args.prices, "--ops": args.ops, "--baseline": args.baseline,
              "--assumptions-from": args.assumptions_from}
    refuse_overwriting_inputs(_plan_outputs(args), inputs)
    assumptions = _assumptions_from_args(args)
    # A bad flag or missing Ray fails before the curves are fitted.
    mapper = route_map(args.workers, args.ray) if args.workers is not None or args.ray else auto_map()
    routes = load_routes(args.routes)
    baseline = plan_rows(read_plan(args.baseline)[0]) if args.baseline else None
    catalog = load_inputs(args.profiles, args.prices, args.ops, transfer=args.transfer, models=routes["model"])
    result = make_plan(routes, catalog, assumptions, check_by_simulation=not args.no_simulate,
                       **({"map_routes": mapper} if mapper else {}))
    side = write_plan(result, args.out)
    if args.options_out:
        write_csv(result.options, args.options_out)
    if args.minutes_out:
        write_csv(minutes_frame(result), args.minutes_out)
    diff = None if baseline is None else baseline_diff(result.rows, baseline)
    if diff is not None:
        write_csv(diff, _diff_path(args.out))
    if args.xlsx:
        atomic_write_bytes(args.xlsx, workbook_bytes(result, diff))
    print_plan(result)
    if diff is not None:
        _print_lines([f"compared with {args.baseline}:", *(format_diff(diff) or ["no route changed"])])
    written = [args.out, str(side), *(p for p in (args.options_out, args.minutes_out, args.xlsx) if p)]
    if diff is not None:
        written.append(str(_diff_path(args.out)))
    print(f"plan written to {', '.join(written)}")
    return 0


def _print_lines(lines: list[str]) -> None:
    """Print lines that carry user strings (route names): terminal controls shown as escapes, no markup."""
    console = _console()
    for line in lines:
        console.print(terminal_safe(line), markup=False, highlight=False)


def _console():

    # Piped output (tests, logs) gets the width of a review terminal instead of wrapping at 80 columns.
    return Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH, no_color=True)


def _money(value: float) -> str:
    return "" if value is None or not math.isfinite(value) else f"${value:,.0f}"


def _num(value: object, fmt: str = "{:g}") -> str:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return "" if not math.isfinite(number) else fmt.format(number)


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
BASIS = {"measured": "meas", "published": "pub", "predicted": "pred", "extrapolated": "extrap"}


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
        option = f"{engine}\n{r.gpu} {r.precision} tp{_num(r.tp)}"
        breakeven = _num(r.breakeven_updates_per_month, "{:.2f}") or ("never" if r.breakeven_note.startswith(
            "never") else "-" if r.runner_up else "")
        table.add_row(_cell(_short_route(r.route)), _cell(option), _range(_num(r.gpus), _num(r.gpus_low), _num(r.gpus_high)),
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
    console = _console()
    console.print(plan_table(result))
    ok = [r for r in result.rows if r.ok]
    console.print(f"total: {_num(_sum(ok, 'gpus'))} GPUs ({_num(_sum(ok, 'gpus_low'))}–{_num(_sum(ok, 'gpus_high'))}), "
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


# ---------------------------------------------------------------- predict

def _predict_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu", required=True, type=slug)
    p.add_argument("--engine", required=True, type=slug)
    p.add_argument("--model", required=True, type=slug)
    p.add_argument("--engine-version", help="default: the newest profiled version")
    p.add_argument("--precision", type=slug, help="default: any profiled precision")
    p.add_argument("--tp", type=int, help="tensor-parallel GPUs per replica (default: the smallest profiled)")
    p.add_argument("--config", type=slug, help="engine settings label of the profile, e.g. tuned (default: "
                   "'default' where profiled, else any other)")
    p.add_argument("--input-len", type=int, help="prompt tokens per request (required unless --log)")
    p.add_argument("--output-len", type=int, help="output tokens per request (required unless --log)")
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--batch-size", type=int, help="offline: requests submitted at once")
    load.add_argument("--concurrency", type=int, help="online: requests kept in flight (see --closed-loop)")
    load.add_argument("--request-rate", type=float, metavar="R",
                      help="online, open loop: arrivals per second to one replica; prints TTFT/TPOT/ITL/e2e "
                           "p50/p95/p99 from simulation, with 90%% intervals")
    p.add_argument("--arrival-cv", type=float, metavar="CV",
                   help="with --request-rate: CV of the gaps between arrivals (1 = Poisson, default; 2, 4 = bursty)")
    p.add_argument("--log", metavar="FILE", help="with --request-rate: replay this request log (any format "
                   "`planner traffic` reads) with its times scaled to R req/s and its own lengths, as `plan` "
                   "sizes a route with a log")
    p.add_argument("--share", type=int, default=1, metavar="N", help="with --request-rate: one of N replicas "
                   "behind a load balancer: R/N req/s with the bursts split at random (--log: every N-th "
                   "request) (default 1)")
    p.add_argument("--replicas", type=int, metavar="N", help="with --request-rate: R req/s is the whole route's "
                   "rate, served by N replicas behind --router, simulated together on an hour of arrivals (--log: "
                   "the log's own timestamps scaled to R): the fleet tier `plan` sizes and reports online routes on")
    p.add_argument("--router", choices=tuple(ROUTERS), default=DEFAULT_ROUTER, help="with --replicas: the load "
                   f"balancer (default {DEFAULT_ROUTER}, as plan assumes)")
    p.add_argument("--closed-loop", choices=CLOSED_LOOPS, default="staggered",
                   help="with --concurrency: 'staggered' = clients in steady state, as real traffic (default); "
                        "'rounds' = a benchmark's clients starting together and staying in step "
                        "(vllm bench serve --max-concurrency), whose mean TTFT is far higher")
    p.add_argument("--num-requests", type=int, help="with --closed-loop rounds: requests sent in all "
                   "(default: 4 x concurrency)")
    p.add_argument("--profiles", metavar="DIR", help="profiles directory (default: bundled profiles/)")
    p.add_argument("--model-config", metavar="PATH", help="the model's Hugging Face config.json (or its folder): "
                   "predict by transfer from its architecture")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise InputError(f"--{name.replace('_', '-')}: expected a whole number >= 1, got {value}")


def _run_predict(args: argparse.Namespace) -> int:
    if args.log and args.request_rate is None:
        raise InputError("--log needs --request-rate (the rate the log is replayed at)")
    if not args.log and (args.input_len is None or args.output_len is None):
        raise InputError("--input-len and --output-len are required (or --log with --request-rate)")
    if args.request_rate is not None:
        return _run_predict_open_loop(args)

    curve = _predict_curve(args, serving=args.batch_size is None)
    answer = analytic(curve, _analytic_load(args))
    record = {**_prediction_record(curve, answer.prediction), "closed_loop": args.closed_loop if args.concurrency
              else None, "tier": answer.tier, "statistic": answer.statistic}
    if args.json:
        print(json.dumps(record, allow_nan=False, default=str))
    else:
        _print_prediction(record)
    return 0


def _analytic_load(args: argparse.Namespace) -> AnalyticLoad:
    """The one load `predict`'s flags describe (without --request-rate): an offline batch, or a closed loop."""
    if args.batch_size is not None:
        return Offline(args.input_len, args.output_len, args.batch_size)
    if args.closed_loop == "rounds":
        return Rounds(args.input_len, args.output_len, args.concurrency, args.num_requests or 4 * args.concurrency)
    return Steady(args.input_len, args.output_len, args.concurrency)


def _transferred_curve(args: argparse.Namespace, profiles, config_path: str | None):
    """No fitted curve (or --model-config given): the curve planner.engine.transfer predicts from the facts."""
    model = _model_for(args.model, config_path)
    gpu = gpu_spec(args.gpu)
    if gpu is None:
        raise NoCurveError(f"no datasheet facts for GPU {args.gpu!r} (fleetfacts/data/gpu_specs.csv)")
    return default_transfer_target(transfer_for(profiles), args.engine, model, gpu, args.precision, args.tp)


def _model_for(name: str, config_path: str | None):
    if config_path is None:
        model = model_facts(name)
        if model is None:
            raise NoCurveError(f"no facts for model {name!r}: pass --model-config PATH "
                               f"(a Hugging Face config.json) or see `python -m planner models`")
        return model
    path = Path(config_path)
    config = load_model_config(path if path.is_dir() else path.parent)
    if config is None:
        raise InputError(f"--model-config {config_path}: no config.json there")
    try:
        return model_spec_from_config(name, config, str(path))
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"--model-config {config_path}: not a decoder config.json (missing or bad {err})") from None


def _predict_curve(args: argparse.Namespace, serving: bool = True) -> Curve:
    """The curve `predict` asks for; `serving`: with its server model (the front end the online loads add;
    an offline batch does not meet it, and skips its fit)."""
    for name in ("input_len", "output_len", "batch_size", "concurrency", "tp", "num_requests"):
        _positive(name, getattr(args, name))
    profiles = load_profiles(args.profiles)
    why = ""
    if not args.model_config:
        asked = profiles[(profiles["engine"] == args.engine) & (profiles["gpu"] == args.gpu)
                         & (profiles["model"] == args.model)] if not profiles.empty else profiles
        try:  # fit the asked engine, GPU and model only (every other group is left alone)
            curve = find_curve(fit_curves(asked), args.engine, args.gpu, args.model, args.precision, args.tp,
                               args.engine_version, args.config)
            return with_server_latency_of(curve, profiles) if serving else curve
        except NoCurveError:
            try:  # say what is available: every group (fitted only on this path)
                find_curve(fit_curves(profiles), args.engine, args.gpu, args.model, args.precision, args.tp,
                           args.engine_version, args.config)
            except NoCurveError as err:
                why = str(err)
    try:  # no fitted curve (or --model-config given): predict by transfer from the facts
        return _transferred_curve(args, profiles, args.model_config)
    except NoCurveError as err:
        raise NoCurveError(f"{why}; no transfer either: {err}" if why else str(err)) from None


# Percentiles `predict --request-rate` prints.
SHOWN_PERCENTILES = (50, 95, 99)
# A log replay must keep this many requests for its p99 to rest on more than one request.
MIN_REPLAY_REQUESTS = 100
# Served output below this share of the offered output: the replica is overloaded (a short run's drain tail
# alone stays well above it).
OVERLOAD_SERVED_SHARE = 0.8


def _run_predict_open_loop(args: argparse.Namespace) -> int:
    _check_open_loop_args(args)
    curve = _predict_curve(args)
    if args.replicas is not None:
        pred, offered_tok_s = _predict_fleet(args, curve), math.nan
    elif args.log:
        pred, offered_tok_s = _predict_log(args, curve)
    else:
        pred = predict(curve, OpenLoop(args.request_rate, args.arrival_cv).share(args.share),
                       Lengths.fixed(args.input_len, args.output_len), percentiles=SHOWN_PERCENTILES)
        offered_tok_s = args.request_rate / args.share * args.output_len
    record = {"group": curve.key.label(), "config": curve.key.config, "input_len": args.input_len,
              "output_len": args.output_len, "arrival_cv": args.arrival_cv,
              **{k: _finite(v) for k, v in pred.to_record().items()},
              "front_end": curve.front_end.basis if curve.front_end else None, "provenance": "predicted",
              "overloaded": bool(pred.output_tok_per_s < OVERLOAD_SERVED_SHARE * offered_tok_s)}
    if args.json:
        print(json.dumps(record, allow_nan=False, default=str))
        return 0
    _print_open_loop(record)
    return 0


def _check_open_loop_args(args: argparse.Namespace) -> None:
    """InputError on a bad rate, CV or share, or on flags --log would ignore; the CV defaults to 1 (Poisson)."""
    if not (args.request_rate > 0 and math.isfinite(args.request_rate)):
        raise InputError(f"--request-rate: expected a number > 0, got {args.request_rate:g}")
    if args.log:
        given = [flag for flag, value in (("--input-len", args.input_len), ("--output-len", args.output_len),
                                          ("--arrival-cv", args.arrival_cv)) if value is not None]
        if given:
            raise InputError(f"{', '.join(given)}: not used with --log (the log's own lengths and arrival times "
                             "are replayed); drop them")
    if args.arrival_cv is None:
        args.arrival_cv = 1.0
    if not (args.arrival_cv > 0 and math.isfinite(args.arrival_cv)):
        raise InputError(f"--arrival-cv: expected a number > 0, got {args.arrival_cv:g}")
    if args.share < 1:
        raise InputError(f"--share: expected a whole number >= 1, got {args.share}")


def _predict_log(args: argparse.Namespace, curve) -> tuple[LatencyReport, float]:
    """`predict --request-rate R --log FILE [--share N]`: one replica's share of the log replayed at R req/s;
    (its latency, the output tok/s it is offered)."""
    requests = read_log(args.log).requests
    if len(requests) // args.share < MIN_REPLAY_REQUESTS:
        raise InputError(f"--share {args.share}: leaves {len(requests) // args.share} of the log's "
                         f"{len(requests)} requests, too few for a p99 (at least {MIN_REPLAY_REQUESTS}); "
                         f"use --share {max(1, len(requests) // MIN_REPLAY_REQUESTS)} or less")
    lengths = (requests["input_len"].to_numpy(), requests["output_len"].to_numpy())
    load = Replay.of_log(requests["t_s"].to_numpy(float), lengths, args.request_rate, args.share, Path(args.log).name)
    return predict(curve, load, percentiles=SHOWN_PERCENTILES), load.rate_rps * float(np.mean(load.output_len))


def _predict_fleet(args: argparse.Namespace, curve) -> LatencyReport:
    """`predict --request-rate R --replicas N`: the route's one load at R req/s (planner.traffic.workload.
    route_requests, as plan builds it) on N replicas behind the router: the fleet tier."""
    if args.replicas < 1 or args.share != 1:
        raise InputError(f"--replicas: expected a whole number >= 1 and no --share, got {args.replicas}")
    row: dict = {"name": "predict", "model": args.model, "traffic": "online", "rate_rps": args.request_rate,
                 "peak_to_mean": 1.0, "arrival_cv": args.arrival_cv, "input_len_mean": args.input_len,
                 "output_len_mean": args.output_len}
    log = None
    if args.log:
        requests = read_log(args.log).requests
        t = np.sort(requests["t_s"].to_numpy(float))
        own = (t.size - 1) / (t[-1] - t[0]) if t.size > 1 and t[-1] > t[0] else args.request_rate
        row.update(rate_rps=own, peak_to_mean=args.request_rate / own, input_len_mean=1.0, output_len_mean=1.0)
        log = (requests["t_s"].to_numpy(float), (requests["input_len"].to_numpy(), requests["output_len"].to_numpy()))
    route = Route.from_row(row)
    load = Fleet(route_requests(route, log), args.replicas, args.router)
    return predict(curve, load, percentiles=SHOWN_PERCENTILES)


def _finite(value: object) -> object:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _print_open_loop(r: dict) -> None:
    print(f"{r['group']}  (predicted, latency {r['latency_basis']})")
    lengths = "its own lengths" if r["input_len"] is None else f"{r['input_len']}/{r['output_len']} tokens"
    print(terminal_safe(f"  {r['load']}, {lengths} ({r['tier']}): {r['output_tok_per_s']:.0f} output tok/s"))
    for metric in ("ttft", "tpot", "itl", "e2e"):
        cells = []
        for p in SHOWN_PERCENTILES:
            name = f"{metric}_p{p}_ms"
            value, low, high = r.get(name), r.get(f"{name}_low"), r.get(f"{name}_high")
            cells.append("n/a" if value is None else f"p{p} {value:.1f} [{low:.1f}..{high:.1f}]")
        print(f"  {metric.upper():5s} ms  " + "   ".join(cells))
    if r["front_end"]:
        print(f"  server front end: {r['front_end']}")
    if r["overloaded"]:
        print("  overloaded: the replica serves less than the offered load, so its queue grows for as long as the "
              "run lasts; these percentiles are of this run, not of a steady state (add replicas or lower the rate)")


def _prediction_record(curve, pred) -> dict[str, object]:
    def clean(value: float) -> float | None:
        return None if value is None or not math.isfinite(value) else float(value)

    return {
        "group": curve.key.label(), "config": curve.key.config, "output_tok_per_s": clean(pred.output_tok_per_s),
        "low": clean(pred.low), "high": clean(pred.high), "extrapolated": bool(pred.extrapolated),
        "provenance": pred.provenance, "ttft_ms": clean(pred.ttft_ms), "tpot_ms": clean(pred.tpot_ms),
        "e2e_ms": clean(pred.e2e_ms), "concurrency": clean(pred.concurrency),
        "per_gpu_output_tok_per_s": clean(pred.output_tok_per_s / curve.key.tp),
        "source_provenance": curve.source_provenance, "has_latency": bool(curve.has_latency), "note": pred.note,
    }


def _print_prediction(r: dict) -> None:
    label = "EXTRAPOLATED (outside the measured range)" if r["extrapolated"] else r["provenance"]
    if r["source_provenance"] == "transferred":
        label = "TRANSFERRED (no profile: from architecture, datasheet and calibration)" + (
            ", outside the calibrated shapes" if r["extrapolated"] else "")
    print(terminal_safe(r["group"]))
    print(f"  output tok/s (replica): {r['output_tok_per_s']:.0f}  [{r['low']:.0f} .. {r['high']:.0f}]  {label}")
    print(f"  per GPU: {r['per_gpu_output_tok_per_s']:.0f} tok/s   concurrency: {r['concurrency']:g}")
    ttft, tpot, e2e = (_num(r[k], f) or "n/a" for k, f in (("ttft_ms", "{:.1f}"), ("tpot_ms", "{:.2f}"),
                                                            ("e2e_ms", "{:.0f}")))
    print(f"  TTFT {ttft} ms   TPOT {tpot} ms   e2e {e2e} ms (means)")
    if r["note"]:
        print(terminal_safe(f"  note: {r['note']}"))


# ---------------------------------------------------------------- validate

def _validate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profiles", metavar="DIR", help="profiles directory (default: bundled profiles/)")
    p.add_argument("--latency", action="store_true",
                   help="leave-one-row-out error of TTFT p50/p99, TPOT p50/p99 and throughput on every open-loop "
                        "server row (curve and server front end refitted without the row; slower)")
    p.add_argument("--json", action="store_true", help="print the table as JSON records")
    p.add_argument("--transfer", action="store_true", help="validate the transfer to unprofiled models, GPUs, "
                   "TP sizes and precisions (leave-one-out experiments; published-table fits before/after)")


def _run_validate(args: argparse.Namespace) -> int:
    if args.transfer:
        return _run_validate_transfer(args)
    if args.latency:
        return _run_validate_latency(args)

    table = leave_one_out(load_profiles(args.profiles))
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


def _run_validate_latency(args: argparse.Namespace) -> int:
    profiles = load_profiles(args.profiles)
    with _console().status("leave-one-row-out over server rows...") as status:
        table = validate_latency(profiles, progress=lambda text: status.update(escape(text)))
    if args.json:
        print(table.to_json(orient="records"))
        return 0
    print_latency_validation(table)
    return 0


def print_latency_validation(table) -> None:
    """Per server row, then per group and per shape: measured vs predicted, and the median / max error."""
    console = _console()
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
        out.add_row(escape(str(r["group"])), str(r["provenance"]), _num(r["n_points"]),
                    _num(r["median_err_pct"], "{:.1f}"), _num(r["max_err_pct"], "{:.1f}"))
    console = _console()
    console.print(out)
    if table.empty:
        console.print("no group has enough points for leave-one-out", markup=False)


def _models_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the table as JSON records")


def _run_models(args: argparse.Namespace) -> int:
    table = models_table(bundled_model_specs())
    if args.json:
        print(table.to_json(orient="records"))
    else:
        print(table.drop(columns=["source"]).to_string(index=False))
        print("sources: fleetfacts/models/README.md; any other model: predict --model-config PATH/config.json")
    return 0


register(Command("plan", "size and price a fleet for every route; writes a plan CSV", _plan_arguments, _run_plan))
# ---------------------------------------------------------------- fleet

def _fleet_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--routes", required=True, help=f"routes CSV (schema ROUTES), at most {MAX_FLEET_ROUTES} routes "
                   "(more: split the file, or plan route by route with `plan`)")
    p.add_argument("--out", required=True, help="where to write the fleet CSV (one row per deployment, schema "
                   "FLEET); its summary goes beside it in <name>.summary.json")
    _input_arguments(p)
    _assumption_arguments(p, "with --no-pricing-mix (and for the route-by-route plan): which price rows "
                          "(default on-demand)")
    p.add_argument("--quota", action="append", default=[], metavar="GPU=N",
                   help="at most N GPUs of this type at any hour (repeat per type)")
    p.add_argument("--mix", action="store_true", help="GPU mix: a route's requests, split by prompt and output "
                   "length, may go to different GPUs and engines")
    p.add_argument("--autoscale", action="store_true", help="replicas follow each route's hourly profile "
                   "(its diurnal column or a day of log), cold starts counted")
    p.add_argument("--no-share", action="store_true", help="no deployment serves more than one route")
    p.add_argument("--no-pricing-mix", action="store_true", help="price everything at --pricing-type (default: "
                   "reserved for the base load where cheaper, on-demand for the rest, spot for batch jobs)")
    p.add_argument("--no-simulate", action="store_true", help="skip the simulation check of the shared "
                   "deployments (the route-by-route plan is still checked)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def parse_quotas(items: list[str]) -> dict[str, int]:
    """--quota GPU=N items as {gpu: N}; InputError on a malformed one."""
    quotas = {}
    for item in items:
        gpu, sep, count = item.partition("=")
        if not sep or not gpu.strip() or not count.strip().isdigit():
            raise InputError(f"--quota {item!r}: expected GPU=N with N a whole number of GPUs, e.g. h100=16")
        quotas[slug(gpu)] = int(count)
    return quotas


def _run_fleet(args: argparse.Namespace) -> int:
    from planner.planning.fleet import Levers, fleet_csv_text, format_fleet, make_fleet
    summary_path = Path(args.out).with_name(Path(args.out).stem + ".summary.json")
    refuse_overwriting_inputs({"--out": args.out, "--out (summary)": summary_path},
                              {"--routes": args.routes, "--prices": args.prices, "--ops": args.ops,
                               "--assumptions-from": args.assumptions_from})
    quotas = parse_quotas(args.quota)
    assumptions = _assumptions_from_args(args)
    levers = Levers(share=not args.no_share, mix=args.mix, autoscale=args.autoscale, pricing=not args.no_pricing_mix)
    routes = load_routes(args.routes)
    check_fleet_size(len(routes), args.routes)  # before the curves are fitted
    catalog = load_inputs(args.profiles, args.prices, args.ops, transfer=args.transfer, models=routes["model"])
    result = make_fleet(routes, catalog, assumptions, levers, quotas, check=not args.no_simulate)
    atomic_write_bytes(args.out, fleet_csv_text(result).encode("utf-8"))
    atomic_write_bytes(summary_path, (json.dumps(result.summary, indent=2) + "\n").encode("utf-8"))
    if args.json:
        print(json.dumps(result.summary))
        return 0
    _print_lines(format_fleet(result))
    print(f"fleet written to {args.out}, {summary_path}")
    return 0


register(Command("fleet", "the cheapest fleet for all routes together (shared deployments, GPU mix, hourly "
                 "scaling, pricing mix); writes a fleet CSV", _fleet_arguments, _run_fleet))
register(Command("predict", "predict one replica's throughput and latency at one shape", _predict_arguments,
                 _run_predict))
register(Command("validate", "leave-one-out prediction error per profile group", _validate_arguments,
                 _run_validate))
register(Command("models", "list the bundled model architectures (what transfer can predict without a config)",
                 _models_arguments, _run_models))



# ---------------------------------------------------------------- traffic, simulate (planner.traffic.logs / planner.latency.simulate)

def _traffic_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log", required=True, metavar="FILE", help="request log: Azure trace CSV, or generic CSV/JSONL")
    p.add_argument("--format", choices=("azure", "generic"), type=slug, help="log format (default: detected)")
    p.add_argument("--route", help="route name for a log without a route column (default: the file name)")
    p.add_argument("--model", type=slug, help="model slug for routes whose log names none (default 'unknown')")
    p.add_argument("--out", required=True, metavar="ROUTES.csv", help="where to write the routes CSV")
    p.add_argument("--ttft-slo-ms", type=float, help="TTFT target to write into every route")
    p.add_argument("--tpot-slo-ms", type=float, help="TPOT target to write into every route")
    p.add_argument("--strict", action="store_true", help="stop at the first bad row instead of skipping it")


def _run_traffic(args: argparse.Namespace) -> int:

    refuse_overwriting_inputs({"--out": args.out}, {"--log": args.log})
    routes, lines = log_to_routes(args.log, args.format, args.route, args.strict, args.model,
                                  ttft_slo_ms=args.ttft_slo_ms, tpot_slo_ms=args.tpot_slo_ms)
    # The plan replays the log each route came from (its bursts, not a gamma stand-in with the same CV).
    routes["log"] = os.path.relpath(Path(args.log).resolve(), Path(args.out).resolve().parent)
    write_table(routes, args.out, ROUTES)
    print(terminal_safe("\n".join(lines)))
    if (routes["model"] == "unknown").any():
        print("note: the log does not name the model: set the 'model' column (or pass --model)")
    if routes[["ttft_slo_ms", "tpot_slo_ms", "e2e_slo_ms"]].isna().all(axis=1).any():
        print("note: no SLO given: fill ttft_slo_ms / tpot_slo_ms before planning (or pass --ttft-slo-ms)")
    print(terminal_safe(f"routes written to {args.out}"))
    return 0


def _simulate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--routes", required=True, help="routes CSV the plan was made from")
    p.add_argument("--plan", required=True, help="plan CSV (written by `plan`)")
    p.add_argument("--log", metavar="FILE", help="replay this request log instead of each route's own load (a "
                   "route's `log`, else synthetic arrivals)")
    p.add_argument("--format", choices=("azure", "generic"), type=slug, help="log format (default: detected)")
    p.add_argument("--route", help="route a log without a route column feeds (default: the only online route)")
    p.add_argument("--router", choices=tuple(ROUTERS), help="load balancer (default: the plan's assumption)")
    p.add_argument("--seed", type=int, default=0, help="seed for synthetic arrivals and lengths")
    p.add_argument("--profiles", metavar="DIR", help="profiles directory (default: bundled profiles/)")
    p.add_argument("--json", action="store_true", help="print one JSON list of per-route records")
    p.add_argument("--replica-out", metavar="FILE.csv", help="write the requests the router sent to one replica of "
                   "--route (the one that took the most in the busiest SLO window), at the planned load's times, "
                   "with the simulation's TTFT and TPOT per request: what `measure verify --assigned` replays on "
                   "one GPU")


def _run_simulate(args: argparse.Namespace) -> int:
    from planner.planning.plan_check import format_simulations, simulate_plan

    routes = load_routes(args.routes)
    frame, assumptions = read_plan(args.plan)
    a = assumptions or Assumptions()
    logs = {}
    if args.log:  # replayed as the route's own log would be (planner.traffic.workload.route_requests)
        for name, r in replay_requests(args.log, routes, args.format, args.route).items():
            logs[name] = (r.arrival_s, (r.input_len, r.output_len))
    sims = simulate_plan(routes, plan_rows(frame), load_inputs(args.profiles).curves, logs, seed=args.seed,
                         router=args.router or a.router, attainment=a.slo_attainment)
    if args.replica_out:
        _write_replica_requests(sims, args.route, args.replica_out)
    if args.json:
        print(json.dumps([s.record() for s in sims], allow_nan=False, default=str))
    else:
        print(terminal_safe("\n".join(format_simulations(sims))) or "no planned route to simulate")
    return 0


def _write_replica_requests(sims: list, route: str | None, out: str) -> None:
    from planner.planning.plan_check import replica_requests

    online = [s for s in sims if s.result is not None]
    chosen = [s for s in online if s.route == route] if route else online
    if len(chosen) != 1:
        names = ", ".join(repr(s.route) for s in online) or "none"
        raise InputError(f"--replica-out needs --route naming one planned online route (planned online: {names})")
    frame = replica_requests(chosen[0])
    frame.to_csv(out, index=False)
    print(terminal_safe(f"{len(frame)} requests of replica {int(frame['replica'].iloc[0])} of route "
                        f"{chosen[0].route!r} written to {out}"), file=sys.stderr)


register(Command("traffic", "derive routes (rate, busiest-hour peak_to_mean, burstiness, lengths) from a request "
                 "log, and print their burst descriptors", _traffic_arguments, _run_traffic))
register(Command("simulate", "simulate a plan's fleets: SLO attainment and latency percentiles",
                 _simulate_arguments, _run_simulate))

# ---------------------------------------------------------------- deploy

def _deploy_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", required=True, help="plan CSV (written by `plan`)")
    p.add_argument("--route", help="deploy this route only (default: every planned route the format serves)")
    p.add_argument("--format", required=True, choices=deploy.FORMATS, type=slug,
                   help="vllm: `vllm serve` script; trtllm: `trtllm-serve` script + options YAML (and the engine "
                   "build for 0.x); k8s: Deployment + Service (+ HPA with --min-replicas)")
    p.add_argument("--out", metavar="DIR", help="write the files here (default: print them)")
    p.add_argument("--model-path", help="what the server loads (hub id or checkpoint dir; default: the model's "
                   "Hugging Face repo of its bundled config, fleetfacts/models/README.md)")
    p.add_argument("--image", help="k8s: container image (default: the engine's official image of the version)")
    p.add_argument("--min-replicas", type=int, help="k8s: the HPA's floor (default: the plan's autoscaled_floor, "
                   "no HPA where autoscaling cannot beat steady); it scales up to the plan's replicas on "
                   f"{deploy.HPA_METRIC} (target: the plan's in_flight_p99 per pod)")


def _deploy_rows(args: argparse.Namespace) -> list[tuple[int, PlanRow]]:
    """(CSV line, row) of the plan rows to deploy; raises InputError when none is."""
    check_plan_file(args.plan)
    plan = plan_rows(load_plan_rows(args.plan))
    rows = [(i + 2 + _comment_lines(args.plan), r) for i, r in enumerate(plan)]
    if args.route:
        rows = [(line, r) for line, r in rows if r.route == args.route]
        if not rows:
            raise InputError(f"{args.plan}: no route {args.route!r} (routes: {', '.join(r.route for r in plan)})")
        return rows
    wanted = [(line, r) for line, r in rows if r.ok and (args.format == "k8s" or r.engine == args.format)]
    if not wanted:
        raise InputError(f"{args.plan}: no planned route runs on {args.format}")
    return wanted


def _comment_lines(path: str) -> int:
    """Leading '#' lines of a plan file (its assumptions line, where it has one), to number CSV lines."""
    count = 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.startswith("#"):
                break
            count += 1
    return count


def engine_settings(profile: str) -> deploy.EngineSettings:
    """The settings recorded in the env.json beside the first of a plan row's profile files that has one."""
    for item in (part.strip() for part in profile.split(";") if part.strip()):
        path = Path(item) if Path(item).is_absolute() else BUNDLED_PROFILES_DIR.parent / item
        env = path.parent / "env.json"
        if env.is_file():
            try:
                data = json.loads(env.read_text(encoding="utf-8"))
            except json.JSONDecodeError as err:
                raise InputError(f"{env}: not valid JSON ({err.msg})") from None
            return deploy.EngineSettings.from_env(data, str(env.relative_to(BUNDLED_PROFILES_DIR.parent))
                                                  if env.is_relative_to(BUNDLED_PROFILES_DIR.parent) else str(env))
    return deploy.EngineSettings.none_recorded(profile)


def _run_deploy(args: argparse.Namespace) -> int:
    files = []
    _, assumptions = read_plan(args.plan)
    router = (assumptions or Assumptions()).router
    names = deploy.object_names(r.route for r in plan_rows(load_plan_rows(args.plan)))
    for line, row in _deploy_rows(args):
        target = deploy.Target.from_row(row, args.plan, line, router, names[row.route])
        files += deploy.deployment_files(args.format, target, engine_settings(target.profile), args.model_path,
                                         args.image, args.min_replicas)
    if not args.out:
        print("\n".join(f"# ==> {f.name} <==\n{f.text}" for f in files), end="")
        return 0
    for path in write_files("--out", args.out, ((f.name, f.text) for f in files)):
        print(terminal_safe(f"wrote {path}"))
    return 0


register(Command("deploy", "launch configs (vllm serve, trtllm-serve, Kubernetes) for a plan's rows",
                 _deploy_arguments, _run_deploy))

# ---------------------------------------------------------------- entry point

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m planner", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress (INFO)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS.values():
        command.add_arguments(sub.add_parser(command.name, help=command.help, description=command.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse, run the subcommand; expected errors print `error: ...` and return 2."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command].run(args)
    except _expected_errors() as err:
        print(f"error: {terminal_safe(err)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except OSError as err:  # a file that cannot be written or read (a full disk, no permission): one line
        where = f"{err.filename}: " if err.filename else ""
        print(f"error: {terminal_safe(where + (err.strerror or str(err)))}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:  # Ctrl-C: outputs are written atomically, so nothing half-written is left
        print(f"interrupted: {args.command} stopped; no output was half-written", file=sys.stderr)
        return EXIT_INTERRUPTED
