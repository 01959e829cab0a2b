"""What every subcommand of `python -m planner` shares: the Command table, the flags of a plan's assumptions and
inputs, the output-path check and the console.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from fleetfacts.errors import InputError
from fleetfacts.schema import slug, terminal_safe
from planner.engine.transfer_check import TRANSFER_MODES
from planner.outputs import check_output
from planner.planning.plan_files import ASSUMPTIONS_SUFFIX, assumptions_path, check_plan_file, read_assumptions
from planner.sizing.assumptions import Assumptions

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


def assumption_arguments(p: argparse.ArgumentParser, pricing_help: str) -> None:
    """The flags that set a plan's assumptions and options (plan and fleet)."""
    p.add_argument("--provider", type=slug, help="price GPUs from this provider only (default: cheapest)")
    p.add_argument("--pricing-type", type=slug, choices=("on-demand", "reserved", "spot"), help=pricing_help)
    p.add_argument("--engineer-rate", type=float, metavar="USD", help="loaded engineering cost, USD per hour")
    p.add_argument("--scale-up-s", type=float, metavar="S", help="seconds from a load rise until an added replica "
                   "serves, for the autoscaled option (default 160: 30 s detection + a 130 s vLLM start; 82-116 s recorded on the H200)")
    p.add_argument("--host-kv-gib", type=float, metavar="GIB", help="routes with prefix structure are also priced "
                   "with a host-memory KV tier of GIB GiB per replica (vLLM --kv-offloading-size), kept where it is "
                   "cheaper; measured once, on an H100 (default 0: none)")
    p.add_argument("--assumptions-from", metavar="PLAN.csv", help="start from the assumptions of a saved plan")
    p.add_argument("--allow-prerelease", action="store_true", help="also recommend pre-release and development "
                   "engine builds (e.g. 0.20+main; not recommended by default)")
    p.add_argument("--transfer", choices=TRANSFER_MODES, default="auto",
                   help="transferred (unprofiled) options: auto = for routes whose model has no profile (default), "
                   "all = for every engine/GPU/precision/TP no profile covers, off = none")
    p.add_argument("--allow-unverified-latency", action="store_true",
                   help="let options whose TTFT/TPOT rest on no latency measurement win online routes on cost "
                        "(by default they rank behind options with measured or transferred latency)")


def input_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profiles", metavar="DIR", help="profiles directory (default: bundled profiles/)")
    p.add_argument("--prices", metavar="F", help="prices CSV (default: planner/data/prices.csv)")
    p.add_argument("--ops", metavar="F", help="engine-ops CSV (default: planner/data/engine_ops.csv)")


def assumptions_from_args(args: argparse.Namespace):
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
    if args.host_kv_gib is not None:
        changes["host_kv_gib"] = args.host_kv_gib
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


def print_lines(lines: list[str]) -> None:
    """Print lines that carry user strings (route names): terminal controls shown as escapes, no markup."""
    console = terminal_console()
    for line in lines:
        console.print(terminal_safe(line), markup=False, highlight=False)


def terminal_console():

    # Piped output (tests, logs) gets the width of a review terminal instead of wrapping at 80 columns.
    return Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH, no_color=True)


def num(value: object, fmt: str = "{:g}") -> str:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return "" if not math.isfinite(number) else fmt.format(number)
