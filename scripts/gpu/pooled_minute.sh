#!/usr/bin/env bash
# One fleet window replayed replica by replica on the lent GPU (device tool), from the repo root, after vLLM was
# staged into /tmp/site (../shared/gpu recipe): the server `planner deploy --format vllm` wrote for the route
# (serve_lib.sh's start_server), then `measure verify --assigned` on each replica's file of
# `planner simulate --replica-out DIR/replica-{replica}.csv`, each replaying the same window (--window at:START:SECONDS,
# which simulate printed), recorded to one file that scripts/gpu/pooled_window.py pools.
#   [ONLY="0 1 2"] bash scripts/gpu/pooled_minute.sh NAME DEPLOY_SCRIPT PLAN ROUTES ROUTE DIR WINDOW BUDGET_S
# ONLY: these replicas' files (a call of 600 s holds about three replays of a minute after the server's start).
# $OUT gets NAME.log, NAME.jsonl (one record per replica), NAME-server.log, NAME-smi.csv.
set -uo pipefail
source "$(dirname "$0")/serve_lib.sh"
name=$1 script=$2 plan=$3 routes=$4 route=$5 dir=$6 window=$7 budget=$8
[ -f "$script" ] || { echo "no deploy script $script: run planner deploy first" >&2; exit 2; }
start=$(date +%s); left() { echo $(( budget - ($(date +%s) - start) )); }
mkdir -p "$OUT" /tmp/pm
log="$OUT/$name.log"
: > "$log"
gpu_setup "$log" "$OUT/$name-smi.csv"
start_server "$script" "/tmp/pm/$name.sh" "$OUT/$name-server.log" "$log" || { kill $smi; exit 3; }
for k in ${ONLY:-$(ls "$dir" | sed -n 's/^replica-\([0-9]*\)\.csv$/\1/p' | sort -n)}; do
  file="$dir/replica-$k.csv"
  [ "$(left)" -lt "${NEED:-100}" ] && { echo "== $file: not started, $(left) s left" >> "$log"; continue; }
  python3 -P -m measure verify --plan "$plan" --routes "$routes" --route "$route" --base-url http://127.0.0.1:8000 \
    --served-model llama-3.1-8b --replicas 1 --assigned "$file" --window "$window" --duration 60 \
    --max-requests 100000 --drain "${DRAIN:-30}" --prompt-format tokens --record "$OUT/$name.jsonl" >> "$log" 2>&1
  echo "== $file rc=$? at $(date -u +%T), $(left) s left" >> "$log"
done
stop_server; kill $smi 2>/dev/null
echo "== call used $(( $(date +%s) - start )) s" >> "$log"
grep -E "^(==|verify|ttft|tpot|windows|SLO)" "$log" | tail -60
