"""`fleetplan` (the console script of `pip install .`): the planner's subcommands, as `python -m planner` has them,
plus `fleetplan app`, which starts the what-if app (app.py) from wherever Fleetplan is installed.

`app` lives here, not in planner/, because starting Streamlit is a subprocess and planner/ is pure.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from fleetfacts.bundle import APP
from planner.__main__ import main as planner_main  # planner.__main__ sets its BLAS thread limits before numpy loads
from planner.commands.base import Command, register

DEFAULT_PORT = 8501  # Streamlit's own default
# As scripts/demo.sh starts it: no first-run e-mail prompt, no usage statistics (.streamlit/config.toml says the
# same for a checkout, but Streamlit reads that file from the current folder, not from beside app.py).
STREAMLIT_FLAGS = ("--server.headless", "true", "--browser.gatherUsageStats", "false")


def app_command(port: int) -> list[str]:
    """The command line that serves the bundled app.py on `port`."""
    return [sys.executable, "-m", "streamlit", "run", str(APP), *STREAMLIT_FLAGS, "--server.port", str(port)]


def _app_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the app's port (default {DEFAULT_PORT})")


def _run_app(args: argparse.Namespace) -> int:
    print(f"Fleetplan app: open http://localhost:{args.port} in a browser (Ctrl-C stops it)", flush=True)
    return subprocess.call(app_command(args.port))


register(Command("app", "start the what-if app (Streamlit, app.py) and print its address", _app_arguments, _run_app))


def main() -> int:
    """`fleetplan ARGS`: as `python -m planner ARGS`, plus `app`."""
    return planner_main(prog="fleetplan")
