"""Campaign jobs as Ray tasks: each asks for `num_gpus=tp` plus `{<gpu type>: tp}` and streams its events back.

Nodes say which GPUs they have with a custom resource named by the GPU slug, e.g.
`ray start --address HEAD:6379 --num-gpus 8 --resources '{"h200": 8}'`; a job of `gpu: h200, tp: 2` then
runs only on such a node.  Each task is a Ray streaming generator (one event per finished point), so the
driver writes a point as soon as it is measured.  Tasks are not retried by Ray (`max_retries=0`): a lost
node fails its job, the points already streamed stay written, and `--resume` plans only what is missing.
The project's `measure` and `fleetfacts` packages travel with the tasks (`runtime_env` `py_modules`), so
the nodes need Python, Ray and the engine, not a checkout; paths in jobs (model_path) must exist there.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fleetfacts
import measure
from fleetfacts.extras import check_ray_address, import_ray
from measure.campaign.plan import JobPayload
from measure.campaign.worker import NODE, Event, EventSink, run_job
from measure.envinfo import gpu_info

log = logging.getLogger(__name__)

# How long the driver waits for any job's next event before looking again (s); only bounds Ctrl-C latency.
WAIT_POLL_S = 1.0
LOCAL = "local"


def ray_executor(address: str):
    """An executor for measure.campaign.driver: connects to (or, for `local`, starts) Ray; MissingExtra without Ray,
    RayUnreachable (one line, in seconds) when nothing answers at the address."""
    check_ray_address(address)
    ray = import_ray()

    def execute(payloads: list[JobPayload], sinks: dict[int, EventSink]) -> None:
        _connect(ray, address, payloads)
        try:
            _run(ray, payloads, sinks)
        finally:
            ray.shutdown()

    return execute


def _connect(ray: Any, address: str, payloads: list[JobPayload]) -> None:
    runtime_env = {"py_modules": [str(Path(m.__file__ or "").resolve().parent) for m in (measure, fleetfacts)]}
    kwargs: dict[str, Any] = {"runtime_env": runtime_env, "log_to_driver": False,
                              "logging_level": logging.WARNING}
    if address == LOCAL:
        # One node: this machine, declaring each GPU type the campaign names with all its GPUs.
        gpus = _local_gpu_count()
        ray.init(num_gpus=gpus, resources={g: gpus for g in {p.gpu for p in payloads}}, **kwargs)
    else:
        ray.init(address=address, **kwargs)


def _local_gpu_count() -> int:
    return len(gpu_info())


def _run(ray: Any, payloads: list[JobPayload], sinks: dict[int, EventSink]) -> None:
    task = ray.remote(max_retries=0)(stream_job)
    have = ray.cluster_resources()
    running: dict[Any, JobPayload] = {}
    for payload in payloads:
        missing = _missing_resources(payload, have)
        if missing:
            sinks[payload.index].fail(missing)
            continue
        generator = task.options(num_gpus=payload.tp, resources={payload.gpu: payload.tp},
                                 name=f"measure {payload.label}").remote(payload)
        running[generator] = payload
        sinks[payload.index].start()
    while running:
        ready, _ = ray.wait(list(running), num_returns=1, timeout=WAIT_POLL_S)
        for generator in ready:
            _next_event(ray, generator, running, sinks)


def _missing_resources(payload: JobPayload, have: dict[str, float]) -> str:
    """Why no node can ever run this job ('' when the cluster declares enough), so it fails instead of hanging."""
    if have.get(payload.gpu, 0) >= payload.tp and have.get("GPU", 0) >= payload.tp:
        return ""
    return (f"no Ray node declares {payload.tp} GPU(s) of type {payload.gpu!r} (cluster has "
            f"{payload.gpu}={have.get(payload.gpu, 0):g}, GPU={have.get('GPU', 0):g}); start nodes with "
            f"--num-gpus N --resources '{{\"{payload.gpu}\": N}}'")


def _next_event(ray: Any, generator: Any, running: dict[Any, JobPayload], sinks: dict[int, EventSink]) -> None:
    payload = running[generator]
    sink = sinks[payload.index]
    try:
        event = ray.get(next(generator))
    except StopIteration:
        del running[generator]
        if sink.running:
            sink.fail("the task ended without reporting")
        return
    except ray.exceptions.RayError as err:  # a lost node or worker: its streamed points are already written
        del running[generator]
        sink.fail(f"{type(err).__name__}: {' '.join(str(err).split())[:300]}")
        return
    sink.handle(event)


def stream_job(payload: JobPayload) -> Iterator[Event]:
    """The Ray task body (a generator): runs the job in a thread and yields its events as they come."""
    import ray  # noqa: PLC0415 - runs on a Ray worker

    yield Event(NODE, ray.get_runtime_context().get_node_id())
    events: queue.Queue[Event | None] = queue.Queue()

    def work() -> None:
        try:
            run_job(payload, events.put)
        finally:
            events.put(None)

    threading.Thread(target=work, name=f"job {payload.label}", daemon=True).start()
    while (event := events.get()) is not None:
        yield event
