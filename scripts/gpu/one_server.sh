#!/usr/bin/env bash
# One `vllm serve` for both of the fifteenth session's checks, when device time is short (RUNS.md): the long-prompt
# route's deploy script (max_model_len 120,399, prefix caching on, as deployed), then (1) the bundled prefix
# example replayed 10x faster with its sharing, cache cold at the start, and (2) the long-prompt plan's busiest
# minute for one replica (`verify --assigned --window heaviest:60`).
#   bash scripts/gpu/one_server.sh BUDGET_S [PREFIX_DURATION_S]
set -uo pipefail
source "$(dirname "$0")/serve_lib.sh"
budget=${1:-330} pdur=${2:-60}; start=$(date +%s); left() { echo $(( budget - ($(date +%s) - start) )); }
p=scripts/gpu/inputs/prefix-replay l=scripts/gpu/inputs/long-replay
mkdir -p "$OUT" /tmp/os; log="$OUT/one-server.log"
gpu_setup "$log" "$OUT/one-server-smi.csv"
start_server $l/rag-long.vllm.sh /tmp/os/serve.sh "$OUT/one-server-server.log" "$log" || { kill $smi; exit 3; }
echo "== $(left) s left" >> "$log"
python3 -P -m measure verify --plan $p/plan.csv --routes $p/routes.csv --route chat-prefix \
  --base-url http://127.0.0.1:8000 --served-model llama-3.1-8b --replicas 1 --prompt-format tokens \
  --max-requests 100000 --drain 20 --scale 10 --duration "$pdur" --record "$OUT/prefix.jsonl" --out /tmp/os/prof-prefix >> "$log" 2>&1
echo "== prefix verify rc=$? at $(date -u +%T), $(left) s left" >> "$log"
if [ "$(left)" -gt 110 ]; then
  python3 -P -m measure verify --plan $l/plan.csv --routes $l/routes.csv --route rag-long \
    --base-url http://127.0.0.1:8000 --served-model llama-3.1-8b --replicas 1 --assigned $l/assigned.csv \
    --drain "$(( $(left) - 100 < 30 ? $(left) - 100 : 30 ))" --prompt-format tokens --window heaviest:60 --duration 60 \
    --max-requests 100000 --record "$OUT/long-replay.jsonl" --out /tmp/os/prof-long >> "$log" 2>&1
  echo "== long verify rc=$? at $(date -u +%T), $(left) s left" >> "$log"
else
  echo "== long verify not started, $(left) s left" >> "$log"
fi
stop_server; kill $smi 2>/dev/null
echo "== call used $(( $(date +%s) - start )) s" >> "$log"
grep -E "^(==|verify|ttft|tpot|prefix|SLO|windows|per window|  )" "$log" | tail -40
