"""Shared fixtures: a fake `vllm` module (adapter-logic tests) and the repo root."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def fake_vllm(monkeypatch):
    """Injects tests/measure/fake_vllm.py as `vllm` (tests our adapter logic only, not vLLM)."""
    from tests.measure import fake_vllm as module

    module.LLM.instances.clear()
    module.LLM.fail_input_len = module.LLM.die_input_len = None
    module.LLM.report_metrics = True
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module
