"""Any OpenAI-compatible server, driven by the load generator (measure/loadgen.py).

offline points send all `batch_size` requests at once; concurrency points keep
`concurrency` in flight; rate points send at `request_rate` with the point's
`arrival` (poisson, gamma:cv=X, replay:PATH).  The server is not started here
(see vllm_server.py for a launched vLLM).
"""

from __future__ import annotations

import logging
import time
from typing import cast

import httpx

from fleetfacts.arrivals import arrival_times
from fleetfacts.specs import load_model_config
from measure.engines.base import EngineConfig, EngineError, EngineInfo
from measure.engines.registry import register
from measure.loadgen import LoadSpec, RequestSpec, load_request_log, run_load_sync, summarize_results
from measure.points import Point
from measure.stats import Measurement

log = logging.getLogger(__name__)

# How long start() waits for /health (or /v1/models) to answer 200.
READY_TIMEOUT_S = 60.0
READY_POLL_S = 0.25
# Vocabulary assumed for token-id prompts when the model's config.json is not at hand (ids stay small).
DEFAULT_TOKEN_VOCAB = 1000


def wait_ready(base_url: str, timeout_s: float, api_key: str | None = None, alive=None) -> None:
    """Poll /health, then /v1/models, until one answers 200; EngineError after `timeout_s`."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            raise EngineError(f"server at {base_url} exited before it was ready")
        for path in ("/health", "/v1/models"):
            try:
                if httpx.get(base_url + path, headers=headers, timeout=5.0).status_code == 200:
                    return
            except httpx.HTTPError as err:
                last = f"{type(err).__name__}"
        time.sleep(READY_POLL_S)
    raise EngineError(f"server at {base_url} not ready after {timeout_s:.0f} s ({last})")


def server_version(base_url: str, api_key: str | None = None) -> str:
    """The server's /version (vLLM answers {"version": ...}); 'unknown' otherwise."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(base_url + "/version", headers=headers, timeout=5.0)
        if response.status_code == 200:
            return str(response.json().get("version") or "unknown")
    except (httpx.HTTPError, ValueError):
        pass
    return "unknown"


def load_for_point(config: EngineConfig, point: Point, seed: int, vocab: int) -> LoadSpec:
    """The load-generator spec of one point."""
    n, concurrency = point.requests, None
    if point.mode == "offline":
        requests = tuple(RequestSpec(point.input_len, point.output_len) for _ in range(n))
        concurrency = n
    elif point.mode == "concurrency":
        requests = tuple(RequestSpec(point.input_len, point.output_len) for _ in range(n))
        concurrency = point.concurrency
    elif point.arrival.startswith("replay:"):
        requests = load_request_log(point.arrival.split(":", 1)[1])[:n]
    else:
        times = arrival_times(n, float(cast(float, point.request_rate)), point.arrival, seed)
        requests = tuple(RequestSpec(point.input_len, point.output_len, t) for t in times)
    return LoadSpec(base_url=config.base_url, requests=requests, endpoint=config.endpoint, model=config.served_model,
                    concurrency=concurrency, max_duration_s=config.point_timeout_s,
                    request_timeout_s=config.request_timeout_s, api_key=config.api_key,
                    ignore_eos=config.ignore_eos, prompt_format=config.prompt_format, vocab_size=vocab, seed=seed)


@register("openai")
class OpenAIEngine:
    """Drives a running server; start() only waits for it and asks its version."""

    modes = ("offline", "concurrency", "rate")

    def __init__(self, config: EngineConfig):
        self.config = config
        hf = load_model_config(config.model_path) if config.model_path else None
        self.vocab = int((hf or {}).get("vocab_size") or DEFAULT_TOKEN_VOCAB)
        self._version = "unknown"

    def version(self) -> str:
        return self.config.engine_version or self._version

    def start(self) -> EngineInfo:
        t0 = time.perf_counter()
        wait_ready(self.config.base_url, READY_TIMEOUT_S, self.config.api_key)
        self._version = server_version(self.config.base_url, self.config.api_key)
        self._warm_up()
        return EngineInfo(version=self.version(), start_s=time.perf_counter() - t0,
                          effective_args={"base_url": self.config.base_url, "endpoint": self.config.endpoint,
                                          "served_model": self.config.served_model,
                                          "ignore_eos": self.config.ignore_eos,
                                          "prompt_format": self.config.prompt_format})

    def _warm_up(self) -> None:
        spec = load_for_point(self.config, Point("concurrency", 8, 4, concurrency=2, num_requests=2),
                              self.config.seed + 999, self.vocab)
        result = run_load_sync(spec)
        bad = [r.error for r in result.results if not r.ok]
        if bad:
            raise EngineError(f"warm-up request to {self.config.base_url} failed: {bad[0]}")

    def run_point(self, point: Point, seed: int) -> Measurement:
        result = run_load_sync(load_for_point(self.config, point, seed, self.vocab))
        stats = summarize_results(result.results)
        ok = [r for r in result.results if r.ok]
        prompt_tokens = sum(r.prompt_tokens if r.prompt_tokens else 0 for r in ok)
        if not all(r.prompt_tokens for r in ok):
            prompt_tokens = sum(s.input_len for s in load_for_point(self.config, point, seed, 1).requests[:len(ok)])
        notes = [] if all(r.prompt_tokens for r in ok) else ["input tokens as requested (server sent no usage)"]
        if result.cancelled:
            notes.append(f"{result.cancelled} request(s) cut by the point time limit")
        return Measurement(num_requests=len(ok), duration_s=result.duration_s, input_tokens=prompt_tokens,
                           output_tokens=sum(r.output_tokens for r in ok), ttft_ms=stats["ttft_ms"],
                           tpot_ms=stats["tpot_ms"], itl_ms=stats["itl_ms"], e2e_ms=stats["e2e_ms"],
                           errors=stats["errors"], first_error=stats["first_error"], notes="; ".join(notes))

    def needs_restart(self, error: BaseException) -> bool:
        return False

    def stop(self) -> None:
        return None
