"""The skeleton every in-process `LLM(...)` adapter shares (vLLM, TensorRT-LLM).

One engine per configuration; `start()` builds the engine's `LLM`, warms it up with
a few short requests and reports its caps; each offline point submits N token-id
prompts (built before the clock starts) in ONE `llm.generate(...)` call and times
only that call, as `vllm bench throughput` does.  Sampling: temperature 1, top_p 1,
ignore_eos, max_tokens = output_len, detokenize=False.  A subclass supplies what
differs: importing the engine and its `LLM` arguments, reading its caps, the
measurement of a call's outputs, and how to tell a dead engine.
"""

from __future__ import annotations

import gc
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, ClassVar

from measure.engines.base import EngineConfig, EngineError, EngineInfo, timed_generate, token_id_prompts
from measure.points import Point
from measure.stats import Measurement

log = logging.getLogger(__name__)

# Warm-up after engine start: a couple of short requests so the first point pays no lazy initialisation.
WARMUP_REQUESTS, WARMUP_PROMPT_LEN, WARMUP_OUTPUT_LEN = 4, 32, 8
# Offset of the warm-up prompts' seed from the sweep's, so warm-up prompts never equal a point's.
WARMUP_SEED_OFFSET = 999


class OfflineLLMEngine(ABC):
    """An engine's `LLM` in this process; one instance per (model, precision, engine args)."""

    modes: ClassVar[tuple[str, ...]] = ("offline",)
    name: ClassVar[str]          # the --engine slug, for messages
    display_name: ClassVar[str]  # the engine's own name, for log lines
    module_name: ClassVar[str]   # the Python package that holds `LLM` and `SamplingParams`

    def __init__(self, config: EngineConfig):
        self.config = config
        self.llm: Any = None
        self.module: Any = None
        self._vocab = 0

    # ---------------------------------------------------------------- what a subclass supplies

    @abstractmethod
    def import_engine(self) -> ModuleType:
        """The engine's module, or EngineNotInstalled with the install hint."""

    @abstractmethod
    def prepare(self) -> tuple[dict, dict]:
        """Check the config, import the engine (self.module) and return the LLM arguments: (as recorded, as passed)."""

    @abstractmethod
    def caps(self) -> tuple[dict[str, int | None], str]:
        """The started engine's caps (EngineInfo fields) and a note about what it did not report."""

    @abstractmethod
    def measurement(self, outputs: Sequence, point: Point, duration_s: float) -> Measurement:
        """The Measurement of one generate() call of `point`."""

    @abstractmethod
    def needs_restart(self, error: BaseException) -> bool:
        """True when `error` means the engine is gone and must be started again."""

    def after_load(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Read what the loaded engine knows (e.g. its vocabulary) before the warm-up; nothing by default."""

    def sampling_extra(self) -> dict:
        """Extra SamplingParams arguments; none by default."""
        return {}

    def shutdown_hook(self, llm: Any) -> Callable[[], object] | None:
        """The engine's shutdown callable, if it has one."""
        return getattr(llm, "shutdown", None)

    # ---------------------------------------------------------------- the shared skeleton

    def version(self) -> str:
        return str(getattr(self.import_engine(), "__version__", "unknown"))

    def start(self) -> EngineInfo:
        kwargs, built = self.prepare()
        log.info("starting %s.LLM(%s)", self.module_name, kwargs)
        t0 = time.perf_counter()
        self.llm = self.module.LLM(**built)
        self.after_load()
        self._warm_up()
        caps, notes = self.caps()
        return EngineInfo(version=str(getattr(self.module, "__version__", "unknown")), effective_args=kwargs,
                          start_s=time.perf_counter() - t0, notes=notes, **caps)

    def _sampling(self, output_len: int) -> Any:
        return self.module.SamplingParams(n=1, temperature=1.0, top_p=1.0, ignore_eos=True, max_tokens=output_len,
                                          detokenize=False, **self.sampling_extra())

    def _warm_up(self) -> None:
        prompts = token_id_prompts(WARMUP_REQUESTS, WARMUP_PROMPT_LEN, self._vocab,
                                   self.config.seed + WARMUP_SEED_OFFSET)
        self.llm.generate(prompts, self._sampling(WARMUP_OUTPUT_LEN), use_tqdm=False)

    def run_point(self, point: Point, seed: int) -> Measurement:
        """Submit the batch in one generate() call; time only that call."""
        if point.mode != "offline":
            raise EngineError(f"{self.name} in process runs offline points only, not {point.mode}")
        prompts = token_id_prompts(point.requests, point.input_len, self._vocab, seed)
        outputs, duration = timed_generate(self.llm, prompts, self._sampling(point.output_len))
        return self.measurement(outputs, point, duration)

    def stop(self) -> None:
        """Shut the engine down and free GPU memory (best effort)."""
        llm, self.llm = self.llm, None
        if llm is None:
            return
        try:
            shutdown = self.shutdown_hook(llm)
            if callable(shutdown):
                shutdown()
        except Exception as err:  # noqa: BLE001
            log.warning("%s shutdown: %s", self.display_name, err)
        del llm
        gc.collect()
