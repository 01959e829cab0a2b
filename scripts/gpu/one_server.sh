#!/usr/bin/env bash
# One `vllm serve` for both of the fifteenth session's checks, when device time is short (RUNS.md): the long-prompt
# route's deploy script (max_model_len 120,399, prefix caching on, as deployed) with --enable-prompt-tokens-details,
# then (1) the bundled prefix example replayed 10x faster with its sharing, cache cold at the start, and (2) the
# long-prompt plan's busiest minute for one replica (`verify --assigned --window heaviest:60`).
#   bash scripts/gpu/one_server.sh BUDGET_S [PREFIX_DURATION_S]
set -uo pipefail
code=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH=/tmp/site:$code VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
budget=${1:-330} pdur=${2:-60}; start=$(date +%s); left() { echo $(( budget - ($(date +%s) - start) )); }
p=scripts/gpu/inputs/prefix-replay l=scripts/gpu/inputs/long-replay
mkdir -p "$OUT" /tmp/os /tmp/bin; log="$OUT/one-server.log"
echo "== one_server on $(hostname) boot $(cat /proc/sys/kernel/random/boot_id) at $(date -u +%FT%T)" > "$log"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv >> "$log" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,clocks_event_reasons.active \
  --format=csv -lms 1000 > "$OUT/one-server-smi.csv" 2>&1 &
smi=$!
if [ -d .gpuwheels ] && ! python3 -c "import sys; sys.path.insert(0, '/tmp/site'); import prometheus_fastapi_instrumentator" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpuwheels/*.whl >> "$log" 2>&1
fi
[ -f .tok/llama-3.1-8b/tokenizer.json ] || python3 -P -m measure tokenizer --model-dir profiles/models/llama-3.1-8b \
  --out .tok/llama-3.1-8b >> "$log" 2>&1
printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > /tmp/bin/vllm && chmod +x /tmp/bin/vllm
export PATH=/tmp/bin:$PATH
sed -e "/^exec vllm serve/ s#serve [^ ]*#serve $PWD/.tok/llama-3.1-8b#" \
    -e "/^exec vllm serve/ s#\$# --seed 0 --load-format dummy#" \
    -e "/^exec vllm serve/ {/enable-prompt-tokens-details/! s#\$# --enable-prompt-tokens-details#}" \
    $l/rag-long.vllm.sh > /tmp/os/serve.sh
grep '^exec' /tmp/os/serve.sh >> "$log"
bash /tmp/os/serve.sh > "$OUT/one-server-server.log" 2>&1 &
server=$! waited=0
until python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)" 2>/dev/null; do
  sleep 2; waited=$((waited + 2))
  if [ $waited -gt 300 ] || ! kill -0 $server 2>/dev/null; then
    echo "== server not ready" | tee -a "$log"; tail -20 "$OUT/one-server-server.log"; kill $smi; exit 3
  fi
done
echo "== server ready after ${waited} s, $(left) s left; $(grep -m1 -E 'KV cache size' "$OUT/one-server-server.log")" >> "$log"
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
kill $server 2>/dev/null; pkill -f vllm.entrypoints 2>/dev/null; kill $smi 2>/dev/null
echo "== call used $(( $(date +%s) - start )) s" >> "$log"
grep -E "^(==|verify|ttft|tpot|prefix|SLO|windows|per window|  )" "$log" | tail -40
