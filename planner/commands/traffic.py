"""`python -m planner traffic` (routes from a request log) and `simulate` (a plan's fleets simulated: SLO verdict and
latency percentiles).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from fleetfacts.errors import InputError
from fleetfacts.requestlog import DEFAULT_BLOCK_SIZE, FORMATS
from fleetfacts.schema import ROUTES, slug, terminal_safe, write_table
from planner.commands.base import Command, refuse_overwriting_inputs, register
from planner.latency import ROUTERS
from planner.planning.catalog import load_inputs
from planner.planning.plan_files import read_plan
from planner.planning.route_table import load_routes
from planner.sizing.assumptions import Assumptions
from planner.sizing.plan_row import plan_rows
from planner.traffic.logs import log_to_routes
from planner.traffic.workload import replay_requests


def _traffic_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log", required=True, metavar="FILE", help="request log: Azure trace CSV, generic CSV/JSONL, "
                   "or Mooncake trace JSONL")
    p.add_argument("--format", choices=FORMATS, type=slug, help="log format (default: detected)")
    p.add_argument("--route", help="route name for a log without a route column (default: the file name)")
    p.add_argument("--model", type=slug, help="model slug for routes whose log names none (default 'unknown')")
    p.add_argument("--out", required=True, metavar="ROUTES.csv", help="where to write the routes CSV")
    p.add_argument("--ttft-slo-ms", type=float, help="TTFT target to write into every route")
    p.add_argument("--tpot-slo-ms", type=float, help="TPOT target to write into every route")
    p.add_argument("--strict", action="store_true", help="stop at the first bad row instead of skipping it")
    p.add_argument("--trace-block-size", type=int, default=DEFAULT_BLOCK_SIZE, metavar="TOKENS",
                   help=f"tokens per hash id of the log's `hash_ids` (default {DEFAULT_BLOCK_SIZE}, as the Mooncake "
                   "traces); for a log with `session_id`, the block size of the reuse report")
    p.add_argument("--cache-tokens", type=int, metavar="TOKENS", help="also report what an LRU prefix cache of "
                   "this many tokens serves (a log with prefix structure)")


def _run_traffic(args: argparse.Namespace) -> int:

    refuse_overwriting_inputs({"--out": args.out}, {"--log": args.log})
    routes, lines = log_to_routes(args.log, args.format, args.route, args.strict, args.model,
                                  args.trace_block_size, args.cache_tokens,
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
    p.add_argument("--format", choices=FORMATS, type=slug, help="log format (default: detected)")
    p.add_argument("--route", help="route a log without a route column feeds (default: the only online route)")
    p.add_argument("--router", choices=tuple(ROUTERS), help="load balancer (default: the plan's assumption)")
    p.add_argument("--seed", type=int, default=0, help="seed for synthetic arrivals and lengths")
    p.add_argument("--profiles", metavar="DIR", help="profiles directory (default: bundled profiles/)")
    p.add_argument("--json", action="store_true", help="print one JSON list of per-route records")
    p.add_argument("--replica-out", metavar="FILE.csv", help="write the requests the router sent to one replica of "
                   "--route (the one that took the most in the busiest SLO window), at the planned load's times, "
                   "with the simulation's TTFT and TPOT per request: what `measure verify --assigned` replays on "
                   "one GPU. A FILE with {replica} in its name: one file per replica, and the fleet window's start "
                   "to replay in each (`--window at:START:SECONDS`), pooled they are the fleet's window")
    p.add_argument("--replica-window", choices=("busiest", "worst"), default="busiest",
                   help="with --replica-out: the replica of the busiest SLO window (most arrivals; default), or of "
                        "the worst one (the plan's worst-window columns), the replica faring worst there; replay "
                        "its minute with `measure verify --assigned FILE --window worst:60`")


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
        _write_replica_requests(sims, args.route, args.replica_out, args.replica_window)
    if args.json:
        print(json.dumps([s.record() for s in sims], allow_nan=False, default=str))
    else:
        print(terminal_safe("\n".join(format_simulations(sims))) or "no planned route to simulate")
    return 0


def _write_replica_requests(sims: list, route: str | None, out: str, window: str = "busiest") -> None:
    from planner.planning.plan_check import fleet_window, replica_requests

    online = [s for s in sims if s.result is not None]
    chosen = [s for s in online if s.route == route] if route else online
    if len(chosen) != 1:
        names = ", ".join(repr(s.route) for s in online) or "none"
        raise InputError(f"--replica-out needs --route naming one planned online route (planned online: {names})")
    sim = chosen[0]
    if "{replica}" not in out:
        frame = replica_requests(sim, window)
        frame.to_csv(out, index=False)
        print(terminal_safe(f"{len(frame)} requests of replica {int(frame['replica'].iloc[0])} of route "
                            f"{sim.route!r} written to {out}"), file=sys.stderr)
        return
    for k in range(sim.result.replicas):
        path = out.replace("{replica}", str(k))
        replica_requests(sim, window, replica=k).to_csv(path, index=False)
    bounds = fleet_window(sim, window)
    where = ("" if bounds is None else f"; the {window} window pooled over the fleet is {bounds[0]:.3f}-{bounds[1]:.3f} "
             f"s: replay it in each with `measure verify --assigned FILE --window at:{bounds[0]:.3f}:"
             f"{bounds[1] - bounds[0]:.3f}`")
    print(terminal_safe(f"the requests of each of route {sim.route!r}'s {sim.result.replicas} replicas written to "
                        f"{out}{where}"), file=sys.stderr)


register(Command("traffic", "derive routes (rate, busiest-hour peak_to_mean, burstiness, lengths) from a request "
                 "log, and print their burst descriptors", _traffic_arguments, _run_traffic))


register(Command("simulate", "simulate a plan's fleets: SLO attainment and latency percentiles",
                 _simulate_arguments, _run_simulate))
