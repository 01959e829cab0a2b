"""The campaign driver: turns job events into profile folders, keeps the status file, runs jobs locally or on Ray.

`run_campaign(args)` is the `python -m measure campaign` command.  Each job's sink appends rows to its
profile.csv as they arrive (fsync'ed, as `measure profile` does), skipping a point that already has an ok
row (no duplicates after a retried or resumed job), and writes the worker's environment into env.json.
The status file (`<campaign>.status.json`, rewritten atomically on every change) records each job's
state, its counts, the node it ran on and the error of a failed job.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fleetfacts.errors import InputError
from measure.campaign import (
    JobPayload,
    PlannedJob,
    campaign_gpu_minutes,
    fmt_minutes,
    load_campaign,
    plan_jobs,
    resume_hint,
)
from measure.campaign_ray import ray_executor
from measure.campaign_worker import DONE, ENV, ERROR, NODE, ROW, Event, run_job
from measure.points import point_from_mapping
from measure.profile_dir import ProfileDir
from measure.sweep import stderr

log = logging.getLogger(__name__)

EXIT_OK, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 3, 130
CONSOLE_WIDTH = 160
PENDING, RUNNING, DONE_STATE, INCOMPLETE, FAILED = "pending", "running", "done", "incomplete", "failed"


def add_campaign_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("campaign", metavar="CAMPAIGN.yaml", help="campaign file: jobs of `measure profile` options")
    p.add_argument("--ray", metavar="ADDRESS", help="run the jobs as Ray tasks: a cluster address (ray://host:10001 "
                   "or host:6379), auto (the cluster this machine belongs to) or local (start one here); "
                   "default: one job after another on this machine")
    p.add_argument("--resume", action="store_true", help="continue: plan only the points the folders lack")
    p.add_argument("--retry-failed", action="store_true", help="with --resume: run failed points again")
    p.add_argument("--dry-run", action="store_true", help="print the schedule and estimated GPU-minutes")
    p.add_argument("--status", metavar="FILE", help="status file (default: <campaign>.status.json beside it)")


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


# ---------------------------------------------------------------- the command

def run_campaign(args: argparse.Namespace) -> int:
    """`python -m measure campaign`: plan, then dry-run or run, then the summary; returns the exit code."""
    if args.retry_failed and not args.resume:
        raise InputError("--retry-failed needs --resume")
    campaign = load_campaign(args.campaign)
    jobs = plan_jobs(campaign, resume=args.resume or args.dry_run, retry_failed=args.retry_failed)
    if args.dry_run:
        print_schedule(jobs)
        return EXIT_OK
    executor = make_executor(args.ray)  # fails here (one line) when Ray is asked for and missing
    status = StatusFile(Path(args.status) if args.status else campaign.path.with_suffix(".status.json"),
                        campaign.name, jobs)
    status.write()
    hint = resume_hint(campaign.path, args.ray)
    payloads = [j.payload for j in jobs if j.payload is not None]
    try:
        _run(payloads, status, executor)
    except KeyboardInterrupt:
        stderr(f"\ninterrupted; finished points are saved in their profile folders\nresume with:\n  {hint}")
        return EXIT_INTERRUPTED
    print_summary(status)
    unfinished = status.unfinished()
    stderr(f"status: {status.path}")
    if unfinished:
        stderr(f"{len(unfinished)} job(s) not finished; resume with:\n  {hint}")
        return EXIT_INCOMPLETE
    return EXIT_OK


def _run(payloads: list[JobPayload], status: StatusFile, executor: Executor) -> None:
    from tqdm import tqdm  # noqa: PLC0415

    with tqdm(total=sum(len(p.points) for p in payloads), desc="campaign points", unit="pt", file=sys.stderr,
              dynamic_ncols=True) as bar:
        sinks = {p.index: JobSink(p, status, bar) for p in payloads}
        executor(payloads, sinks)


def print_schedule(jobs: list[PlannedJob]) -> None:
    """The dry-run: jobs in the order they are submitted, per GPU type, with estimated GPU-minutes."""
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    table = Table(title="campaign schedule (GPU time is an ESTIMATE from labelled assumptions, measure/estimate.py)")
    for col in ("order", "job", "gpu", "tp", "engine", "points pending/total", "est. GPU-min"):
        table.add_column(col)
    for order, job in enumerate(jobs, 1):
        table.add_row(str(order), job.label, job.gpu, str(job.tp), job.engine, f"{job.pending}/{job.total_points}",
                      fmt_minutes(job.gpu_minutes) or "done")
    console = Console(width=CONSOLE_WIDTH)
    console.print(table)
    for gpu, minutes in sorted(campaign_gpu_minutes(jobs).items()):
        count = sum(1 for j in jobs if j.gpu == gpu and j.payload)
        console.print(f"{gpu}: {count} job(s) to run, {minutes:.1f} GPU-minutes (estimate)")
    console.print(f"total: {sum(j.gpu_minutes for j in jobs):.1f} GPU-minutes (estimate; longest jobs first)")


def print_summary(status: StatusFile) -> None:
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    table = Table(title=f"campaign {status.campaign}")
    for col in ("job", "state", "ok", "failed", "planned", "node", "note"):
        table.add_column(col)
    for s in status.jobs.values():
        note = s.error + (f"; {s.duplicates} duplicate row(s) skipped" if s.duplicates else "")
        table.add_row(s.label, s.state, str(s.ok), str(s.failed), str(s.pending), s.node[:16], note[:80])
    Console(stderr=True, width=CONSOLE_WIDTH).print(table)

