#!/usr/bin/env bash
# Sets up Fleetplan on a fresh machine and runs the main job on the bundled data:
# a headless plan of the example routes, then the what-if app in the browser.
#   bash scripts/demo.sh            (the README's first command)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q -r requirements.txt
.venv/bin/python -m planner plan --routes examples/routes.csv --out plan.csv
if [ "${FLEETPLAN_NO_APP:-}" = "1" ]; then exit 0; fi
exec .venv/bin/streamlit run app.py --browser.gatherUsageStats false
