"""measure.engines.registry: adapters register by name; make_engine picks one from the config."""

from __future__ import annotations

import pytest

from measure.engines import EngineConfig, EngineError, adapter_name, create, register, registered
from measure.engines.openai_engine import OpenAIEngine
from measure.engines.server import ServerEngine
from measure.engines.trtllm_offline import TrtllmOfflineEngine
from measure.engines.vllm_offline import VllmOfflineEngine


def test_every_adapter_is_registered():
    assert set(registered()) >= {"vllm", "trtllm", "openai", "server"}
    for name, cls in (("vllm", VllmOfflineEngine), ("trtllm", TrtllmOfflineEngine), ("openai", OpenAIEngine),
                      ("server", ServerEngine)):
        config = EngineConfig(engine=name, model="m", model_path="hub/id", base_url="http://x", server=True,
                              server_cmd="srv --port {port}" if name in ("server", "openai") else "")
        assert type(create(name, config)) is cls


def test_adapter_name_for_servers_and_engines():
    cfg = dict(model="m", model_path="p")
    assert adapter_name(EngineConfig(engine="vllm", **cfg)) == "vllm"
    assert adapter_name(EngineConfig(engine="vllm", server=True, **cfg)) == "server"
    assert adapter_name(EngineConfig(engine="openai", server=True, **cfg)) == "openai"
    assert adapter_name(EngineConfig(engine="openai", server_cmd="srv --port {port}", **cfg)) == "server"


def test_unknown_name_and_a_taken_name_are_refused():
    with pytest.raises(EngineError, match="unknown engine 'nope'.*vllm"):
        create("nope", EngineConfig(engine="nope", model="m", model_path="p"))
    with pytest.raises(ValueError, match="already registered"):
        register("vllm")(OpenAIEngine)
