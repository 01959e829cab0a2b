#!/usr/bin/env bash
# Runs on the lent H200 (device tool), from the repo root, after vLLM was staged into /tmp/site
# (../shared/gpu recipe). One call = one pass over the job queue below until the call's deadline;
# a job finished in an earlier call of the same warm machine is skipped, a profile left part-way is
# resumed (profiles live in /tmp/prof while the machine is warm; a tarball of /tmp/prof and
# /tmp/bench comes back in $OUT after every call, with this call's log).
#   bash scripts/gpu/campaign.sh [SECONDS_FOR_THIS_CALL]
# The Python code used is the copy this script sits in (run it as `bash .gpurun/scripts/gpu/campaign.sh`
# from a `git archive` of a commit, so edits in the working tree during the call cannot change a run);
# data paths (profiles/, .tok/) are relative to the current directory, the repo root.
# The job list is 2026-12-08, nineteenth session (issue 48: sliding windows, long prompts); earlier lists are in git
# history.
# Wheels in .gpuwheels/ (scripts/gpu/requirements-server.txt, downloaded on the CPU machine and carried)
# are installed into /tmp/site next to the staged vLLM.
set -uo pipefail
code=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH=/tmp/site:$code VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
budget=${1:-560}; start=$(date +%s); mkdir -p /tmp/prof /tmp/bench "$OUT"
left() { echo $(( budget - ($(date +%s) - start) )); }
log="$OUT/campaign.log"
call=$(ls /tmp/bench/smi-call*.csv 2>/dev/null | wc -l); call=$((call + 1))
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in  # the card this call got
  *H200*) gpu=h200 ;; *H100*) gpu=h100 ;; *) gpu=unknown ;;
esac
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv >> "$log" 2>&1
# GPU clocks, power and temperature once a second, for every job of this call (throttling shows here).
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,clocks_event_reasons.active \
  --format=csv -lms 1000 > "/tmp/bench/smi-call$call.csv" 2>&1 &
smi=$!

profile() {  # NAME NEED_S MODEL PRECISION SHAPES [more `measure profile` args...]; starts only with NEED_S left
  local name=$1 need=$2 model=$3 precision=$4 shapes=$5; shift 5
  [ -f "/tmp/prof/$name.done" ] && return 0
  [ "$(left)" -lt "$need" ] && { echo "== $name: not started, $(left) s left" >> "$log"; return 0; }
  local resume=(); [ -f "/tmp/prof/$name/profile.csv" ] && resume=(--resume)
  python3 -P -m measure profile --gpu "$gpu" --engine vllm --model "$model" \
    --model-path "${MODEL_PATH:-$PWD/profiles/models/$model}" \
    --precision "$precision" --shapes "$shapes" --out "/tmp/prof/$name" --max-time $(( $(left) - 25 )) "${resume[@]}" "$@" >> "$log" 2>&1
  local rc=$?; echo "== $name rc=$rc at $(date -u +%T), $(left) s left" >> "$log"
  [ $rc = 0 ] && touch "/tmp/prof/$name.done"
  snapshot
}

snapshot() {  # the results so far into $OUT, so a call cut by its limit still brings them back
  tar -C /tmp -czf "$OUT/results.tgz.tmp" prof bench && mv "$OUT/results.tgz.tmp" "$OUT/results.tgz"
}

bench() {  # NAME INPUT OUTPUT N: `vllm bench throughput`, fresh engine, the bf16 profile's engine settings
  local name=$1; [ -f "/tmp/bench/$name.txt" ] && return 0; [ "$(left)" -lt 150 ] && return 0
  timeout $(( $(left) - 20 )) python3 -m vllm.entrypoints.cli.main bench throughput --model .tok/llama-3.1-8b \
    --load-format dummy --dtype bfloat16 --max-model-len 9216 --dataset-name random --random-input-len "$2" \
    --random-output-len "$3" --random-range-ratio 0 --num-prompts "$4" --seed 0 > "/tmp/bench/$name.log" 2>&1
  local rc=$?
  grep -E "^Throughput" "/tmp/bench/$name.log" > "/tmp/bench/$name.txt" || rm -f "/tmp/bench/$name.txt"
  echo "== bench $name rc=$rc: $(cat "/tmp/bench/$name.txt" 2>/dev/null)" >> "$log"
}

check() {  # NAME NEED_S REPEATS SHAPE...: scripts/gpu/harness_check.py (ours and vLLM's bench path in turns, one engine)
  local name=$1 need=$2 repeats=$3; shift 3
  [ -f "/tmp/bench/$name.done" ] && return 0; [ "$(left)" -lt "$need" ] && return 0
  local shapes=(); for s in "$@"; do shapes+=(--shape "$s"); done
  timeout $(( $(left) - 20 )) python3 "$code/scripts/gpu/harness_check.py" --model-dir .tok/llama-3.1-8b "${shapes[@]}" \
    --repeats "$repeats" --out "/tmp/bench/$name.jsonl" > "/tmp/bench/$name.log" 2>&1
  local rc=$?; echo "== check $name rc=$rc, $(left) s left" >> "$log"; grep '^{' "/tmp/bench/$name.log" >> "$log"
  [ $rc = 0 ] && touch "/tmp/bench/$name.done"
}

http_get() {  # URL: its body on stdout, status 0 on HTTP 200 (python, in case the image has no curl)
  python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())" \
    "$1" 2>/dev/null
}

serve_bench() {  # NAME NEED_S "ARGS..." ...: vLLM's OpenAI server (bf16, defaults) and `vllm bench serve` (vLLM's own
  # aiohttp client) at each load given, beside our load generator's points at the same loads. Each ARGS holds
  # `--random-input-len I --random-output-len O` and the load flags.
  local name=$1 need=$2; shift 2
  [ -f "/tmp/bench/$name.done" ] && return 0; [ "$(left)" -lt "$need" ] && return 0
  local port=8100 server_log="/tmp/bench/$name-server.log"
  ${PY:-python3} -m vllm.entrypoints.openai.api_server --model "${SERVE_MODEL:-.tok/llama-3.1-8b}" --host 127.0.0.1 \
    --port $port --served-model-name llama-3.1-8b --seed 0 ${SERVE_ARGS:---dtype bfloat16 --load-format dummy} \
    --max-model-len 3072 > "$server_log" 2>&1 &
  local server=$! waited=0
  until http_get "http://127.0.0.1:$port/health" > /dev/null; do
    sleep 2; waited=$((waited + 2))
    if [ $waited -gt 240 ] || ! kill -0 $server 2>/dev/null; then
      echo "== serve_bench $name: server not ready" >> "$log"; kill $server 2>/dev/null; return 0
    fi
  done
  echo "== serve_bench $name: server ready after ${waited} s" >> "$log"
  local i=0
  for load in "$@"; do
    i=$((i + 1)); [ "$(left)" -lt 60 ] && break
    # shellcheck disable=SC2086  # $load is a list of flags
    timeout $(( $(left) - 30 )) ${PY:-python3} -m vllm.entrypoints.cli.main bench serve --backend vllm \
      --base-url "http://127.0.0.1:$port" --endpoint /v1/completions --model llama-3.1-8b \
      --tokenizer "${SERVE_MODEL:-.tok/llama-3.1-8b}" --dataset-name random \
      --random-range-ratio 0 --ignore-eos --seed $i --percentile-metrics ttft,tpot,itl,e2el \
      --metric-percentiles 50,95,99 --save-result --result-dir /tmp/bench --result-filename "$name-$i.json" \
      $load > "/tmp/bench/$name-$i.log" 2>&1
    echo "== serve_bench $name $i ($load) rc=$?: $(grep -E "Output token throughput|Median TTFT|P99 TTFT|Median TPOT" \
      "/tmp/bench/$name-$i.log" | tr -s ' ' | tr '\n' ';')" >> "$log"
    http_get "http://127.0.0.1:$port/metrics" > "/tmp/bench/$name-$i-metrics.txt"  # cumulative: difference i and i-1
  done
  kill $server 2>/dev/null; wait $server 2>/dev/null
  [ $i = $# ] && touch "/tmp/bench/$name.done"
}

if [ -d .gpuwheels ] && ! python3 -c "import sys; sys.path.insert(0, '/tmp/site'); import prometheus_fastapi_instrumentator" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpuwheels/*.whl >> "$log" 2>&1
fi

# 2026-12-07 (eighteenth session), issue 48: Llama-3.1-8B, vLLM 0.26.0, max_model_len 131072, dummy weights. On an
# H200: the long bf16 rows with the H200's rows past its KV cache (the H100's were measured in the fourteenth
# session). On an H100: FP8 at 1k-8k in the long FP8 group's engine. Earlier lists are in git history.
python3 -c "import transformers; print('transformers', transformers.__version__)" >> "$log" 2>&1
echo "card: $gpu" >> "$log"
long=(--engine-arg max_model_len=131072)
# Sliding windows first (any card; the model's own max_model_len, 32768), then on an H200 its long bf16 rows.
profile mistral-window 120 mistral-7b bf16 "$code/scripts/gpu/shapes-mistral-window.csv"
if [ "$gpu" = h200 ]; then
  { cat "$code/scripts/gpu/shapes-long-bf16.csv"; grep -v -e '^#' -e '^mode,' "$code/scripts/gpu/shapes-long-beyond-h200.csv"; } \
    > /tmp/shapes-long-bf16-h200.csv
  profile long-bf16 150 llama-3.1-8b bf16 /tmp/shapes-long-bf16-h200.csv --tag long "${long[@]}"
else  # the H100 bf16 long group has no prompts under 8k: its short-prompt predictions span 10x (the FP8 group's 1k-8k rows)
  profile bf16-mid 130 llama-3.1-8b bf16 "$code/scripts/gpu/shapes-fp8-mid.csv" --tag long-mid "${long[@]}"
fi

kill $smi 2>/dev/null
tar -C /tmp -czf "$OUT/results.tgz" prof bench
echo "call used $(( $(date +%s) - start )) s" >> "$log"; tail -40 "$log"
