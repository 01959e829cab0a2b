"""`python -m planner deploy`: launch configs for a plan's rows.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fleetfacts.errors import InputError
from fleetfacts.schema import load_plan_rows, slug, terminal_safe
from planner.commands.base import Command, register
from planner.engine.curves import BUNDLED_PROFILES_DIR
from planner.outputs import write_files
from planner.planning import deploy
from planner.planning.plan_files import check_plan_file, read_plan
from planner.sizing.assumptions import Assumptions
from planner.sizing.plan_row import PlanRow, plan_rows


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
    p.add_argument("--min-replicas", type=int, metavar="N", help="k8s only: the HPA's floor, at least 1 (default: "
                   "the plan's autoscaled_floor, no HPA where autoscaling cannot beat steady); it scales up to the "
                   f"plan's replicas on {deploy.HPA_METRIC} (target: the plan's in_flight_p99 per pod). Online "
                   "routes only, and only where N is below the plan's replicas: a warning names the routes that get "
                   "no HPA")


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


def _check_min_replicas(args: argparse.Namespace) -> None:
    """InputError for a --min-replicas that would be ignored (not k8s) or cannot be an HPA's floor (below 1)."""
    if args.min_replicas is None:
        return
    if args.format != "k8s":
        raise InputError(f"--min-replicas: only with --format k8s (a Kubernetes HPA's floor; --format {args.format} "
                         "writes one server's script)")
    if args.min_replicas < 1:
        raise InputError(f"--min-replicas {args.min_replicas}: must be at least 1 (an HPA keeps one pod or more; "
                         "leave it out for the plan's autoscaled floor)")


def _warn_no_hpa(given: int, targets: list[deploy.Target]) -> None:
    """One line on stderr naming the routes that get no HPA despite --min-replicas, and why."""
    reasons = [reason for t in targets if (reason := deploy.no_hpa_reason(t, given))]
    if reasons:
        print(terminal_safe(f"warning: --min-replicas {given}: no HPA for {', '.join(reasons)}; an HPA scales "
                            "an online route between the floor and the plan's replicas"), file=sys.stderr)


def _run_deploy(args: argparse.Namespace) -> int:
    _check_min_replicas(args)
    files, targets = [], []
    _, assumptions = read_plan(args.plan)
    router = (assumptions or Assumptions()).router
    names = deploy.object_names(r.route for r in plan_rows(load_plan_rows(args.plan)))
    for line, row in _deploy_rows(args):
        target = deploy.Target.from_row(row, args.plan, line, router, names[row.route])
        targets.append(target)
        files += deploy.deployment_files(args.format, target, engine_settings(target.profile), args.model_path,
                                         args.image, args.min_replicas)
    if args.min_replicas is not None:
        _warn_no_hpa(args.min_replicas, targets)
    if not args.out:
        print("\n".join(f"# ==> {f.name} <==\n{f.text}" for f in files), end="")
        return 0
    for path in write_files("--out", args.out, ((f.name, f.text) for f in files)):
        print(terminal_safe(f"wrote {path}"))
    return 0


register(Command("deploy", "launch configs (vllm serve, trtllm-serve, Kubernetes) for a plan's rows",
                 _deploy_arguments, _run_deploy))
