"""make_plan(map_routes=...): the same plan whether routes run here, in local processes or as Ray tasks."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from fleetfacts import extras
from fleetfacts.errors import InputError
from planner.cli import main
from planner.planning import fanout
from planner.planning.fanout import ProcessMap, RayMap, chunk_size, route_map
from planner.planning.plan import make_plan
from planner.planning.route_table import load_routes
from tests.conftest import REPO, bundled_catalog

ROUTES = Path(__file__).resolve().parents[2] / "examples" / "routes.csv"
# Two online routes and the batch one: each has its simulation check (the part worth spreading out).
ROUTE_NAMES = ("chat", "summarise-batch", "assistant-70b")


@pytest.fixture(scope="module")
def planned():
    catalog = bundled_catalog()
    routes = load_routes(ROUTES)
    routes = routes[routes.name.isin(ROUTE_NAMES)].reset_index(drop=True)
    return catalog, routes, make_plan(routes, catalog, check_by_simulation=True)


def assert_same_plan(a, b) -> None:
    pd.testing.assert_frame_equal(a.plan, b.plan)
    pd.testing.assert_frame_equal(a.options, b.options)


def test_local_processes_give_the_same_plan_in_route_order(planned):
    catalog, routes, sequential = planned
    parallel = make_plan(routes, catalog, check_by_simulation=True, map_routes=ProcessMap(2))
    assert list(parallel.plan.route) == list(ROUTE_NAMES)
    assert (parallel.plan.sim_replicas.notna()).all()  # the simulation checks ran in the pool
    assert_same_plan(parallel, sequential)


@pytest.mark.slow
def test_ray_tasks_give_the_same_plan(planned):
    ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install '.[ray]')")
    catalog, routes, sequential = planned
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert_same_plan(make_plan(routes, catalog, check_by_simulation=True, map_routes=RayMap("local")),
                         sequential)
    finally:
        ray.shutdown()


def test_route_map_choice_and_chunks():
    assert route_map() is None and route_map(1) is None
    assert isinstance(route_map(4), ProcessMap) and route_map(4).workers == 4
    assert chunk_size(1000, 2) == 125 and chunk_size(3, 8) == 1


@pytest.mark.parametrize("argv, message", [
    (["--workers", "0"], "--workers must be >= 1, got 0"),
    (["--ray", "auto"], "--ray needs Ray, which is not installed: pip install '.[ray]'"),
])
def test_bad_scale_flags_are_one_line_errors(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.setitem(sys.modules, "ray", None)  # as when Ray is not installed
    code = main(["plan", "--routes", str(ROUTES), "--out", str(tmp_path / "p.csv"), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1


def _pid(_item: object) -> int:
    return os.getpid()


def test_the_default_plans_routes_in_forked_processes_where_that_is_safe(monkeypatch):
    """auto_map (plan's default): on Linux with two CPUs or more, a pool of forked processes; this process for one
    route, or while this process runs other threads (a fork would copy a lock one of them holds)."""
    monkeypatch.setattr(fanout, "usable_cpus", lambda: 2)
    auto = fanout.auto_map()
    if sys.platform != "linux":
        assert auto is None
        return
    assert isinstance(auto, ProcessMap) and auto.workers == 2
    here = os.getpid()
    monkeypatch.setattr(fanout.threading, "active_count", lambda: 1)
    assert here not in auto(_pid, range(4))
    assert auto(_pid, [0]) == [here]
    monkeypatch.setattr(fanout.threading, "active_count", lambda: 2)
    assert auto(_pid, range(4)) == [here] * 4
    monkeypatch.setattr(fanout, "usable_cpus", lambda: 1)
    assert fanout.auto_map() is None


def test_the_default_falls_back_to_this_process_when_no_worker_can_start(monkeypatch, caplog):
    """A sandbox without fork (or a worker killed mid-plan): plan's default map plans here, and says so."""
    def no_processes(*args, **kwargs):
        raise PermissionError("fork refused")

    monkeypatch.setattr(fanout, "ProcessPoolExecutor", no_processes)
    monkeypatch.setattr(fanout.threading, "active_count", lambda: 1)
    with caplog.at_level("WARNING"):
        assert ProcessMap(2, auto=True)(_pid, range(3)) == [os.getpid()] * 3
    assert "worker processes failed" in caplog.text
    with pytest.raises(PermissionError):  # --workers N asked for processes: no silent fallback
        ProcessMap(2)(_pid, range(3))


def _unreadable(item: int) -> int:
    raise PermissionError(f"route {item}: its log cannot be read")


def test_a_routes_own_error_in_a_worker_is_raised_as_it_is_not_taken_for_a_pool_failure(monkeypatch, caplog):
    """An OSError a route's planning raises comes back to the caller once, unchanged; the default map does not
    mistake it for workers that could not start (and plan every route again here)."""
    monkeypatch.setattr(fanout.threading, "active_count", lambda: 1)
    for map_fn in (ProcessMap(2, auto=True), ProcessMap(2)):
        with caplog.at_level("WARNING"), pytest.raises(PermissionError, match="route 0: its log cannot be read"):
            map_fn(_unreadable, range(3))
    assert "worker processes failed" not in caplog.text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_ray_address_nobody_answers_is_one_line_in_bounded_time(tmp_path):
    """Issue 47: `plan --ray <unreachable>` hung past 60 s in Ray's connect; now a one-line error, exit 2, in
    seconds, whether or not Ray is installed (the address is checked first)."""
    address = f"127.0.0.1:{_free_port()}"  # a port nobody listens on
    started = time.monotonic()
    plan = subprocess.run([sys.executable, "-m", "planner", "plan", "--routes", str(ROUTES), "--out",
                           str(tmp_path / "p.csv"), "--ray", address], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert time.monotonic() - started < 30
    (line,) = plan.stderr.strip().splitlines()
    assert plan.returncode == 2 and line.startswith(f"error: --ray {address}: no Ray cluster answers"), line
    assert not (tmp_path / "p.csv").exists()


@pytest.mark.parametrize("address, host_port", [
    ("192.0.2.1:6379", "192.0.2.1:6379"),       # TEST-NET-1 (RFC 5737): never routed, a connect waits or fails
    ("ray://192.0.2.1:10001", "192.0.2.1:10001"),
    ("192.0.2.1", "192.0.2.1:6379"),             # Ray's default GCS port
    ("ray://192.0.2.1", "192.0.2.1:10001"),      # Ray Client's default port
    ("[::1]:1", "[::1]:1"),
])
def test_the_ray_connect_is_bounded(monkeypatch, address, host_port):
    monkeypatch.setattr(extras, "RAY_CONNECT_TIMEOUT_S", 0.5)
    started = time.monotonic()
    with pytest.raises(extras.RayUnreachable, match=rf"--ray {re.escape(address)}: no Ray cluster answers at "
                       rf"{re.escape(host_port)} within 0.5 s"):
        extras.check_ray_address(address)
    assert time.monotonic() - started < 5


def test_auto_and_local_ray_addresses_are_not_connected_to(monkeypatch):
    monkeypatch.setattr(extras.socket, "create_connection", lambda *a, **k: pytest.fail("connected"))
    extras.check_ray_address("auto")
    extras.check_ray_address("local")


@pytest.mark.parametrize("address", ["ray://", ":6379", "head:port", "head:70000"])
def test_a_ray_address_without_a_host_or_port_is_refused(address):
    with pytest.raises(InputError, match="expected a cluster address"):
        extras.check_ray_address(address)
