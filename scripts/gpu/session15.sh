#!/usr/bin/env bash
# The fifteenth session's device call (profiles/measured/h200/RUNS.md): the bundled prefix example replayed with
# prefix caching on (prefix_replay.sh), then the long-prompt plan's busiest minute (busiest_minute.sh), then the
# prefix example in a 32k-token KV cache if time is left.  Everything lands in /tmp/s15 and comes back as one
# tarball (a call brings back at most 8 files) beside the two logs.
#   bash scripts/gpu/session15.sh BUDGET_S
set -uo pipefail
budget=${1:-540}; start=$(date +%s); left() { echo $(( budget - ($(date +%s) - start) )); }
final=$OUT; export OUT=/tmp/s15; mkdir -p "$OUT"
p=scripts/gpu/inputs/prefix-replay l=scripts/gpu/inputs/long-replay
pack() { tar -C /tmp -czf "$final/results.tgz" s15; cp "$OUT"/*.log "$final/" 2>/dev/null; }
trap pack EXIT
bash scripts/gpu/prefix_replay.sh prefix $p/chat-prefix.vllm.sh $p/plan.csv $p/routes.csv chat-prefix 300 \
  "on-full||--scale 10 --duration 90"
pack
[ "$(left)" -gt 250 ] && NEED=125 bash scripts/gpu/busiest_minute.sh long-replay $l/rag-long.vllm.sh $l/plan.csv \
  $l/routes.csv rag-long $l/assigned.csv $(( $(left) - 15 )) 2
pack
[ "$(left)" -gt 200 ] && bash scripts/gpu/prefix_replay.sh prefix $p/chat-prefix.vllm.sh $p/plan.csv $p/routes.csv \
  chat-prefix $(( $(left) - 10 )) "on-32k|--num-gpu-blocks-override 2000|--scale 3 --duration 120"
echo "== session15 used $(( $(date +%s) - start )) s"
