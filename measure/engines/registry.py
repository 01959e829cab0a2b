"""The engine registry: each adapter registers its class under a name, `create` builds one.

    @register("vllm")
    class VllmOfflineEngine: ...

    engine = create("vllm", config)

Adapters register when their module is imported; `measure.engines` imports them all
(importing an adapter module is cheap: the engine itself is imported only in `start()`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from measure.engines.base import Engine, EngineConfig, EngineError

EngineFactory = Callable[[EngineConfig], Engine]
F = TypeVar("F", bound=EngineFactory)

_ADAPTERS: dict[str, EngineFactory] = {}


def register(name: str) -> Callable[[F], F]:
    """Class decorator: `create(name, config)` builds this adapter; ValueError when the name is taken."""

    def add(factory: F) -> F:
        if name in _ADAPTERS and _ADAPTERS[name] is not factory:
            raise ValueError(f"engine adapter {name!r} is already registered ({_ADAPTERS[name]!r})")
        _ADAPTERS[name] = factory
        return factory

    return add


def registered() -> tuple[str, ...]:
    """The registered adapter names, sorted."""
    return tuple(sorted(_ADAPTERS))


def create(name: str, config: EngineConfig) -> Engine:
    """The adapter registered as `name`, built for `config`; EngineError for an unknown name."""
    factory = _ADAPTERS.get(name)
    if factory is None:
        raise EngineError(f"unknown engine {name!r}: expected one of {', '.join(registered())}")
    return factory(config)
