#!/usr/bin/env bash
# Installs what the app's browser test needs: Debian's headless Chromium and the Playwright
# Python package (driven with executable_path=/usr/bin/chromium).  Idempotent: does nothing
# when both are already there.  Never runs `playwright install` (it downloads a browser, and the
# closed network refuses it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3

if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  LOG="$(mktemp)"
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium; } \
      >"$LOG" 2>&1; then
    tail -n 40 "$LOG" >&2
    echo "error: could not install chromium with apt-get (log above)" >&2
    exit 2
  fi
  rm -f "$LOG"
fi

if ! "$PY" -c "import playwright" >/dev/null 2>&1; then
  "$PY" -m pip install -q "playwright>=1.45"
fi

echo "browser test setup: $(command -v chromium) ($(chromium --version 2>/dev/null || echo '?')), playwright $("$PY" -c 'import importlib.metadata as m; print(m.version("playwright"))')"
