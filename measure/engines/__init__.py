"""Engine adapters: each starts one engine configuration and measures points in it.

Adapters import their engine lazily (only `start()` imports it), so
`python -m measure` works without any engine installed.
"""

from __future__ import annotations

from measure.engines.base import EngineConfig, EngineError, EngineInfo, EngineNotInstalled, parse_engine_args

__all__ = ["EngineConfig", "EngineError", "EngineInfo", "EngineNotInstalled", "parse_engine_args", "make_engine"]


def make_engine(config: EngineConfig):
    """The adapter for `config.engine` (vllm, trtllm, openai); a launched server for --server / --server-cmd."""
    if config.server_cmd or (config.server and config.engine in ("vllm", "trtllm")):
        from measure.engines.server import ServerEngine
        return ServerEngine(config)
    if config.engine == "vllm":
        from measure.engines.vllm_offline import VllmOfflineEngine
        return VllmOfflineEngine(config)
    if config.engine == "trtllm":
        from measure.engines.trtllm_offline import TrtllmOfflineEngine
        return TrtllmOfflineEngine(config)
    if config.engine == "openai":
        from measure.engines.openai_engine import OpenAIEngine
        return OpenAIEngine(config)
    raise EngineError(f"unknown engine {config.engine!r}: expected vllm, trtllm or openai")
