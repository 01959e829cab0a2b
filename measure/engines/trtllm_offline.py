"""TensorRT-LLM in process: `tensorrt_llm.LLM` (1.x LLM API, PyTorch backend) offline batches.

Shares the vLLM adapter's skeleton (measure/engines/offline.py): one engine per
configuration, a short warm-up, then per offline point ONE `llm.generate(prompts, SamplingParams(...), use_tqdm=False)` call
with N token-id prompts (`{"prompt_token_ids": [...]}`, the LLM API's TokensPrompt),
built before the clock starts; only that call is timed.  Sampling: temperature 1,
top_p 1, ignore_eos, max_tokens = output_len, detokenize=False.

Not verified on hardware: the argument names come from the TensorRT-LLM 1.x docs and
`tensorrt_llm/llmapi/llm_args.py` (TorchLlmArgs), not from a run.  The LLM API does
not report per-request latencies here, so latency columns are left blank.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from fleetfacts.specs import load_model_config
from measure.engines.base import EngineConfig, EngineError, EngineNotInstalled, positive_int
from measure.engines.offline import OfflineLLMEngine
from measure.engines.registry import register
from measure.points import Point
from measure.stats import Measurement

log = logging.getLogger(__name__)

INSTALL_HINT = ("TensorRT-LLM is not installed: pip install tensorrt-llm (NVIDIA GPU, Linux; see "
                "https://nvidia.github.io/TensorRT-LLM/installation/linux.html), or use its NGC container")
# TensorRT-LLM's documented default share of free GPU memory for the KV cache (KvCacheConfig).
DEFAULT_FREE_GPU_MEMORY_FRACTION = 0.9
PRECISION_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp8": "auto", "fp4": "auto", "fp32": "float32"}
# Pre-quantized (ModelOpt) checkpoints carry one of these; TensorRT-LLM reads the quantization from them.
QUANT_FILES = ("hf_quant_config.json",)
# Error type names / message words after which the executor is gone and must be restarted.
DEAD_ENGINE_ERRORS = ("RequestError", "ExecutorError")
DEAD_WORDS = ("executor", "shutdown", "dead", "mpi")
KV_NOTE = "KV-cache size not reported by the TensorRT-LLM LLM API (see its start-up log)"


def import_trtllm() -> ModuleType:
    """The tensorrt_llm module, or EngineNotInstalled with the install hint."""
    try:
        import tensorrt_llm  # noqa: PLC0415 - imported only where used
    except ImportError as err:
        raise EngineNotInstalled(f"{INSTALL_HINT} ({err})") from None
    return tensorrt_llm


def _kv_cache_config_class():
    try:
        from tensorrt_llm.llmapi import KvCacheConfig  # noqa: PLC0415
    except ImportError as err:
        raise EngineNotInstalled(f"{INSTALL_HINT} (tensorrt_llm.llmapi.KvCacheConfig: {err})") from None
    return KvCacheConfig


def is_prequantized(model_path: str) -> bool:
    """True when a local checkpoint says it is quantized (ModelOpt hf_quant_config.json or quantization_config)."""
    path = Path(model_path)
    if any((path / name).is_file() for name in QUANT_FILES):
        return True
    return bool((load_model_config(path) or {}).get("quantization_config")) if path.is_dir() else False


def check_precision(config: EngineConfig) -> None:
    """fp8/fp4 need a pre-quantized checkpoint: TensorRT-LLM's LLM API does not quantize bf16 weights online."""
    if config.precision not in PRECISION_DTYPE:
        raise EngineError(f"precision {config.precision!r}: the TensorRT-LLM adapter knows "
                          f"{', '.join(PRECISION_DTYPE)}")
    if config.precision not in ("fp8", "fp4") or "quant_config" in config.engine_args:
        return
    if config.is_dummy() or (Path(config.model_path).is_dir() and not is_prequantized(config.model_path)):
        raise EngineError(f"--precision {config.precision} with TensorRT-LLM needs --model-path to a pre-quantized "
                          f"checkpoint (e.g. a ModelOpt {config.precision.upper()} export with hf_quant_config.json, "
                          f"such as nvidia/Llama-3.1-8B-Instruct-FP8); {config.model_path} is not one "
                          "(online FP8 of bf16 or dummy weights is not supported by this adapter)")
    if not Path(config.model_path).is_dir():
        log.warning("cannot check that hub id %s is a pre-quantized %s checkpoint", config.model_path,
                    config.precision)


def llm_kwargs(config: EngineConfig) -> dict:
    """Keyword arguments for tensorrt_llm.LLM (KvCacheConfig as a plain dict), then --engine-arg overrides.

    `kv_cache_config` stays a dict here (so it can be recorded and overridden key by key,
    e.g. --engine-arg 'kv_cache_config={"free_gpu_memory_fraction":0.8}'); start() turns it
    into a KvCacheConfig.
    """
    check_precision(config)
    kwargs: dict = {"model": config.model_path, "tensor_parallel_size": config.tp, "backend": "pytorch",
                    "dtype": PRECISION_DTYPE[config.precision],
                    "kv_cache_config": {"free_gpu_memory_fraction": DEFAULT_FREE_GPU_MEMORY_FRACTION}}
    if config.is_dummy():
        kwargs["load_format"] = "dummy"  # TorchLlmArgs.load_format: LoadFormat.DUMMY initialises weights randomly
    if not config.has_tokenizer():
        kwargs["skip_tokenizer_init"] = True
    if config.max_model_len:
        kwargs["max_seq_len"] = config.max_model_len
    overrides = dict(config.engine_args)
    if isinstance(overrides.get("kv_cache_config"), dict):
        kwargs["kv_cache_config"] = {**kwargs["kv_cache_config"], **overrides.pop("kv_cache_config")}
    if "max_model_len" in overrides:  # the CLI's generic name; TensorRT-LLM calls it max_seq_len
        kwargs["max_seq_len"] = overrides.pop("max_model_len")
    kwargs.update(overrides)
    return kwargs



def engine_caps(llm) -> dict[str, int | None]:
    """max_batch_size / max_num_tokens from `llm.args` (the resolved LlmArgs); KV tokens where exposed; else None."""
    args = getattr(llm, "args", None)
    kv_cfg = getattr(args, "kv_cache_config", None)
    return {"kv_cache_tokens": positive_int(getattr(llm, "kv_cache_tokens", None)),
            "max_num_seqs": positive_int(getattr(args, "max_batch_size", None)),
            "max_num_batched_tokens": positive_int(getattr(args, "max_num_tokens", None)),
            "kv_cache_max_tokens_setting": positive_int(getattr(kv_cfg, "max_tokens", None))}


def vocab_size(config: EngineConfig) -> int:
    """Vocabulary size from the checkpoint's config.json."""
    value = positive_int((load_model_config(config.model_path) or {}).get("vocab_size")) \
        if Path(config.model_path).is_dir() else None
    if value is None:
        raise EngineError(f"cannot tell the vocabulary size of {config.model_path}: the TensorRT-LLM adapter reads "
                          "vocab_size from a local checkpoint's config.json (download the checkpoint and pass its dir)")
    return value


def end_id(config: EngineConfig) -> int | None:
    """The EOS id for SamplingParams when the tokenizer is skipped (TensorRT-LLM takes it from the tokenizer else)."""
    if config.has_tokenizer():
        return None
    eos = (load_model_config(config.model_path) or {}).get("eos_token_id")
    if isinstance(eos, list):
        eos = eos[0] if eos else None
    return eos if isinstance(eos, int) else 0  # ignore_eos: the id only has to be a valid token


def measurement_from_outputs(outputs: Sequence, prompt_lens: Sequence[int], duration_s: float) -> Measurement:
    """Token counts of one generate() call (RequestOutput.outputs[k].token_ids; prompt sizes as submitted)."""
    out_tokens = sum(len(c.token_ids) for out in outputs for c in out.outputs)
    in_tokens = sum(len(out.prompt_token_ids) if getattr(out, "prompt_token_ids", None) else n
                    for out, n in zip(outputs, prompt_lens, strict=False))
    return Measurement(num_requests=len(outputs), duration_s=duration_s, input_tokens=in_tokens,
                       output_tokens=out_tokens, notes="latency not reported by the engine")


@register("trtllm")
class TrtllmOfflineEngine(OfflineLLMEngine):
    """tensorrt_llm.LLM in this process; one instance per (model, precision, engine args)."""

    name = "trtllm"
    display_name = "TensorRT-LLM"
    module_name = "tensorrt_llm"

    def __init__(self, config: EngineConfig):
        check_precision(config)  # a user mistake fails before the sweep (and in --dry-run)
        super().__init__(config)
        self._end_id: int | None = None

    def import_engine(self) -> ModuleType:
        return import_trtllm()

    def prepare(self) -> tuple[dict, dict]:
        kwargs = llm_kwargs(self.config)  # user mistakes first, before the (slow) import
        self._vocab = vocab_size(self.config)
        self._end_id = end_id(self.config)
        self.module = import_trtllm()
        built = dict(kwargs)
        if isinstance(built.get("kv_cache_config"), dict):
            built["kv_cache_config"] = _kv_cache_config_class()(**built["kv_cache_config"])
        return kwargs, built

    def caps(self) -> tuple[dict[str, int | None], str]:
        caps = engine_caps(self.llm)
        setting = caps.pop("kv_cache_max_tokens_setting")
        notes = "" if caps["kv_cache_tokens"] else KV_NOTE + (f"; kv_cache_config.max_tokens={setting}"
                                                               if setting else "")
        return caps, notes

    def sampling_extra(self) -> dict:
        return {} if self._end_id is None else {"end_id": self._end_id}

    def measurement(self, outputs: Sequence, point: Point, duration_s: float) -> Measurement:
        return measurement_from_outputs(outputs, [point.input_len] * point.requests, duration_s)

    def needs_restart(self, error: BaseException) -> bool:
        text = str(error).lower()
        return type(error).__name__ in DEAD_ENGINE_ERRORS or any(w in text for w in DEAD_WORDS)
