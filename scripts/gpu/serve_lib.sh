# Shared by the scripts that start `vllm serve` on the lent GPU (source it from the repo root, after vLLM was
# staged into /tmp/site by the ../shared/gpu recipe): the environment, the clocks log, the server's extra wheels,
# the offline tokenizer and a `vllm` command, and a server started from a `planner deploy --format vllm` script.
#   source scripts/gpu/serve_lib.sh; gpu_setup LOG SMI_CSV; start_server DEPLOY_SCRIPT OUT_SCRIPT SERVER_LOG LOG [ARGS]
code=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export PYTHONPATH=/tmp/site:$code VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1

gpu_setup() {  # LOG SMI_CSV: the card, clocks and power once a second (pid in $smi), wheels, tokenizer, `vllm`
  local log=$1
  echo "== $(basename "$0") on $(hostname) boot $(cat /proc/sys/kernel/random/boot_id) at $(date -u +%FT%T)" >> "$log"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv >> "$log" 2>&1
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,clocks_event_reasons.active \
    --format=csv -lms 1000 >> "$2" 2>&1 &
  smi=$!
  if [ -d .gpuwheels ] && ! python3 -c "import sys; sys.path.insert(0, '/tmp/site'); import prometheus_fastapi_instrumentator" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpuwheels/*.whl >> "$log" 2>&1
  fi
  [ -f .tok/llama-3.1-8b/tokenizer.json ] || python3 -P -m measure tokenizer --model-dir profiles/models/llama-3.1-8b \
    --out .tok/llama-3.1-8b >> "$log" 2>&1
  mkdir -p /tmp/bin
  printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > /tmp/bin/vllm && chmod +x /tmp/bin/vllm
  export PATH=/tmp/bin:$PATH
}

start_server() {  # DEPLOY_SCRIPT OUT_SCRIPT SERVER_LOG LOG [SERVER ARGS]: the deploy script as written, model swapped
  # for the config-only dir, plus --seed 0 --load-format dummy (no weights travel), --enable-prompt-tokens-details
  # (per-request cached tokens) where the script lacks it, and SERVER ARGS; waits for /health (pid in $server).
  local script=$1 out=$2 server_log=$3 log=$4 waited=0; shift 4
  sed -e "/^exec vllm serve/ s#serve [^ ]*#serve $PWD/.tok/llama-3.1-8b#" \
      -e "/^exec vllm serve/ s#\$# --seed 0 --load-format dummy $*#" \
      -e "/^exec vllm serve/ {/enable-prompt-tokens-details/! s#\$# --enable-prompt-tokens-details#}" \
      "$script" > "$out"
  grep '^exec' "$out" >> "$log"
  bash "$out" > "$server_log" 2>&1 &
  server=$!
  until python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)" 2>/dev/null; do
    sleep 2; waited=$((waited + 2))
    if [ $waited -gt 300 ] || ! kill -0 $server 2>/dev/null; then
      echo "== server not ready" | tee -a "$log"; tail -20 "$server_log"; return 3
    fi
  done
  echo "== server ready after ${waited} s; $(grep -m1 -E 'KV cache size' "$server_log")" >> "$log"
}

stop_server() {  # the server and everything vLLM started
  kill "$server" 2>/dev/null; pkill -f vllm.entrypoints 2>/dev/null; sleep 3
}
