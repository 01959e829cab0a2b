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
code=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH=/tmp/site:$code VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
name=$1 script=$2 plan=$3 routes=$4 budget=$5; shift 5
[ -f "$script" ] || { echo "no deploy script $script: run planner deploy first" >&2; exit 2; }
start=$(date +%s); left() { echo $(( budget - ($(date +%s) - start) )); }
mkdir -p "$OUT" /tmp/rt /tmp/bin
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
  "$script" > "/tmp/rt/$name.sh"
grep '^exec' "/tmp/rt/$name.sh" >> "$log"
bash "/tmp/rt/$name.sh" > "$OUT/$name-server.log" 2>&1 &
server=$! waited=0
until python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)" 2>/dev/null; do
  sleep 2; waited=$((waited + 2))
  if [ $waited -gt 300 ] || ! kill -0 $server 2>/dev/null; then
    echo "== server not ready" | tee -a "$log"; tail -20 "$OUT/$name-server.log"; kill $smi; exit 3
  fi
done
echo "== server ready after ${waited} s, $(left) s left" >> "$log"
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
kill $server 2>/dev/null; pkill -f vllm.entrypoints 2>/dev/null; kill $smi 2>/dev/null
echo "== call used $(( $(date +%s) - start )) s" >> "$log"; grep -E "^(==|verify|ttft|tpot|e2e|output|errors|prefix)" "$log"
