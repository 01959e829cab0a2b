#!/usr/bin/env bash
# Issue 37 step 2 on the lent GPU (device tool), from the repo root, after vLLM was staged into /tmp/site
# (../shared/gpu recipe): start the server `python -m planner deploy --format vllm` generated for a route, as written
# (model name swapped for the config-only model dir, plus --load-format dummy --seed 0: no weights travel), then
# replay with `python -m measure verify --assigned` the requests the plan's router sent to one replica
# (`python -m planner simulate --replica-out`), only their heaviest 60 s (+30 s lead-in), REPEATS times on the same
# server with new prompts each time (0 prefix-cache hits expected; read from /metrics).
#   bash scripts/gpu/busiest_minute.sh NAME DEPLOY_SCRIPT PLAN ROUTES ROUTE ASSIGNED BUDGET_S REPEATS
# $OUT gets NAME.log (verify's tables: per window measured beside predicted), NAME.jsonl (verify --record),
# NAME-server.log, NAME-smi.csv (clocks and power once a second).
set -uo pipefail
code=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH=/tmp/site:$code VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
name=$1 script=$2 plan=$3 routes=$4 route=$5 assigned=$6 budget=$7 repeats=$8
[ -f "$script" ] || { echo "no deploy script $script: run planner deploy first" >&2; exit 2; }
start=$(date +%s); left() { echo $(( budget - ($(date +%s) - start) )); }
mkdir -p "$OUT" /tmp/bm /tmp/bin
log="$OUT/$name.log"
echo "== $name on $(hostname) boot $(cat /proc/sys/kernel/random/boot_id) at $(date -u +%FT%T)" > "$log"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv >> "$log" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,clocks_event_reasons.active \
  --format=csv -lms 1000 > "$OUT/$name-smi.csv" 2>&1 &
smi=$!
if [ -d .gpuwheels ] && ! python3 -c "import prometheus_fastapi_instrumentator" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpuwheels/*.whl >> "$log" 2>&1
fi
[ -f .tok/llama-3.1-8b/tokenizer.json ] || python3 -P -m measure tokenizer --model-dir profiles/models/llama-3.1-8b \
  --out .tok/llama-3.1-8b >> "$log" 2>&1
printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > /tmp/bin/vllm && chmod +x /tmp/bin/vllm
export PATH=/tmp/bin:$PATH
sed -e "/^exec vllm serve/ s#serve [^ ]*#serve $PWD/.tok/llama-3.1-8b#" -e '/^exec vllm serve/ s#$# --seed 0 --load-format dummy#' \
  "$script" > "/tmp/bm/$name.sh"
grep '^exec' "/tmp/bm/$name.sh" >> "$log"
bash "/tmp/bm/$name.sh" > "$OUT/$name-server.log" 2>&1 &
server=$! waited=0
until python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)" 2>/dev/null; do
  sleep 2; waited=$((waited + 2))
  if [ $waited -gt 300 ] || ! kill -0 $server 2>/dev/null; then
    echo "== server not ready" | tee -a "$log"; tail -20 "$OUT/$name-server.log"; kill $smi; exit 3
  fi
done
echo "== server ready after ${waited} s, $(left) s left" >> "$log"
verify() {  # more verify args
  python3 -P -m measure verify --plan "$plan" --routes "$routes" --route "$route" --base-url http://127.0.0.1:8000 \
    --served-model llama-3.1-8b --replicas 1 --assigned "$assigned" --drain "${DRAIN:-30}" --prompt-format tokens "$@" >> "$log" 2>&1
  echo "== verify $* rc=$? at $(date -u +%T), $(left) s left" >> "$log"
}
[ "${WARMUP:-1}" = 1 ] && verify --duration 5 --max-requests 20   # warm-up (the file's first requests), not recorded
for k in $(seq 1 "$repeats"); do
  [ "$(left)" -lt "${NEED:-130}" ] && { echo "== repeat $k: not started, $(left) s left" >> "$log"; break; }
  verify --window heaviest:60 --duration 60 --max-requests 100000 --record "$OUT/$name.jsonl"
done
kill $server 2>/dev/null; pkill -f vllm.entrypoints 2>/dev/null; kill $smi 2>/dev/null
echo "== call used $(( $(date +%s) - start )) s" >> "$log"
grep -E "^(==|verify|ttft|tpot|windows|SLO|per window|  )" "$log" | tail -60
