"""`python -m planner fleet`: the cheapest fleet for all routes together.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fleetfacts.errors import InputError
from fleetfacts.schema import atomic_write_all, slug
from planner.commands.base import (
    Command,
    assumption_arguments,
    assumptions_from_args,
    input_arguments,
    print_lines,
    refuse_overwriting_inputs,
    register,
)
from planner.planning.catalog import load_inputs
from planner.planning.fleet_size import MAX_FLEET_ROUTES, check_fleet_size
from planner.planning.route_table import load_routes


def _fleet_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--routes", required=True, help=f"routes CSV (schema ROUTES), at most {MAX_FLEET_ROUTES} routes "
                   "(more: split the file, or plan route by route with `plan`)")
    p.add_argument("--out", required=True, help="where to write the fleet CSV (one row per deployment, schema "
                   "FLEET); its summary goes beside it in <name>.summary.json")
    input_arguments(p)
    assumption_arguments(p, "with --no-pricing-mix (and for the route-by-route plan): which price rows "
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
    from planner.planning.fleet import fleet_csv_text, format_fleet, make_fleet
    from planner.planning.fleet_units import Levers
    summary_path = Path(args.out).with_name(Path(args.out).stem + ".summary.json")
    refuse_overwriting_inputs({"--out": args.out, "--out (summary)": summary_path},
                              {"--routes": args.routes, "--prices": args.prices, "--ops": args.ops,
                               "--assumptions-from": args.assumptions_from})
    quotas = parse_quotas(args.quota)
    assumptions = assumptions_from_args(args)
    levers = Levers(share=not args.no_share, mix=args.mix, autoscale=args.autoscale, pricing=not args.no_pricing_mix)
    routes = load_routes(args.routes)
    check_fleet_size(len(routes), args.routes)  # before the curves are fitted
    catalog = load_inputs(args.profiles, args.prices, args.ops, transfer=args.transfer, models=routes["model"])
    result = make_fleet(routes, catalog, assumptions, levers, quotas, check=not args.no_simulate)
    atomic_write_all([(args.out, fleet_csv_text(result).encode("utf-8")),
                      (summary_path, (json.dumps(result.summary, indent=2) + "\n").encode("utf-8"))])
    if args.json:
        print(json.dumps(result.summary))
        return 0
    print_lines(format_fleet(result))
    print(f"fleet written to {args.out}, {summary_path}")
    return 0


register(Command("fleet", "the cheapest fleet for all routes together (shared deployments, GPU mix, hourly "
                 "scaling, pricing mix); writes a fleet CSV", _fleet_arguments, _run_fleet))
