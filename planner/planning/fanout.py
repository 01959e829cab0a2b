"""Where the per-route planning runs: this process, a pool of local processes, or a Ray cluster.

The CLI edge of planner/: `make_plan(..., map_routes=...)` takes a map function and stays pure;
this module builds one.  `route_map(workers, ray)` -> the builtin map (one core), a process pool's map
(`--workers N`), or a Ray map (`--ray ADDRESS|auto|local`); `auto_map()` -> the CLI's default: a process per
route up to the usable CPUs where forking is cheap and safe (Linux, a process without other threads, two routes
or more), else this process.  Each returns results in input order, so the plan is the same whichever runs it.
Ray is imported only when asked for, after its address answers (fleetfacts/extras.py check_ray_address).

No worker outlives the run: the pool's workers are killed when the map stops for any reason (Ctrl-C, SIGTERM
raised as planner.stopping.Terminated, a dead worker), and each worker ends when its parent dies, even by SIGKILL.
"""

from __future__ import annotations

import ctypes
import logging
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from fleetfacts.errors import FleetplanError, InputError
from fleetfacts.extras import check_ray_address, import_ray

# Chunks per worker: enough to even out routes of very different simulation cost, few enough that the
# per-chunk overhead (a task, a result transfer) stays small next to a route's simulation (~1-5 s).
CHUNKS_PER_WORKER = 4
LOCAL = "local"
# Linux prctl(PR_SET_PDEATHSIG): a worker gets SIGKILL when its parent dies, even by SIGKILL (no cleanup runs then);
# measure/engines/server.py does the same for an engine server.
PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
# Elsewhere a thread in each worker looks for its parent this often: an orphan ends within a second.
PARENT_POLL_S = 1.0
WORKER_DIED = ("a worker process planning the routes died (killed, e.g. by the out-of-memory killer); nothing was "
               "written: plan again, with fewer --workers for less memory, or --workers 1 to plan in this process")

Fn = Callable[[Any], Any]
MapFn = Callable[[Fn, Iterable[Any]], list[Any]]

log = logging.getLogger(__name__)

_WORKER_FN: Fn | None = None  # set once per pool process by _install (the function and its catalog)


def route_map(workers: int | None = None, ray: str | None = None) -> MapFn | None:
    """A map function for make_plan, or None for the builtin map; InputError for workers < 1."""
    if ray:
        return RayMap(ray)
    if workers is None or workers == 1:
        return None
    if workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")
    return ProcessMap(workers)


def auto_map() -> MapFn | None:
    """The CLI's default map: local processes, one per route up to the usable CPUs, on Linux (fork: a worker
    starts in milliseconds with the catalog already loaded); None (this process) elsewhere or on one CPU."""
    cpus = usable_cpus()
    if sys.platform != "linux" or cpus < 2:
        return None
    return ProcessMap(cpus, auto=True)


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def chunk_size(items: int, workers: int) -> int:
    return max(1, math.ceil(items / (workers * CHUNKS_PER_WORKER)))


class WorkerDied(FleetplanError, RuntimeError):
    """A worker process of `--workers N` died mid-run (the default pool plans in this process instead)."""


def _install(fn: Fn, parent: int | None = None) -> None:
    """A pool process's start: the function, signals, and an end with `parent` (the pid that made the pool)."""
    global _WORKER_FN
    _WORKER_FN = fn
    # Ctrl-C reaches the whole process group: the parent stops the pool and says so in one line; a worker would
    # print a KeyboardInterrupt traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A forked worker inherits the parent's SIGTERM handler (planner/stopping.py): the parent's kill must just end it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent(os.getppid() if parent is None else parent)


def _die_with_parent(parent: int) -> None:
    """End this worker when its parent process (`parent`, the pid that made the pool, read there: a worker that
    reads its own parent after the parent died would watch the process that adopted it) ends, however it ends:
    Linux's parent-death signal, else a thread that polls os.getppid() (a process whose parent died is adopted by
    another)."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    else:
        threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)


def _exit_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


@dataclass(frozen=True)
class _Raised:
    """What a route's planning raised in a worker, returned as its result: the parent raises it again, and a
    failure of the pool itself (no process could start, a worker died) stays apart from it."""

    error: Exception


def _call(item: Any) -> Any:
    assert _WORKER_FN is not None, "pool process started without _install"
    try:
        return _WORKER_FN(item)
    except Exception as err:  # noqa: BLE001 - raised again, unchanged, by the parent (_unwrapped)
        return _Raised(err)


def _unwrapped(result: Any) -> Any:
    if isinstance(result, _Raised):
        raise result.error
    return result


class ProcessMap:
    """map over a pool of `workers` local processes; the function (with the catalog) is sent once per process.

    auto (the CLI's default, auto_map): forked workers, and this process instead for fewer than two items or
    when this process runs other threads (a fork copies none of them, and a lock one of them holds stays held).
    """

    def __init__(self, workers: int, auto: bool = False):
        self.workers = workers
        self.auto = auto

    def __call__(self, fn: Fn, items: Iterable[Any]) -> list[Any]:
        items = list(items)
        if self.auto and (len(items) < 2 or threading.active_count() > 1):
            return [fn(item) for item in items]
        try:
            results = self._pooled(fn, items, multiprocessing.get_context("fork") if self.auto else None)
        except (OSError, BrokenProcessPool) as err:  # the pool's own failure (a route's error is a result)
            if not self.auto:  # --workers N asked for processes: fail, in one line (no traceback for a dead worker)
                if isinstance(err, BrokenProcessPool):
                    raise WorkerDied(WORKER_DIED) from None
                raise
            log.warning("planning the routes in this process: the worker processes failed (%s)", err)
            return [fn(item) for item in items]
        return [_unwrapped(result) for result in results]

    def _pooled(self, fn: Fn, items: list[Any], context: Any) -> list[Any]:
        workers = min(self.workers, len(items)) or 1
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_install,
                                 initargs=(fn, os.getpid())) as pool:
            try:
                return list(pool.map(_call, items, chunksize=chunk_size(len(items), workers)))
            except BaseException:  # Ctrl-C, SIGTERM, a dead worker: the run is over, no worker goes on
                _kill_workers(pool)
                raise


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """Kill the pool's workers, then wait for its thread: a worker holds nothing to save (the plan is written only
    once every route is planned), and letting it finish its route would delay the stop by seconds."""
    for process in list((pool._processes or {}).values()):  # noqa: SLF001 - public (kill_workers) from 3.14 only
        process.kill()
    pool.shutdown(wait=True, cancel_futures=True)


def _apply_chunk(fn: Fn, chunk: list[Any]) -> list[Any]:
    return [fn(item) for item in chunk]


class RayMap:
    """map as Ray tasks over chunks; the function (with the catalog) goes into the object store once."""

    def __init__(self, address: str):
        check_ray_address(address)
        self.address = address
        self.ray = import_ray()

    def __call__(self, fn: Fn, items: Iterable[Any]) -> list[Any]:
        ray, items = self.ray, list(items)
        started_here = not ray.is_initialized()
        if started_here:
            ray.init(**({} if self.address == LOCAL else {"address": self.address}), log_to_driver=False,
                     runtime_env=_runtime_env())
        try:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
            size = chunk_size(len(items), workers)
            task, fn_ref = ray.remote(_apply_chunk), ray.put(fn)
            refs = [task.remote(fn_ref, items[i:i + size]) for i in range(0, len(items), size)]
            return [result for chunk in ray.get(refs) for result in chunk]
        finally:
            if started_here:
                ray.shutdown()


def _runtime_env() -> dict[str, Any]:
    """The project's packages travel to the Ray workers (nodes need Python, Ray and the requirements)."""
    import fleetfacts  # noqa: PLC0415
    import planner  # noqa: PLC0415

    return {"py_modules": [os.path.dirname(os.path.abspath(m.__file__ or "")) for m in (planner, fleetfacts)]}
