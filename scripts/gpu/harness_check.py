"""Our offline harness against vLLM's own `vllm bench throughput` code path, on ONE engine.

Runs on the GPU machine (vLLM installed). One `vllm.LLM` is started through measure's own adapter
(VllmOfflineEngine, the code `python -m measure profile` uses); then, for each shape, the two
harnesses take turns on that same engine:
- ours:  VllmOfflineEngine.run_point (token-id prompts, one generate() call, only that call timed);
- vllm:  vllm.benchmarks.throughput._run_vllm_requests, fed by vLLM's own random dataset
         (get_requests, text prompts through the model's tokenizer), timed by vLLM's code; tokens
         counted from its outputs as `vllm bench throughput` does.
Taking turns on one engine puts engine state (prefix-cache contents, allocator, GPU clocks and
temperature) on both sides alike, so the ratio isolates the harness.  `vllm bench throughput`
itself (a fresh engine per command) is run beside this by scripts/gpu/campaign.sh.

  python3 scripts/gpu/harness_check.py --model-dir .tok/llama-3.1-8b --shape 128x128x2000 --repeats 3 \
      --out $OUT/harness_check.jsonl

Each run is one JSON line (harness, shape, elapsed s, output tokens, output tok/s, wall-clock start
and end), written and flushed as it ends.  The model dir needs a tokenizer (python -m measure
tokenizer) because vLLM's random dataset decodes and re-encodes token ids.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from measure.engines.base import EngineConfig  # noqa: E402
from measure.engines.vllm_offline import VllmOfflineEngine  # noqa: E402
from measure.points import Point  # noqa: E402


def parse_shape(text: str) -> tuple[int, int, int]:
    """'128x128x2000' -> (input_len, output_len, num_prompts)."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"shape {text!r}: expected INPUTxOUTPUTxNUM, e.g. 128x128x2000")
    return int(parts[0]), int(parts[1]), int(parts[2])


def vllm_bench_requests(model_dir: str, input_len: int, output_len: int, num: int, seed: int) -> list:
    """vLLM's own random-dataset requests, built exactly as `vllm bench throughput` builds them."""
    from vllm.benchmarks import throughput  # noqa: PLC0415
    from vllm.tokenizers import get_tokenizer  # noqa: PLC0415
    from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: PLC0415

    parser = FlexibleArgumentParser()
    throughput.add_cli_args(parser)
    args = parser.parse_args(["--model", model_dir, "--dataset-name", "random", "--random-input-len", str(input_len),
                              "--random-output-len", str(output_len), "--random-range-ratio", "0",
                              "--num-prompts", str(num), "--seed", str(seed)])
    throughput.validate_args(args)
    tokenizer = get_tokenizer(args.tokenizer, tokenizer_mode=args.tokenizer_mode,
                              trust_remote_code=args.trust_remote_code)
    return throughput.get_requests(args, tokenizer)


def run_vllm_bench_path(llm, requests: list) -> tuple[float, int]:
    """(elapsed s, output tokens) from vLLM's own timed function, counted as its main() counts them."""
    from vllm.benchmarks import throughput  # noqa: PLC0415

    elapsed, outputs = throughput._run_vllm_requests(llm, requests, 1, False, do_profile=False,
                                                      prequeue_requests=False, enable_lora=False)
    return elapsed, sum(len(o.token_ids) for ro in outputs for o in ro.outputs if o is not None)


def record(out, **fields) -> None:
    fields["output_tok_per_s"] = fields["output_tokens"] / fields["elapsed_s"]
    line = json.dumps(fields)
    print(line, flush=True)
    out.write(line + "\n")
    out.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True, help="config.json + tokenizer.json (dummy weights)")
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--shape", type=parse_shape, action="append", required=True, help="INPUTxOUTPUTxNUM")
    parser.add_argument("--repeats", type=int, default=3, help="turns per harness per shape")
    parser.add_argument("--max-model-len", type=int, default=9216, help="as in the profile and vllm bench runs")
    parser.add_argument("--out", required=True, help="JSON-lines file")
    args = parser.parse_args()

    engine = VllmOfflineEngine(EngineConfig(engine="vllm", model=args.model, model_path=args.model_dir,
                                            precision="bf16", max_model_len=args.max_model_len))
    info = engine.start()
    print(f"engine ready in {info.start_s:.0f} s: {info.effective_args}", flush=True)
    with open(args.out, "a", encoding="utf-8") as out:
        for input_len, output_len, num in args.shape:
            shape = {"input_len": input_len, "output_len": output_len, "num_prompts": num}
            point = Point("offline", input_len, output_len, batch_size=num, num_requests=num)
            for turn in range(args.repeats):
                # New prompts every turn on both sides: a repeated prompt set hits the prefix cache
                # (seen: 53% hit rate, 25% faster, when vLLM's requests were reused across turns).
                requests = vllm_bench_requests(args.model_dir, input_len, output_len, num, seed=1000 + turn)
                start = time.time()
                m = engine.run_point(point, seed=turn)
                record(out, harness="ours", turn=turn, **shape, elapsed_s=m.duration_s,
                       output_tokens=m.output_tokens, wall_start=start, wall_end=time.time())
                start = time.time()
                elapsed, tokens = run_vllm_bench_path(engine.llm, requests)
                record(out, harness="vllm-bench-path", turn=turn, **shape, elapsed_s=elapsed,
                       output_tokens=tokens, wall_start=start, wall_end=time.time())
    engine.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
