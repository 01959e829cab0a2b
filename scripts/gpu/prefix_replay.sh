#!/usr/bin/env bash
# Prefix reuse on the lent GPU (device tool), from the repo root, after vLLM was staged into /tmp/site
# (../shared/gpu recipe): for each variant, start the server `python -m planner deploy --format vllm` wrote for a
# route (model swapped for the config-only model dir, plus --load-format dummy --seed 0
# --enable-prompt-tokens-details and the variant's server args), then `python -m measure verify` replays the
# route's prefix-structured log (prompts share tokens where its hash ids are equal) with the variant's verify args;
# each request's cached tokens come from usage.
#   bash scripts/gpu/prefix_replay.sh NAME DEPLOY_SCRIPT PLAN ROUTES ROUTE BUDGET_S "LABEL|SERVER ARGS|VERIFY ARGS" ...
# $OUT gets NAME.log (verify's tables), NAME.jsonl (verify --record: per request prompt and cached tokens),
# NAME-LABEL-server.log, NAME-smi.csv (clocks and power once a second).
set -uo pipefail
code=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH=/tmp/site:$code VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
name=$1 script=$2 plan=$3 routes=$4 route=$5 budget=$6; shift 6
[ -f "$script" ] || { echo "no deploy script $script: run planner deploy first" >&2; exit 2; }
start=$(date +%s); left() { echo $(( budget - ($(date +%s) - start) )); }
mkdir -p "$OUT" /tmp/pr /tmp/bin
log="$OUT/$name.log"
echo "== $name on $(hostname) boot $(cat /proc/sys/kernel/random/boot_id) at $(date -u +%FT%T)" >> "$log"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv >> "$log" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,clocks_event_reasons.active \
  --format=csv -lms 1000 >> "$OUT/$name-smi.csv" 2>&1 &
smi=$!
if [ -d .gpuwheels ] && ! python3 -c "import sys; sys.path.insert(0, '/tmp/site'); import prometheus_fastapi_instrumentator" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpuwheels/*.whl >> "$log" 2>&1
fi
[ -f .tok/llama-3.1-8b/tokenizer.json ] || python3 -P -m measure tokenizer --model-dir profiles/models/llama-3.1-8b \
  --out .tok/llama-3.1-8b >> "$log" 2>&1
printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > /tmp/bin/vllm && chmod +x /tmp/bin/vllm
export PATH=/tmp/bin:$PATH
for variant in "$@"; do
  IFS='|' read -r label server_args verify_args <<< "$variant"
  [ "$(left)" -lt "${NEED:-200}" ] && { echo "== $label: not started, $(left) s left" >> "$log"; continue; }
  sed -e "/^exec vllm serve/ s#serve [^ ]*#serve $PWD/.tok/llama-3.1-8b#" \
      -e "/^exec vllm serve/ s#\$# --seed 0 --load-format dummy $server_args#" -e "/^exec vllm serve/ {/enable-prompt-tokens-details/! s#\$# --enable-prompt-tokens-details#}" \
      "$script" > "/tmp/pr/$name-$label.sh"
  echo "== $label: $(grep '^exec' "/tmp/pr/$name-$label.sh")" >> "$log"
  bash "/tmp/pr/$name-$label.sh" > "$OUT/$name-$label-server.log" 2>&1 &
  server=$! waited=0
  until python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)" 2>/dev/null; do
    sleep 2; waited=$((waited + 2))
    if [ $waited -gt 300 ] || ! kill -0 $server 2>/dev/null; then
      echo "== $label: server not ready" | tee -a "$log"; tail -20 "$OUT/$name-$label-server.log"; break
    fi
  done
  echo "== $label: server ready after ${waited} s, $(left) s left; $(grep -m1 -E 'KV cache size' "$OUT/$name-$label-server.log")" >> "$log"
  # shellcheck disable=SC2086  # the variant's verify args are words
  python3 -P -m measure verify --plan "$plan" --routes "$routes" --route "$route" --base-url http://127.0.0.1:8000 \
    --served-model llama-3.1-8b --replicas 1 --prompt-format tokens --max-requests 100000 --drain 60 \
    --record "$OUT/$name.jsonl" --out "/tmp/pr/prof-$name-$label" $verify_args >> "$log" 2>&1
  echo "== $label: verify rc=$? at $(date -u +%T), $(left) s left" >> "$log"
  kill $server 2>/dev/null; pkill -f vllm.entrypoints 2>/dev/null; sleep 5
done
kill $smi 2>/dev/null
echo "== call used $(( $(date +%s) - start )) s" >> "$log"
grep -E "^(==|verify|ttft|tpot|prefix|SLO|windows)" "$log" | tail -40
