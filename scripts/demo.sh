#!/usr/bin/env bash
# Sets up Fleetplan on a fresh machine and runs the main job on the bundled data:
# a headless plan of the example routes, then the what-if app (open the URL it prints).
#   bash scripts/demo.sh            (the README's first command)
# Environment:
#   FLEETPLAN_NO_APP=1   stop after plan.csv
#   FLEETPLAN_PORT=N     the app's port (default 8501)
#   PYTHON=/path/python  use that interpreter as it is (no .venv, no install)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then
  PY="$PYTHON"
else
  python3 -m venv .venv
  .venv/bin/python -m pip install -q -r requirements.txt
  PY=.venv/bin/python
fi
"$PY" -m planner plan --routes examples/routes.csv --out plan.csv
if [ "${FLEETPLAN_NO_APP:-}" = "1" ]; then exit 0; fi
PORT="${FLEETPLAN_PORT:-8501}"
echo
echo "Fleetplan app: open http://localhost:${PORT} in a browser (Ctrl-C stops it)"
echo
# Headless: on a desktop's first run Streamlit would otherwise stop at its e-mail prompt
# (.streamlit/config.toml says the same for a plain `streamlit run app.py`).
exec "$PY" -m streamlit run app.py --server.headless true --browser.gatherUsageStats false \
  --server.port "$PORT"
