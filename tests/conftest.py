"""Shared fixtures: a fake `vllm` module (adapter-logic tests) and the repo root."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# One BLAS thread, as `python -m planner` sets (planner/__main__.py): the transfer calibrations' small
# solves run 16x slower with worker threads on a busy 2-core machine.  Before numpy loads.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

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
