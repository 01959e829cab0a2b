#!/usr/bin/env bash
# The long fuzz run of every input format (tests/fuzz): random (not derandomised) examples, many of them.
# CI runs the same suite with FUZZ_EXAMPLES=15 derandomised (scripts/test.sh).  Usage: scripts/fuzz.sh [EXAMPLES]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
FUZZ_EXAMPLES="${1:-500}" FUZZ_RANDOM=1 "$PY" -m pytest -q -p no:cacheprovider tests/fuzz
