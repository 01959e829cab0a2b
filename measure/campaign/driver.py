"""The campaign driver: turns job events into profile folders, keeps the status file, runs jobs locally or on Ray.

The driver (this machine) owns the profile folders: workers stream each finished point back, and each job's
sink appends it to its profile.csv as it arrives (fsync'ed, as `measure profile` does), skipping a point that
already has an ok row (no duplicates after a retried or resumed job), and writes the worker node's environment
into env.json.  A killed driver or a lost node loses no point the driver had written.  The status file
(`<campaign>.status.json`, rewritten atomically on every change) records each job's state, its counts, the
node it ran on and the error of a failed job; a failing job is recorded there and the campaign goes on.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from measure.campaign.plan import JobPayload, PlannedJob
from measure.campaign.ray_tasks import ray_executor
from measure.campaign.worker import DONE, ENV, ERROR, NODE, ROW, Event, run_job
from measure.points import point_from_mapping
from measure.profile_dir import ProfileDir

log = logging.getLogger(__name__)

PENDING, RUNNING, DONE_STATE, INCOMPLETE, FAILED = "pending", "running", "done", "incomplete", "failed"


# ---------------------------------------------------------------- status

@dataclass
class JobState:
    """One job's progress in this invocation (mutable: the sink updates it as events arrive)."""

    label: str
    folder: str
    gpu: str
    tp: int
    state: str
    pending: int
    ok: int = 0
    failed: int = 0
    duplicates: int = 0
    node: str = ""
    error: str = ""


class StatusFile:
    """The campaign's status JSON, rewritten atomically whenever a job changes."""

    def __init__(self, path: Path, campaign: str, jobs: list[PlannedJob]):
        self.path, self.campaign = path, campaign
        self.jobs = {j.index: JobState(label=j.label, folder=str(j.out), gpu=j.gpu, tp=j.tp,
                                       state=PENDING if j.payload else DONE_STATE, pending=j.pending)
                     for j in jobs}

    def write(self) -> None:
        data = {"campaign": self.campaign, "updated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "jobs": [asdict(s) for s in self.jobs.values()]}
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    def unfinished(self) -> list[JobState]:
        return [s for s in self.jobs.values() if s.state != DONE_STATE]


class JobSink:
    """Receives one job's events on the driver and writes its profile folder."""

    def __init__(self, payload: JobPayload, status: StatusFile, progress: Any):
        self.payload, self.status, self.progress = payload, status, progress
        self.state = status.jobs[payload.index]
        self.profile = ProfileDir(payload.request.out)
        self.runs = self.profile.env_runs()
        self.ok_keys = {k for k, v in self.profile.point_status().items() if v == "ok"}

    def handle(self, event: Event) -> None:
        if event.kind == ROW:
            self._row(event.data)
        elif event.kind == ENV:
            self.runs.append(event.data)
            self.profile.write_env(self.payload.request.identity, self.runs)
        elif event.kind == NODE:
            self.state.node = str(event.data)
        elif event.kind == DONE:
            left = int(event.data.get("remaining", 0))
            self.state.state = INCOMPLETE if event.data.get("stopped_for_time") else DONE_STATE
            self.state.error = f"budget reached with {left} point(s) left" if left else ""
        elif event.kind == ERROR:
            self.fail(str(event.data))
            return
        self.status.write()

    def fail(self, reason: str) -> None:
        self.state.state, self.state.error = FAILED, reason
        log.error("job %s failed: %s", self.payload.label, reason)
        self.status.write()

    def start(self) -> None:
        self.state.state = RUNNING
        self.status.write()

    @property
    def running(self) -> bool:
        """Started, and no done or error event yet."""
        return self.state.state == RUNNING

    def _row(self, row: dict) -> None:
        key = point_from_mapping(row, f"{self.payload.label} row").key()
        if key in self.ok_keys:  # a re-run point already measured: keep the first, count the duplicate
            self.state.duplicates += 1
            return
        self.profile.append(row)
        if row["status"] == "ok":
            self.ok_keys.add(key)
            self.state.ok += 1
        else:
            self.state.failed += 1
        if self.progress is not None:
            self.progress.update(1)
            self.progress.set_postfix_str(f"{self.payload.label}: {row['mode']} I={row['input_len']} "
                                          f"O={row['output_len']} -> {row['status']}")


# ---------------------------------------------------------------- executors

Executor = Callable[[list[JobPayload], dict[int, JobSink]], None]


def run_locally(payloads: list[JobPayload], sinks: dict[int, JobSink]) -> None:
    """One job after another, in this process (the engines run on this machine's GPUs)."""
    for payload in payloads:
        sink = sinks[payload.index]
        sink.start()
        run_job(payload, sink.handle)
        if sink.running:  # no done/error event: cannot happen unless run_job changes
            sink.fail("the job ended without reporting")


def make_executor(ray_address: str | None) -> Executor:
    if not ray_address:
        return run_locally
    return ray_executor(ray_address)   # imports Ray only now
