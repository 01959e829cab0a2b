#!/usr/bin/env bash
# Prefix reuse on the lent GPU (device tool), from the repo root, after vLLM was staged into /tmp/site
# (../shared/gpu recipe): for each variant, start the server `python -m planner deploy --format vllm` wrote for a
# route (serve_lib.sh's start_server, plus the variant's server args), then `python -m measure verify` replays the
# route's prefix-structured log (prompts share tokens where its hash ids are equal) with the variant's verify args;
# each request's cached tokens come from usage.
#   bash scripts/gpu/prefix_replay.sh NAME DEPLOY_SCRIPT PLAN ROUTES ROUTE BUDGET_S "LABEL|SERVER ARGS|VERIFY ARGS" ...
# $OUT gets NAME.log (verify's tables), NAME.jsonl (verify --record: per request prompt and cached tokens),
# NAME-LABEL-server.log, NAME-smi.csv (clocks and power once a second).
set -uo pipefail
source "$(dirname "$0")/serve_lib.sh"
name=$1 script=$2 plan=$3 routes=$4 route=$5 budget=$6; shift 6
[ -f "$script" ] || { echo "no deploy script $script: run planner deploy first" >&2; exit 2; }
start=$(date +%s); left() { echo $(( budget - ($(date +%s) - start) )); }
mkdir -p "$OUT" /tmp/pr; log="$OUT/$name.log"
gpu_setup "$log" "$OUT/$name-smi.csv"
for variant in "$@"; do
  IFS='|' read -r label server_args verify_args <<< "$variant"
  [ "$(left)" -lt "${NEED:-200}" ] && { echo "== $label: not started, $(left) s left" >> "$log"; continue; }
  echo "== $label" >> "$log"
  # shellcheck disable=SC2086  # the variant's args are words
  start_server "$script" "/tmp/pr/$name-$label.sh" "$OUT/$name-$label-server.log" "$log" $server_args || continue
  # shellcheck disable=SC2086
  python3 -P -m measure verify --plan "$plan" --routes "$routes" --route "$route" --base-url http://127.0.0.1:8000 \
    --served-model llama-3.1-8b --replicas 1 --prompt-format tokens --max-requests 100000 --drain 60 \
    --record "$OUT/$name.jsonl" --out "/tmp/pr/prof-$name-$label" $verify_args >> "$log" 2>&1
  echo "== $label: verify rc=$? at $(date -u +%T), $(left) s left" >> "$log"
  stop_server
done
kill $smi 2>/dev/null
echo "== call used $(( $(date +%s) - start )) s" >> "$log"
grep -E "^(==|verify|ttft|tpot|prefix|SLO|windows)" "$log" | tail -40
