#!/usr/bin/env bash
# Runs on the lent H200 after vLLM was staged into /tmp/site: one short profile of Qwen2.5-7B (dummy weights) with
# CUDA graphs captured up to 256 sequences, to check that the profile records cuda_graph_max_batch = 256.
#   bash .gpurun/scripts/gpu/record_check.sh   (from the repo root; results in $OUT)
set -uo pipefail
code=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH=/tmp/site:$code VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
python3 -P -m measure profile --gpu h200 --engine vllm --model qwen2.5-7b --model-path "$PWD/profiles/models/qwen2.5-7b" \
  --precision bf16 --shapes "$code/scripts/gpu/shapes-one-point.csv" --out /tmp/prof/record-check --tag graphs256 \
  --engine-arg 'compilation_config={"max_cudagraph_capture_size": 256}' --max-time 200 > "$OUT/record-check.log" 2>&1
echo "rc=$?"
cp /tmp/prof/record-check/profile.csv "$OUT/profile.csv" 2>/dev/null
cp /tmp/prof/record-check/env.json "$OUT/env.json" 2>/dev/null
python3 -c "import csv; r=list(csv.DictReader(open('$OUT/profile.csv'))); print('cuda_graph_max_batch:', [x.get('cuda_graph_max_batch') for x in r], 'status:', [x['status'] for x in r])"
tail -5 "$OUT/record-check.log"
