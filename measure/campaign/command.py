"""`python -m measure campaign`: its arguments, the dry-run schedule, the run and the summary.

`run_campaign(args)` plans every job (measure.campaign.plan), then prints the schedule (--dry-run) or runs the
pending points here or on Ray (measure.campaign.driver) and prints what each job did; its exit code says
whether every job finished, and the message on an unfinished or interrupted run is the command that resumes.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from fleetfacts.errors import InputError
from measure.campaign.driver import Executor, JobSink, StatusFile, make_executor
from measure.campaign.plan import JobPayload, PlannedJob, campaign_gpu_minutes, plan_jobs
from measure.campaign.spec import load_campaign
from measure.sweep import stderr

EXIT_OK, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 3, 130
CONSOLE_WIDTH = 160


def add_campaign_args(p: argparse.ArgumentParser) -> None:
    """The `campaign` sub-command's arguments."""
    p.add_argument("campaign", metavar="CAMPAIGN.yaml", help="campaign file: jobs of `measure profile` options")
    p.add_argument("--ray", metavar="ADDRESS", help="run the jobs as Ray tasks: a cluster address (ray://host:10001 "
                   "or host:6379), auto (the cluster this machine belongs to) or local (start one here); "
                   "default: one job after another on this machine")
    p.add_argument("--resume", action="store_true", help="continue: plan only the points the folders lack")
    p.add_argument("--retry-failed", action="store_true", help="with --resume: run failed points again")
    p.add_argument("--dry-run", action="store_true", help="print the schedule and estimated GPU-minutes")
    p.add_argument("--status", metavar="FILE", help="status file (default: <campaign>.status.json beside it)")


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
    from tqdm import tqdm  # noqa: PLC0415 - only a run draws the bar

    with tqdm(total=sum(len(p.points) for p in payloads), desc="campaign points", unit="pt", file=sys.stderr,
              dynamic_ncols=True) as bar:
        sinks = {p.index: JobSink(p, status, bar) for p in payloads}
        executor(payloads, sinks)


def print_schedule(jobs: list[PlannedJob]) -> None:
    """The dry-run: jobs in the order they are submitted, per GPU type, with estimated GPU-minutes."""
    from rich.console import Console  # noqa: PLC0415 - only the printed tables need rich
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
    """What each job did in this run: its state, its counts, its node and why it stopped."""
    from rich.console import Console  # noqa: PLC0415 - only the printed tables need rich
    from rich.table import Table  # noqa: PLC0415

    table = Table(title=f"campaign {status.campaign}")
    for col in ("job", "state", "ok", "failed", "planned", "node", "note"):
        table.add_column(col)
    for s in status.jobs.values():
        note = s.error + (f"; {s.duplicates} duplicate row(s) skipped" if s.duplicates else "")
        table.add_row(s.label, s.state, str(s.ok), str(s.failed), str(s.pending), s.node[:16], note[:80])
    Console(stderr=True, width=CONSOLE_WIDTH).print(table)


def resume_hint(campaign_path: Path, ray: str | None) -> str:
    """The command that continues this campaign where it stopped."""
    return "python -m measure campaign " + str(campaign_path) + (f" --ray {ray}" if ray else "") + " --resume"


def fmt_minutes(value: float) -> str:
    return "" if not math.isfinite(value) or value <= 0 else f"{value:.1f}"
