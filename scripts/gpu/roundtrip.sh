#!/usr/bin/env bash
# Issue 22's round trip on the lent H200 (device tool), from the repo root, after vLLM was staged into /tmp/site
# (../shared/gpu recipe): start the command `python -m planner deploy --format vllm` generated, as written
# (its model name swapped for the config-only model dir, plus --load-format dummy: no weights travel), then
# `python -m measure verify` each route against it at several multiples of its planned per-replica share.
#   bash scripts/gpu/roundtrip.sh NAME DEPLOY_SCRIPT PLAN ROUTES BUDGET_S "ROUTE SCALE DURATION_S" ...
# $OUT gets NAME.log (this script and verify's tables), NAME.jsonl (verify --record: verdicts, every request's
# latencies, the server's /metrics deltas incl. prefix-cache hits), NAME-server.log, NAME-smi.csv (clocks, power
# once a second) and NAME-profile.csv (the measured profile rows verify appends).
set -uo pipefail
source "$(dirname "$0")/serve_lib.sh"
name=$1 script=$2 plan=$3 routes=$4 budget=$5; shift 5
[ -f "$script" ] || { echo "no deploy script $script: run planner deploy first" >&2; exit 2; }
start=$(date +%s); left() { echo $(( budget - ($(date +%s) - start) )); }
mkdir -p "$OUT" /tmp/rt
log="$OUT/$name.log"
: > "$log"
gpu_setup "$log" "$OUT/$name-smi.csv"
start_server "$script" "/tmp/rt/$name.sh" "$OUT/$name-server.log" "$log" || { kill $smi; exit 3; }
echo "== $(left) s left" >> "$log"
verify() {  # ROUTE SCALE DURATION [more verify args]
  python3 -P -m measure verify --plan "$plan" --routes "$routes" --route "$1" --base-url http://127.0.0.1:8000 \
    --served-model llama-3.1-8b --scale "$2" --duration "$3" --drain 30 --max-requests 5000 "${@:4}" >> "$log" 2>&1
  echo "== verify $1 x$2 ${3}s rc=$? at $(date -u +%T), $(left) s left" >> "$log"
}
verify "$(echo "$1" | cut -d' ' -f1)" 0.5 4 --out /tmp/rt/warmup   # warm-up, not recorded
for run in "$@"; do
  read -r route scale duration <<< "$run"
  [ "$(left)" -lt $((duration + 45)) ] && { echo "== $route x$scale: not started, $(left) s left" >> "$log"; continue; }
  verify "$route" "$scale" "$duration" --record "$OUT/$name.jsonl" --out "/tmp/rt/prof-$name"
done
cp "/tmp/rt/prof-$name/profile.csv" "$OUT/$name-profile.csv" 2>/dev/null
stop_server; kill $smi 2>/dev/null
echo "== call used $(( $(date +%s) - start )) s" >> "$log"; grep -E "^(==|verify|ttft|tpot|e2e|output|errors|prefix)" "$log"
