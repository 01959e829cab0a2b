"""Shared fixtures: a fake `vllm` module (adapter-logic tests), the repo root, and the bundled data fitted
once per test session."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# One BLAS thread, as `python -m planner` sets (planner/__main__.py): the transfer calibrations' small
# solves run 16x slower with worker threads on a busy 2-core machine.  Before numpy loads.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

REPO = Path(__file__).resolve().parent.parent
# The fit cache (planner/engine/fitcache.py) in a folder of this session's own, not the user's ~/.cache; subprocesses
# the tests start inherit it.
os.environ["FLEETPLAN_CACHE_DIR"] = tempfile.mkdtemp(prefix="fleetplan-test-cache-")


@functools.cache
def bundled_catalog(transfer: str = "auto"):
    """planner.planning.catalog.load_inputs(transfer=transfer) on the bundled data, fitted once per session (seconds each).

    Shared by every test that plans on the bundled data: read it, never modify it (a dataclasses.replace'd
    copy may change a table).  Another transfer mode shares the fitted curves, as load_inputs would fit them
    (and planner.engine.transfer_check memoises the transfer calibration on the profiles).
    """
    from planner.planning.catalog import load_inputs

    if transfer == "auto":
        return load_inputs()
    return dataclasses.replace(bundled_catalog(), transfer_mode=transfer)


@contextlib.contextmanager
def cli_fits_bundled_once() -> Iterator[None]:
    """In-process `planner.cli.main` runs on the bundled data get bundled_catalog() instead of fitting it again;
    a run given --profiles, --prices or --ops loads those as usual."""
    from planner.commands import fleet, plan, traffic
    from planner.planning.catalog import load_inputs as real

    def load_inputs(profiles_dir=None, prices=None, ops=None, transfer="auto", models=None):
        if profiles_dir is None and prices is None and ops is None:
            return bundled_catalog(transfer)  # every model's curves: those of `models` are the same
        return real(profiles_dir, prices, ops, transfer=transfer, models=models)

    with pytest.MonkeyPatch.context() as patch:
        for command in (plan, fleet, traffic):  # the commands that load the catalog
            patch.setattr(command, "load_inputs", load_inputs)
        yield


@pytest.fixture
def bundled_fitted_once():
    """cli_fits_bundled_once() for one test."""
    with cli_fits_bundled_once():
        yield


@pytest.fixture
def fake_vllm(monkeypatch):
    """Injects tests/measure/fake_vllm.py as `vllm` (tests our adapter logic only, not vLLM)."""
    from tests.measure import fake_vllm as module

    module.LLM.instances.clear()
    module.LLM.fail_input_len = module.LLM.die_input_len = None
    module.LLM.report_metrics = True
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


def code_completion_load(peak_to_mean: float | None = None):
    """The example's code-completion route (its log; `peak_to_mean` replaced when given), the load every path
    replays (planner.traffic.workload.route_load) and the vLLM FP8 H200 curve it is planned on."""
    from planner.planning.route_table import load_routes
    from planner.traffic.routes import Route
    from planner.traffic.workload import route_load, route_log_load

    routes = load_routes(Path(__file__).resolve().parents[1] / "examples" / "routes.csv")
    row = routes[routes["name"] == "code-completion"].iloc[0].to_dict()
    route = Route.from_row(row if peak_to_mean is None else {**row, "peak_to_mean": peak_to_mean})
    log, blocks = route_log_load(route)
    curve = next(c for c in bundled_catalog().curves.values()
                 if (c.key.engine, c.key.gpu, c.key.precision, c.key.model, c.key.config)
                 == ("vllm", "h200", "fp8", route.model, "default"))
    return route, route_load(route, log, blocks), curve


def is_number(text: str) -> bool:
    """Does a CSV cell read as a number ('-5' may start a cell that is not a formula)?"""
    try:
        float(text)
    except ValueError:
        return False
    return True
