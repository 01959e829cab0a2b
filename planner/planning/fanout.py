"""Where the per-route planning runs: this process, a pool of local processes, or a Ray cluster.

The CLI edge of planner/: `make_plan(..., map_routes=...)` takes a map function and stays pure;
this module builds one.  `route_map(workers, ray)` -> the builtin map (one core), a process pool's map
(`--workers N`), or a Ray map (`--ray ADDRESS|auto|local`).  Each returns results in input order, so the
plan is the same whichever runs it.  Ray is imported only when asked for.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from fleetfacts.errors import InputError
from fleetfacts.extras import import_ray

# Chunks per worker: enough to even out routes of very different simulation cost, few enough that the
# per-chunk overhead (a task, a result transfer) stays small next to a route's simulation (~1-5 s).
CHUNKS_PER_WORKER = 4
LOCAL = "local"

Fn = Callable[[Any], Any]
MapFn = Callable[[Fn, Iterable[Any]], list[Any]]

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


def chunk_size(items: int, workers: int) -> int:
    return max(1, math.ceil(items / (workers * CHUNKS_PER_WORKER)))


def _install(fn: Fn) -> None:
    global _WORKER_FN
    _WORKER_FN = fn


def _call(item: Any) -> Any:
    assert _WORKER_FN is not None, "pool process started without _install"
    return _WORKER_FN(item)


class ProcessMap:
    """map over a pool of `workers` local processes; the function (with the catalog) is sent once per process."""

    def __init__(self, workers: int):
        self.workers = workers

    def __call__(self, fn: Fn, items: Iterable[Any]) -> list[Any]:
        items = list(items)
        workers = min(self.workers, len(items)) or 1
        with ProcessPoolExecutor(workers, initializer=_install, initargs=(fn,)) as pool:
            return list(pool.map(_call, items, chunksize=chunk_size(len(items), workers)))


def _apply_chunk(fn: Fn, chunk: list[Any]) -> list[Any]:
    return [fn(item) for item in chunk]


class RayMap:
    """map as Ray tasks over chunks; the function (with the catalog) goes into the object store once."""

    def __init__(self, address: str):
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
