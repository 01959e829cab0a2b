"""`python -m planner example --out DIR`: a copy of the bundled examples to plan from and edit.

DIR gets routes.csv, the request log its log column names (traces/, with its attribution) and the example
campaign file of `measure campaign`, so that `plan --routes DIR/routes.csv` runs wherever Fleetplan is installed.
"""

from __future__ import annotations

import argparse
import shutil

from fleetfacts.bundle import EXAMPLES_DIR
from fleetfacts.errors import InputError
from planner.commands.base import Command, register
from planner.outputs import check_output_folder


def _example_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, metavar="DIR", help="folder to copy the examples into (created if "
                   "missing; an example file already there is not replaced)")


def _run_example(args: argparse.Namespace) -> int:
    folder = check_output_folder("--out", args.out)
    names = sorted(p.relative_to(EXAMPLES_DIR) for p in EXAMPLES_DIR.rglob("*") if p.is_file())
    there = [folder / name for name in names if (folder / name).exists()]
    if there:
        raise InputError(f"--out {folder}: already holds {len(there)} of the example files (first {there[0]}); "
                         "refusing to replace them (choose a new folder)")
    shutil.copytree(EXAMPLES_DIR, folder, dirs_exist_ok=True)
    print(f"wrote {len(names)} example files to {folder} (routes: {folder / 'routes.csv'})")
    return 0


register(Command("example", "copy the bundled example routes (and the request log they name) to a folder",
                 _example_arguments, _run_example))
