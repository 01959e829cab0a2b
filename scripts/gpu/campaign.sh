#!/usr/bin/env bash
# Runs on the lent H200 (device tool), from the repo root, after vLLM was staged into /tmp/site
# (../shared/gpu recipe). One call = one pass over the job queue until the call's deadline;
# every job resumes where the last call stopped (profiles live in /tmp/prof while the machine
# is warm, and a tarball of them comes back in $OUT after every call).
#   bash scripts/gpu/campaign.sh [SECONDS_FOR_THIS_CALL]
set -uo pipefail
export PYTHONPATH=/tmp/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
budget=${1:-560}; start=$(date +%s); mkdir -p /tmp/prof /tmp/bench "$OUT"
left() { echo $(( budget - ($(date +%s) - start) )); }
log="$OUT/campaign.log"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv >> "$log" 2>&1

profile() {  # NAME SHAPES PRECISION [engine args...]
  local name=$1 shapes=$2 precision=$3; shift 3
  [ -f "/tmp/prof/$name.done" ] && return 0
  [ "$(left)" -lt 90 ] && return 0
  local args=(); for a in "$@"; do args+=(--engine-arg "$a"); done
  local resume=(); [ -f "/tmp/prof/$name/profile.csv" ] && resume=(--resume)
  python3 -m measure profile --gpu h200 --engine vllm --model "${name%%__*}" --precision "$precision" \
    --shapes "$shapes" --out "/tmp/prof/$name" --max-time $(( $(left) - 25 )) "${resume[@]}" "${args[@]}" \
    >> "$log" 2>&1
  local rc=$?; echo "== $name rc=$rc at $(date -u +%T)" >> "$log"
  [ $rc = 0 ] && touch "/tmp/prof/$name.done"
}

bench() {  # NAME INPUT OUTPUT N: vLLM's own `vllm bench throughput`, same engine settings as the bf16 profile
  local name=$1; [ -f "/tmp/bench/$name.txt" ] && return 0; [ "$(left)" -lt 150 ] && return 0
  timeout $(( $(left) - 20 )) python3 -m vllm.entrypoints.cli.main bench throughput --model .tok/llama-3.1-8b \
    --load-format dummy --dtype bfloat16 --max-model-len 9216 --dataset-name random --random-input-len "$2" --random-range-ratio 0 \
    --random-output-len "$3" --num-prompts "$4" --seed 0 > "/tmp/bench/$name.log" 2>&1
  local rc=$?
  if grep -q "unrecognized arguments" "/tmp/bench/$name.log"; then  # older/newer flag names
    timeout $(( $(left) - 20 )) python3 -m vllm.entrypoints.cli.main bench throughput --model .tok/llama-3.1-8b \
      --load-format dummy --dtype bfloat16 --max-model-len 9216 --dataset-name random --random-input-len "$2" \
      --random-output-len "$3" --num-prompts "$4" --seed 0 > "/tmp/bench/$name.log" 2>&1; rc=$?
  fi
  grep -E "^Throughput" "/tmp/bench/$name.log" > "/tmp/bench/$name.txt" || rm -f "/tmp/bench/$name.txt"
  echo "== bench $name rc=$rc: $(cat /tmp/bench/$name.txt 2>/dev/null)" >> "$log"; tail -5 "/tmp/bench/$name.log" >> "$log"
}

profile llama-3.1-8b__bf16 scripts/gpu/shapes-default-plus-bench.csv bf16
rm -f /tmp/bench/i128-o128-n2000.txt.first; [ -f /tmp/bench/v1 ] || { mv /tmp/bench/i128-o128-n2000.txt /tmp/bench/first-run-wrong-flags.txt 2>/dev/null; touch /tmp/bench/v1; }
bench i128-o128-n2000 128 128 2000
bench i1024-o1024-n512 1024 1024 512
profile llama-3.1-8b__fp8 scripts/gpu/shapes-default-plus-published.csv fp8
profile qwen2.5-7b__bf16 default bf16
tar -C /tmp -czf "$OUT/results.tgz" prof bench
echo "call used $(( $(date +%s) - start )) s" >> "$log"; tail -30 "$log"
