"""A stand-in `vllm` module for testing OUR adapter logic (prompt building, the timing boundary,
metrics extraction, restart after a dead engine) without a GPU.  It is not vLLM and proves nothing
about vLLM itself; the `gpu`-marked test runs the real engine."""

from __future__ import annotations

import time
import types
from dataclasses import dataclass

__version__ = "0.0-fake"


class EngineDeadError(RuntimeError):
    pass


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    ignore_eos: bool = False
    max_tokens: int = 16
    detokenize: bool = True


@dataclass
class Stats:  # mirrors vllm.v1.metrics.stats.RequestStateStats fields the adapter reads
    arrival_time: float
    first_token_latency: float
    first_token_ts: float
    last_token_ts: float
    num_generation_tokens: int


class LLM:
    """Records its kwargs and calls; generate() sleeps STEP_S per output token."""

    instances: list = []
    STEP_S = 0.001
    fail_input_len: int | None = None   # raise an OOM-like error for this prompt length
    die_input_len: int | None = None    # raise EngineDeadError for this prompt length
    report_metrics = True

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls: list = []
        self.llm_engine = types.SimpleNamespace(
            vllm_config=types.SimpleNamespace(
                cache_config=types.SimpleNamespace(num_gpu_blocks=1000, block_size=16),
                scheduler_config=types.SimpleNamespace(max_num_seqs=256, max_num_batched_tokens=8192),
                compilation_config=types.SimpleNamespace(max_cudagraph_capture_size=512)),
            model_config=types.SimpleNamespace(get_vocab_size=lambda: 1000),
            shutdown=lambda: None)
        LLM.instances.append(self)

    def generate(self, prompts, sampling_params, use_tqdm=True):
        self.calls.append((prompts, sampling_params, use_tqdm, time.perf_counter()))
        length = len(prompts[0]["prompt_token_ids"])
        if length == LLM.fail_input_len:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if length == LLM.die_input_len:
            raise EngineDeadError("EngineCore encountered an issue")
        start = time.time()
        mono = time.monotonic()
        time.sleep(LLM.STEP_S * sampling_params.max_tokens)
        outs = []
        for i, p in enumerate(prompts):
            n = sampling_params.max_tokens
            metrics = Stats(start, 0.010 + 0.001 * i, mono + 0.010, mono + 0.010 + 0.002 * (n - 1), n) \
                if LLM.report_metrics else None
            outs.append(types.SimpleNamespace(prompt_token_ids=p["prompt_token_ids"], metrics=metrics,
                                              outputs=[types.SimpleNamespace(token_ids=list(range(n)))]))
        return outs
