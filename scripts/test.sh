#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine and runs it.
#   bash scripts/test.sh            (the README's test command)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r requirements-dev.txt
# A real OpenAI-compatible server (transformers serve, CPU) for the load-generator tests,
# and Debian's Chromium for the browser test of the app.
[ -f .ci/setup_test_server.sh ] && bash .ci/setup_test_server.sh
[ -f .ci/setup_browser.sh ] && bash .ci/setup_browser.sh
.venv/bin/ruff check .
.venv/bin/lint-imports       # [tool.importlinter] in pyproject.toml: planner's layers; measure and planner meet only in fleetfacts
.venv/bin/mypy                # [tool.mypy]: fleetfacts/, measure/, planner/
# One worker per core, at most 4 (pytest-xdist; each worker fits the bundled data once); idle workers take
# queued tests from busy ones. `bash scripts/test.sh -n 0` runs in this one process.
.venv/bin/python -m pytest -q -n auto --maxprocesses 4 --dist worksteal --durations=25 "$@"   # the 25 slowest tests in the log
