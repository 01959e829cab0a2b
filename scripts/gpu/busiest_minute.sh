#!/usr/bin/env bash
# Issue 37 step 2 on the lent GPU (device tool), from the repo root, after vLLM was staged into /tmp/site
# (../shared/gpu recipe): start the server `python -m planner deploy --format vllm` generated for a route, as written
# (model name swapped for the config-only model dir, plus --load-format dummy --seed 0: no weights travel), then
# replay with `python -m measure verify --assigned` the requests the plan's router sent to one replica
# (`python -m planner simulate --replica-out`), only their heaviest 60 s (+30 s lead-in), REPEATS times on the same
# server with new prompts each time (0 prefix-cache hits expected; read from /metrics).  WINDOW=worst:60 replays
# instead the minute the file's predictions put worst (with `planner simulate --replica-window worst`).
#   bash scripts/gpu/busiest_minute.sh NAME DEPLOY_SCRIPT PLAN ROUTES ROUTE ASSIGNED BUDGET_S REPEATS
# $OUT gets NAME.log (verify's tables: per window measured beside predicted), NAME.jsonl (verify --record),
# NAME-server.log, NAME-smi.csv (clocks and power once a second).
set -uo pipefail
source "$(dirname "$0")/serve_lib.sh"
name=$1 script=$2 plan=$3 routes=$4 route=$5 assigned=$6 budget=$7 repeats=$8
[ -f "$script" ] || { echo "no deploy script $script: run planner deploy first" >&2; exit 2; }
start=$(date +%s); left() { echo $(( budget - ($(date +%s) - start) )); }
mkdir -p "$OUT" /tmp/bm
log="$OUT/$name.log"
: > "$log"
gpu_setup "$log" "$OUT/$name-smi.csv"
start_server "$script" "/tmp/bm/$name.sh" "$OUT/$name-server.log" "$log" || { kill $smi; exit 3; }
echo "== $(left) s left" >> "$log"
verify() {  # more verify args
  python3 -P -m measure verify --plan "$plan" --routes "$routes" --route "$route" --base-url http://127.0.0.1:8000 \
    --served-model llama-3.1-8b --replicas 1 --assigned "$assigned" --drain "${DRAIN:-30}" --prompt-format tokens "$@" >> "$log" 2>&1
  echo "== verify $* rc=$? at $(date -u +%T), $(left) s left" >> "$log"
}
[ "${WARMUP:-1}" = 1 ] && verify --duration 5 --max-requests 20   # warm-up (the file's first requests), not recorded
for k in $(seq 1 "$repeats"); do
  [ "$(left)" -lt "${NEED:-130}" ] && { echo "== repeat $k: not started, $(left) s left" >> "$log"; break; }
  verify --window "${WINDOW:-heaviest:60}" --duration 60 --max-requests 100000 --record "$OUT/$name.jsonl"
done
stop_server; kill $smi 2>/dev/null
echo "== call used $(( $(date +%s) - start )) s" >> "$log"
grep -E "^(==|verify|ttft|tpot|windows|SLO|per window|  )" "$log" | tail -60
