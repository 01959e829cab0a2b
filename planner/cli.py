"""`python -m planner`: plan fleets, predict one shape, validate the fitted curves.

Each subcommand is a small `Command` (its arguments and its run function)
registered in COMMANDS, one module each in planner/commands/; adding one is a
function pair and one `register(...)` line.  Run functions only arrange inputs,
call planner functions and print.
Expected errors (InputError, NoCurveError, ...) become `error: ...` and exit 2; a Ctrl-C or a SIGTERM stops
the command with one line, exit 130 or 143 (planner/stopping.py).
"""

from __future__ import annotations

import argparse
import logging
import sys

from fleetfacts.bundle import version
from fleetfacts.errors import FleetplanError
from fleetfacts.schema import terminal_safe
from planner.commands import deploy, example, fleet, models, plan, predict, traffic, validate  # noqa: F401  (each registers its commands)
from planner.commands.base import COMMANDS, Command, register  # noqa: F401  (the table, for others to extend)
from planner.stopping import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated, stopped_by_signals

# The fleet optimiser, the workbook and plan-diff writer, the process pool and the simulation check are imported
# inside the commands that use them (plan, fleet, simulate): predict, the answer a user waits for most, does not
# load them (issue 23).

# The order `python -m planner -h` lists the subcommands in (others registered later come after).
LISTED = ("plan", "fleet", "predict", "validate", "models", "traffic", "simulate", "deploy", "example")

EXIT_USER_ERROR = 2


def _expected_errors() -> tuple[type[BaseException], ...]:
    """Errors that are the user's to fix: reported in one line, no traceback."""
    return (FleetplanError, FileNotFoundError, IsADirectoryError)


def build_parser(prog: str = "python -m planner") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0].removeprefix("`python -m planner`: "))
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress (INFO)")
    parser.add_argument("--version", action="version", version=f"fleetplan {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in sorted(COMMANDS, key=lambda n: LISTED.index(n) if n in LISTED else len(LISTED)):
        command = COMMANDS[name]
        command.add_arguments(sub.add_parser(command.name, help=command.help, description=command.help))
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m planner") -> int:
    """Parse, run the subcommand; expected errors print `error: ...` and return 2."""
    args = build_parser(prog).parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    with stopped_by_signals(args.command):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        return COMMANDS[args.command].run(args)
    except _expected_errors() as err:
        print(f"error: {terminal_safe(err)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except OSError as err:  # a file that cannot be written or read (a full disk, no permission): one line
        where = f"{err.filename}: " if err.filename else ""
        print(f"error: {terminal_safe(where + (err.strerror or str(err)))}", file=sys.stderr)
        return EXIT_USER_ERROR
    # Outputs are written atomically, so nothing half-written is left; worker processes were stopped on the way.
    except KeyboardInterrupt:  # Ctrl-C
        print(f"interrupted: {args.command} stopped; no output was half-written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:  # SIGTERM: systemd's stop, a CI timeout
        print(f"terminated: {args.command} stopped; no output was half-written", file=sys.stderr)
        return EXIT_TERMINATED
