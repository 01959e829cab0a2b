"""The worker side of a campaign job: run its pending points with the `measure profile` sweep, emitting events.

Events (`Event(kind, data)`), in order: `node` (where it runs; Ray only), `env` (the environment record,
taken on this node when the engine is up), one `row` per finished point (a PROFILE row), then `done`
(whether the budget stopped it, and how many points were left) or `error` (one line).  The driver turns
them into profile.csv rows and env.json records; the worker writes nothing itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from measure.campaign.plan import JobPayload
from measure.engines import make_engine
from measure.estimate import ENGINE_START_S
from measure.profile_job import run_record
from measure.roofline import roofline_for
from measure.sweep import Budget, Sweep, one_line

log = logging.getLogger(__name__)

ROW, ENV, NODE, DONE, ERROR = "row", "env", "node", "done", "error"


@dataclass(frozen=True)
class Event:
    """One message from a job to the driver."""

    kind: str
    data: Any


class EventSink(Protocol):
    """Where one job's events go on the driver (measure.campaign.driver.JobSink), whichever executor runs it."""

    @property
    def running(self) -> bool: ...
    def start(self) -> None: ...
    def handle(self, event: Event) -> None: ...
    def fail(self, reason: str) -> None: ...


def run_job(payload: JobPayload, emit: Callable[[Event], None]) -> None:
    """Run `payload` here; every outcome is an event, nothing raises but
    KeyboardInterrupt (a failing job must not stop the campaign)."""
    req = payload.request
    try:
        engine = make_engine(req.config)
        engine.version()  # a missing engine package fails here, before anything starts

        def on_start(info) -> None:
            emit(Event(ENV, run_record(req, info, list(payload.argv), payload.record_hostname)))

        sweep = Sweep(engine=engine, identity=payload.identity, points=list(payload.points),
                      write_row=lambda row: emit(Event(ROW, row)), estimate_s=payload.estimator.point_s,
                      engine_start_estimate_s=ENGINE_START_S, budget=Budget(payload.budget_s), seed=payload.seed,
                      calibration=payload.calibration(), roofline=roofline_for(payload.gpu, req.config),
                      on_engine_start=on_start)
        outcome = sweep.run()
    except Exception as err:  # noqa: BLE001 - reported as the job's failure; the campaign goes on
        log.debug("job %s failed", payload.label, exc_info=True)
        emit(Event(ERROR, one_line(err)))
        return
    emit(Event(DONE, {"stopped_for_time": outcome.stopped_for_time, "remaining": outcome.remaining_points}))
