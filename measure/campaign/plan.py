"""Planning a campaign: each job resolved, its folder checked and its pending points listed, with estimated
GPU-minutes; a `JobPayload` is what a worker needs to run them.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from fleetfacts.errors import InputError
from measure.campaign.spec import Campaign, profile_parser
from measure.engines import make_engine
from measure.estimate import ENGINE_START_S, Estimator
from measure.points import Point
from measure.profile_dir import ProfileDir, pending_points
from measure.profile_job import ProfileRequest, check_folder, make_point_estimator, resolve, row_identity
from measure.sweep import Calibration, Identity

SECONDS_PER_MINUTE = 60.0

@dataclass(frozen=True)
class JobPayload:
    """What a worker needs to run one job's pending points (picklable; travels to a Ray node)."""

    index: int
    label: str
    argv: tuple[str, ...]
    request: ProfileRequest
    identity: Identity
    points: tuple[Point, ...]
    estimator: Estimator
    calibration_ratios: tuple[float, ...]
    budget_s: float | None
    seed: int
    record_hostname: bool

    @property
    def gpu(self) -> str:
        return str(self.request.identity["gpu"])

    @property
    def tp(self) -> int:
        return int(self.request.config.tp)

    def calibration(self) -> Calibration:
        calibration = Calibration()
        calibration.ratios = list(self.calibration_ratios)
        return calibration


@dataclass(frozen=True)
class PlannedJob:
    """A job, its profile folder and what is left of it; `payload` is None when nothing is pending."""

    index: int
    label: str
    gpu: str
    tp: int
    engine: str
    out: Path
    total_points: int
    payload: JobPayload | None
    estimate_s: float  # wall seconds of the pending points + engine start (assumption-based, see estimate.py)

    @property
    def pending(self) -> int:
        return len(self.payload.points) if self.payload else 0

    @property
    def gpu_minutes(self) -> float:
        return self.estimate_s * self.tp / SECONDS_PER_MINUTE


def plan_jobs(campaign: Campaign, resume: bool, retry_failed: bool = False) -> list[PlannedJob]:
    """Resolve every job, check its folder and list its pending points; longest first (for the schedule).

    Raises InputError for a bad job, two jobs writing one folder, or a folder that holds a profile
    without --resume.
    """
    jobs = [_plan_job(i, argv, campaign, resume, retry_failed) for i, argv in enumerate(campaign.jobs)]
    seen: dict[Path, str] = {}
    for job in jobs:
        if job.out in seen:
            raise InputError(f"{campaign.path}: jobs {seen[job.out]} and {job.label} write the same folder "
                             f"{job.out}; give one a tag or an out")
        seen[job.out] = job.label
    return sorted(jobs, key=lambda j: (-j.estimate_s, j.index))


def _plan_job(index: int, argv: tuple[str, ...], campaign: Campaign, resume: bool, retry_failed: bool) -> PlannedJob:
    where = f"{campaign.path}, job {index + 1}"
    args = profile_parser().parse_args(list(argv[1:]))
    args.resume, args.dry_run, args.retry_failed = resume, False, retry_failed
    try:
        req = _rooted(resolve(args), args, campaign.out_root)
        profile = ProfileDir(req.out)
        check_folder(profile, req, args)
        modes = make_engine(req.config).modes
    except InputError as err:
        raise InputError(f"{where}: {err}") from None
    est, _notes = make_point_estimator(req)
    calibration = Calibration.from_rows(profile.rows(), est.point_s)
    pending = tuple(p for p in pending_points(req.points, profile.point_status(), retry_failed) if p.mode in modes)
    label = f"{req.identity['gpu']}/{req.out.name}"
    seconds = sum(calibration.scale(est.point_s(p)) for p in pending) + (ENGINE_START_S if pending else 0.0)
    payload = JobPayload(index=index, label=label, argv=argv, request=req, identity=row_identity(req, list(argv)),
                         points=pending, estimator=est, calibration_ratios=tuple(calibration.ratios),
                         budget_s=args.max_time, seed=args.seed, record_hostname=args.record_hostname)
    return PlannedJob(index=index, label=label, gpu=str(req.identity["gpu"]), tp=req.config.tp,
                      engine=str(req.identity["engine"]), out=req.out,
                      total_points=len([p for p in req.points if p.mode in modes]),
                      payload=payload if pending else None, estimate_s=seconds)


def _rooted(req: ProfileRequest, args: argparse.Namespace, out_root: Path) -> ProfileRequest:
    """A job without its own --out goes under the campaign's out_root/<gpu>/<folder>."""
    if args.out:
        return req
    out = out_root / req.out.parent.name / req.out.name
    config = dataclasses.replace(req.config, server_log=str(out / "server.log"))
    return dataclasses.replace(req, out=out, config=config)


def campaign_gpu_minutes(jobs: list[PlannedJob]) -> dict[str, float]:
    """Estimated GPU-minutes per GPU type (pending points only)."""
    out: dict[str, float] = {}
    for job in jobs:
        out[job.gpu] = out.get(job.gpu, 0.0) + job.gpu_minutes
    return out
