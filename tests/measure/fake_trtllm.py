"""A stand-in `tensorrt_llm` package for testing OUR adapter logic (kwargs, token-id prompts, the timing
boundary, token counting) without a GPU.  It is not TensorRT-LLM and proves nothing about it; the
`gpu`-marked test runs the real engine."""

from __future__ import annotations

import time
import types
from dataclasses import dataclass

__version__ = "1.0-fake"


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float | None = None
    top_p: float | None = None
    ignore_eos: bool = False
    max_tokens: int = 32
    detokenize: bool = True
    end_id: int | None = None


@dataclass
class KvCacheConfig:
    free_gpu_memory_fraction: float | None = None
    max_tokens: int | None = None
    enable_block_reuse: bool = True


class LLM:
    """Records its kwargs and calls; generate() sleeps STEP_S per output token."""

    instances: list = []
    STEP_S = 0.001

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls: list = []
        self.shut_down = False
        self.args = types.SimpleNamespace(max_batch_size=2048, max_num_tokens=8192,
                                          kv_cache_config=kwargs.get("kv_cache_config"))
        LLM.instances.append(self)

    def generate(self, inputs, sampling_params, use_tqdm=True):
        self.calls.append((inputs, sampling_params, use_tqdm, time.perf_counter()))
        time.sleep(LLM.STEP_S * sampling_params.max_tokens)
        return [types.SimpleNamespace(prompt_token_ids=p["prompt_token_ids"],
                                      outputs=[types.SimpleNamespace(token_ids=list(range(sampling_params.max_tokens)))])
                for p in inputs]

    def shutdown(self):
        self.shut_down = True


llmapi = types.ModuleType("tensorrt_llm.llmapi")
llmapi.KvCacheConfig = KvCacheConfig
llmapi.LLM = LLM
llmapi.SamplingParams = SamplingParams
