"""What every engine adapter shares: the `Engine` protocol, its configuration, what it reports, its errors."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from fleetfacts.errors import FleetplanError, InputError
from measure.points import Point
from measure.stats import Measurement

# Weight files whose presence means a real checkpoint (else the dir is config-only: dummy weights).
WEIGHT_GLOBS = ("*.safetensors", "*.bin", "*.pt", "*.gguf")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")


class EngineError(FleetplanError, RuntimeError):
    """The engine could not be started or driven (reported without a traceback)."""


class EngineNotInstalled(EngineError):
    """The engine's Python package is missing."""


@dataclass(frozen=True)
class EngineConfig:
    """Everything an adapter needs to start one engine configuration."""

    engine: str
    model: str                       # profile slug, e.g. llama-3.1-8b
    model_path: str                  # what the engine loads: a dir or a hub id
    precision: str = "bf16"
    tp: int = 1
    engine_args: dict = field(default_factory=dict)
    server: bool = False
    seed: int = 0
    max_model_len: int | None = None  # longest input+output of the sweep (adapters use it as a default)
    # HTTP / load-generator settings (openai engine and server modes)
    base_url: str = ""
    served_model: str | None = None
    endpoint: str = "completions"
    api_key: str | None = None
    ignore_eos: bool = True
    prompt_format: str = "words"
    request_timeout_s: float = 600.0
    point_timeout_s: float | None = None
    server_port: int = 8000
    server_start_timeout_s: float = 600.0
    server_cmd: str = ""             # --server-cmd: the command line to launch, with {port} and {model}
    server_log: str = ""             # where the launched server's stdout/stderr go (<profile folder>/server.log)
    engine_version: str | None = None  # openai engine: the version to record when the server does not say

    def is_dummy(self) -> bool:
        """True when model_path is a local dir with config.json and no weight files."""
        path = Path(self.model_path)
        if not (path / "config.json").is_file():
            return False
        return not any(any(path.glob(g)) for g in WEIGHT_GLOBS)

    def has_tokenizer(self) -> bool:
        path = Path(self.model_path)
        if not path.is_dir():
            return True  # a hub id: the engine fetches its tokenizer
        return any((path / f).is_file() for f in TOKENIZER_FILES)


@dataclass(frozen=True)
class EngineInfo:
    """What a started engine reports about itself (None = not reported)."""

    version: str
    kv_cache_tokens: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    cuda_graph_max_batch: int | None = None
    effective_args: dict = field(default_factory=dict)
    start_s: float | None = None
    notes: str = ""


class Engine(Protocol):
    """An engine adapter: started once per configuration, then asked to measure points.

    `modes` are the point modes it runs (offline, concurrency, rate); the sweep skips others.
    `version()` fails fast (EngineNotInstalled) when the engine is missing; `start()` loads
    the engine and says what it reports; `run_point` measures one point; after a failed
    point `needs_restart(error)` says whether the engine died; `stop()` frees it.
    """

    @property
    def modes(self) -> tuple[str, ...]: ...

    def version(self) -> str: ...

    def start(self) -> EngineInfo: ...

    def run_point(self, point: Point, seed: int) -> Measurement: ...

    def needs_restart(self, error: BaseException) -> bool: ...

    def stop(self) -> None: ...


def parse_engine_args(items: list[str]) -> dict:
    """'key=value' strings to a dict; values parsed as JSON when possible (0.95, true, {"a":1}), else text."""
    out: dict = {}
    for item in items or []:
        if "=" not in item:
            raise InputError(f"--engine-arg {item!r}: expected key=value (e.g. gpu_memory_utilization=0.95)")
        key, raw = item.split("=", 1)
        key = key.strip().replace("-", "_")
        if not key:
            raise InputError(f"--engine-arg {item!r}: empty key")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def kv_cache_precision(engine_args: dict) -> str:
    """Precision slug of the KV cache: fp8 under --engine-arg kv_cache_dtype=fp8..., else 16-bit (bf16)."""
    return "fp8" if str(engine_args.get("kv_cache_dtype", "")).startswith("fp8") else "bf16"


def random_token_prompts(num: int, length: int, vocab_size: int, seed: int) -> list[list[int]]:
    """`num` distinct prompts of `length` random token ids, seeded; the first id makes each unique.

    Random ids over a ~100k vocabulary already make prefix-cache hits vanishingly
    rare; the first token is also set from the request index so no two prompts
    share even a first block.
    """
    if vocab_size < 2:
        raise EngineError(f"vocabulary size {vocab_size} is too small to build prompts")
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab_size, size=(num, length), dtype=np.int64)
    ids[:, 0] = np.arange(num) % vocab_size
    return ids.tolist()


def token_id_prompts(num: int, length: int, vocab_size: int, seed: int) -> list[dict]:
    """random_token_prompts as the `{"prompt_token_ids": [...]}` inputs vLLM and TensorRT-LLM take."""
    return [{"prompt_token_ids": ids} for ids in random_token_prompts(num, length, vocab_size, seed)]


def timed_generate(llm: Any, prompts: list, params: Any) -> tuple[list, float]:
    """One `llm.generate` call over the whole batch, timed alone: (outputs, seconds).

    Prompts and sampling parameters are built by the caller before the clock
    starts, so the timed region is the engine's work, as in `vllm bench throughput`.
    """
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    return outputs, time.perf_counter() - start


def positive_int(value: object) -> int | None:
    """value if it is a positive int (not a bool), else None: for defensive reads of engine configs."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
