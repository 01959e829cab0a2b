"""Engine adapters: each starts one engine configuration and measures points in it.

Adapters register in `measure.engines.registry` (`@register("vllm")`); `make_engine`
picks the one a configuration asks for.  Adapters import their engine lazily (only
`start()` imports it), so `python -m measure` works without any engine installed.
"""

from __future__ import annotations

# Imported for their @register side effect: every adapter is then known to the registry.
from measure.engines import openai_engine, server, trtllm_offline, vllm_offline  # noqa: F401
from measure.engines.base import (
    Engine,
    EngineConfig,
    EngineError,
    EngineInfo,
    EngineNotInstalled,
    parse_engine_args,
)
from measure.engines.registry import create, register, registered

__all__ = ["Engine", "EngineConfig", "EngineError", "EngineInfo", "EngineNotInstalled", "adapter_name", "create",
           "make_engine", "parse_engine_args", "register", "registered"]

# Engines whose own OpenAI server --server launches (any other server: --server-cmd).
LAUNCHABLE_SERVERS = ("vllm", "trtllm")


def adapter_name(config: EngineConfig) -> str:
    """The registered adapter for `config`: the launched server for --server / --server-cmd, else the engine."""
    if config.server_cmd or (config.server and config.engine in LAUNCHABLE_SERVERS):
        return "server"
    return config.engine


def make_engine(config: EngineConfig) -> Engine:
    """The adapter for `config.engine` (vllm, trtllm, openai); a launched server for --server / --server-cmd."""
    return create(adapter_name(config), config)
