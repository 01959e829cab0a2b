"""vLLM in process: `vllm.LLM` offline batches, one engine per configuration.

The skeleton (warm-up, one timed `llm.generate` per point, stop) is
measure/engines/offline.py, shared with TensorRT-LLM: a point of batch N submits
N token-id prompts in ONE call and times only that call, exactly as `vllm bench
throughput` does, with the same sampling settings.
Per-request latencies come from `RequestOutput.metrics` (vLLM V1
RequestStateStats) when the engine keeps stats; else they are left blank.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from fleetfacts.specs import load_model_config
from measure.engines.base import EngineConfig, EngineError, EngineNotInstalled, positive_int
from measure.engines.offline import OfflineLLMEngine
from measure.engines.registry import register
from measure.points import Point
from measure.stats import Measurement, tpot_ms

log = logging.getLogger(__name__)

INSTALL_HINT = "vLLM is not installed: pip install 'fleetplan[vllm]' (or vllm), on a machine with an NVIDIA GPU"
# Exception type names after which the engine process is gone and must be restarted.
DEAD_ENGINE_ERRORS = ("EngineDeadError", "EngineGenerateError")
PRECISION_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16", "fp32": "float32"}


def import_vllm() -> ModuleType:
    """The vllm module, or EngineNotInstalled with the install hint."""
    try:
        import vllm  # noqa: PLC0415 - imported only where used
    except ImportError as err:
        raise EngineNotInstalled(f"{INSTALL_HINT} ({err})") from None
    return vllm


def llm_kwargs(config: EngineConfig) -> dict:
    """Keyword arguments for vllm.LLM: precision, dummy weights, TP, then the user's --engine-arg overrides."""
    kwargs: dict = {"model": config.model_path, "tensor_parallel_size": config.tp, "seed": config.seed,
                    # keep per-request stats (RequestOutput.metrics); `vllm bench throughput` runs with them on too
                    "disable_log_stats": False}
    if config.precision not in PRECISION_DTYPE and "quantization" not in config.engine_args:
        raise EngineError(f"precision {config.precision!r}: vLLM adapter knows bf16, fp16, fp8, fp32; for other "
                          "formats pass a pre-quantized checkpoint with --model-path and --engine-arg quantization=...")
    kwargs["dtype"] = PRECISION_DTYPE.get(config.precision, "auto")
    if config.precision == "fp8":
        kwargs["quantization"] = "fp8"  # online FP8 of the bf16 (or dummy) weights
    if config.is_dummy():
        kwargs["load_format"] = "dummy"
    if not config.has_tokenizer():
        kwargs["skip_tokenizer_init"] = True
    if config.max_model_len:
        kwargs["max_model_len"] = config.max_model_len
    kwargs.update(config.engine_args)
    return kwargs


def _vllm_config(llm: Any) -> object | None:
    engine: Any = getattr(llm, "llm_engine", None)
    cfg = getattr(engine, "vllm_config", None)
    if cfg is None and callable(getattr(engine, "get_vllm_config", None)):
        try:
            cfg = engine.get_vllm_config()
        except Exception:  # noqa: BLE001 - reporting is best effort
            cfg = None
    return cfg



def engine_caps(llm) -> dict[str, int | None]:
    """KV-cache tokens (num_gpu_blocks x block_size), max_num_seqs, max_num_batched_tokens and the largest
    CUDA-graph batch (compilation_config.max_cudagraph_capture_size); None if not found."""
    cfg = _vllm_config(llm)
    cache = getattr(cfg, "cache_config", None)
    sched = getattr(cfg, "scheduler_config", None)
    compilation = getattr(cfg, "compilation_config", None)
    blocks, block_size = positive_int(getattr(cache, "num_gpu_blocks", None)), \
        positive_int(getattr(cache, "block_size", None))
    kv = positive_int(getattr(cache, "kv_cache_size_tokens", None))
    if kv is None and blocks and block_size:
        kv = blocks * block_size
    return {"kv_cache_tokens": kv, "max_num_seqs": positive_int(getattr(sched, "max_num_seqs", None)),
            "max_num_batched_tokens": positive_int(getattr(sched, "max_num_batched_tokens", None)),
            "cuda_graph_max_batch": positive_int(getattr(compilation, "max_cudagraph_capture_size", None))}


def vocab_size(llm, config: EngineConfig) -> int:
    model_config = getattr(getattr(llm, "llm_engine", None), "model_config", None)
    getter = getattr(model_config, "get_vocab_size", None)
    if callable(getter):
        try:
            value = positive_int(getter())
            if value:
                return value
        except Exception:  # noqa: BLE001
            pass
    hf = load_model_config(config.model_path) or {}
    if positive_int(hf.get("vocab_size")):
        return hf["vocab_size"]
    raise EngineError("cannot tell the model's vocabulary size (no config.json vocab_size, engine did not say)")


def request_latencies(metrics: object, output_tokens: int) -> tuple[float | None, float | None, float | None]:
    """(ttft, tpot, e2e) in ms of one request from RequestOutput.metrics; None where not available.

    vLLM V1 RequestStateStats: first_token_latency (s, frontend clock, from arrival),
    first_token_ts / last_token_ts (engine-core monotonic clock).  e2e is
    first_token_latency + (last - first token); TPOT excludes the first token.
    V0-style RequestMetrics (arrival_time, first_token_time, finished_time) is read too.
    """
    if metrics is None:
        return None, None, None
    ftl = getattr(metrics, "first_token_latency", None)
    first, last = getattr(metrics, "first_token_ts", None), getattr(metrics, "last_token_ts", None)
    if isinstance(ftl, (int, float)) and ftl > 0 and isinstance(first, (int, float)) and \
            isinstance(last, (int, float)) and first > 0 and last >= first:
        ttft = ftl * 1000.0
        e2e = ttft + (last - first) * 1000.0
        return ttft, tpot_ms(e2e, ttft, output_tokens), e2e
    arrival: Any = getattr(metrics, "arrival_time", None)
    first_t: Any = getattr(metrics, "first_token_time", None)
    done: Any = getattr(metrics, "finished_time", None) or getattr(metrics, "last_token_time", None)
    if all(isinstance(v, (int, float)) and v > 0 for v in (arrival, first_t, done)):
        ttft, e2e = (first_t - arrival) * 1000.0, (done - arrival) * 1000.0
        return ttft, tpot_ms(e2e, ttft, output_tokens), e2e
    return None, None, None


def measurement_from_outputs(outputs: Sequence, duration_s: float) -> Measurement:
    """Token counts and per-request latencies of one generate() call."""
    in_tokens = out_tokens = 0
    ttfts: list[float] = []
    tpots: list[float] = []
    e2es: list[float] = []
    for out in outputs:
        n_out = sum(len(c.token_ids) for c in out.outputs)
        in_tokens += len(out.prompt_token_ids or ())
        out_tokens += n_out
        ttft, tpot, e2e = request_latencies(getattr(out, "metrics", None), n_out)
        for values, v in ((ttfts, ttft), (tpots, tpot), (e2es, e2e)):
            if v is not None:
                values.append(v)
    complete = len(ttfts) == len(outputs)
    return Measurement(num_requests=len(outputs), duration_s=duration_s, input_tokens=in_tokens,
                       output_tokens=out_tokens, ttft_ms=ttfts if complete else (),
                       tpot_ms=tpots if complete else (), e2e_ms=e2es if complete else (),
                       notes="" if complete else "latency not reported by the engine")


@register("vllm")
class VllmOfflineEngine(OfflineLLMEngine):
    """vllm.LLM in this process; one instance per (model, precision, engine args)."""

    name = "vllm"
    display_name = "vLLM"
    module_name = "vllm"

    def import_engine(self) -> ModuleType:
        return import_vllm()

    def prepare(self) -> tuple[dict, dict]:
        self.module = import_vllm()
        kwargs = llm_kwargs(self.config)
        return kwargs, kwargs

    def after_load(self) -> None:
        self._vocab = vocab_size(self.llm, self.config)

    def caps(self) -> tuple[dict[str, int | None], str]:
        return engine_caps(self.llm), ""

    def measurement(self, outputs: Sequence, point: Point, duration_s: float) -> Measurement:
        return measurement_from_outputs(outputs, duration_s)

    def needs_restart(self, error: BaseException) -> bool:
        return type(error).__name__ in DEAD_ENGINE_ERRORS or "dead" in str(error).lower()

    def shutdown_hook(self, llm: Any) -> Callable[[], object] | None:
        return getattr(getattr(llm, "llm_engine", None), "shutdown", None)
