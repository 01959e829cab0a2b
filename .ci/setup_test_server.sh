#!/usr/bin/env bash
# Installs a real OpenAI-compatible server for the load-generator tests: `transformers serve` (CPU)
# into its own venv, so its pins (torch 2.13.0 CPU, transformers 5.24.0) never touch the project venv.
# Idempotent: does nothing when the venv already has both at the right versions.
#   bash .ci/setup_test_server.sh            (venv at $FLEETPLAN_SERVER_VENV, default /tmp/srv)
set -euo pipefail
VENV="${FLEETPLAN_SERVER_VENV:-/tmp/srv}"
TORCH_VERSION="2.13.0"
TRANSFORMERS_VERSION="5.24.0"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "$TORCH_VERSION" "$TRANSFORMERS_VERSION" <<'PY' 2>/dev/null
import sys
import torch, transformers, tokenizers, fastapi, uvicorn  # noqa: F401  (what `transformers serve` imports)
ok = torch.__version__.split("+")[0] == sys.argv[1] and transformers.__version__ == sys.argv[2]
sys.exit(0 if ok else 1)
PY
then
  echo "test server venv $VENV is ready (torch $TORCH_VERSION, transformers $TRANSFORMERS_VERSION)"
  exit 0
fi

python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION" "transformers[serving]==$TRANSFORMERS_VERSION"
"$VENV/bin/python" -c "import torch, transformers; print('test server venv ready:', torch.__version__, transformers.__version__)"
