"""Measure campaigns: many `measure profile` jobs, run one after another here or spread over a Ray cluster.

A campaign file (YAML) lists jobs; each job is exactly one `measure profile` invocation (its keys are that
command's flags), so every row's `source` is a command that reproduces it:

    name: h200-llama                 # optional (default: the file name)
    out_root: profiles/measured      # optional: where <gpu>/<engine>-<model>-... folders go
    defaults: {engine: vllm, shapes: default}
    jobs:
      - {gpu: h200, model: llama-3.1-8b, precision: fp8, tp: 1, budget_s: 1800}
      - {gpu: h200, model: llama-3.1-8b, precision: fp8, tag: tuned, engine_args: {kv_cache_dtype: fp8}}

The driver (this machine) owns the profile folders: workers stream each finished point back and the driver
appends it (fsync'ed) to the job's profile.csv, with the worker node's environment in env.json.  A killed
driver or a lost node loses no point the driver had written; `--resume` plans only the missing points.
A failing job is recorded (status file, summary) and the campaign goes on.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from fleetfacts.errors import InputError
from measure.engines import make_engine
from measure.estimate import ENGINE_START_S, Estimator
from measure.points import Point
from measure.profile_dir import ProfileDir, pending_points
from measure.profile_job import (
    ProfileRequest,
    add_profile_args,
    check_folder,
    make_point_estimator,
    resolve,
    row_identity,
)
from measure.sweep import Calibration, Identity

DEFAULT_OUT_ROOT = Path("profiles") / "measured"
# Campaign-level keys; everything a job says is a `measure profile` flag, plus these two.
CAMPAIGN_KEYS = ("name", "out_root", "defaults", "jobs")
JOB_ONLY_KEYS = {"budget_s": "--max-time", "engine_args": "--engine-arg"}
# Profile flags that belong to the campaign command, not to a job.
NOT_JOB_KEYS = ("resume", "retry_failed", "dry_run", "max_time", "command", "verbose")
SECONDS_PER_MINUTE = 60.0


class _RaisingParser(argparse.ArgumentParser):
    """argparse that raises InputError instead of printing usage and exiting (a job is not a command line)."""

    def error(self, message: str) -> NoReturn:
        raise InputError(message)


def profile_parser() -> argparse.ArgumentParser:
    parser = _RaisingParser(prog="measure profile", add_help=False)
    add_profile_args(parser)
    return parser


@dataclass(frozen=True)
class Campaign:
    """A parsed campaign file: its name, where profiles go, and each job as `measure profile` arguments."""

    path: Path
    name: str
    out_root: Path
    jobs: tuple[tuple[str, ...], ...]


def load_campaign(path: str | Path) -> Campaign:
    """Read and check a campaign YAML; InputError naming the file (and job) on a mistake."""
    import yaml  # noqa: PLC0415 - only this command reads YAML

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: campaign file not found") from None
    except yaml.YAMLError as err:
        raise InputError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file (expected a campaign YAML)") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to be a campaign YAML") from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list) or not data["jobs"]:
        raise InputError(f"{path}: expected a mapping with a non-empty 'jobs' list")
    unknown = sorted(set(data) - set(CAMPAIGN_KEYS))
    if unknown:
        raise InputError(f"{path}: unknown key(s) {', '.join(unknown)} (expected {', '.join(CAMPAIGN_KEYS)})")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise InputError(f"{path}, 'defaults': expected a mapping of job keys")
    jobs = tuple(job_argv({**defaults, **_mapping(job, f"{path}, job {i + 1}")}, f"{path}, job {i + 1}")
                 for i, job in enumerate(data["jobs"]))
    return Campaign(path=path, name=str(data.get("name") or path.stem),
                    out_root=Path(data.get("out_root") or DEFAULT_OUT_ROOT), jobs=jobs)


def _mapping(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a mapping of `measure profile` options, got {value!r}")
    return value


def job_argv(job: dict[str, Any], where: str) -> tuple[str, ...]:
    """The `measure profile` argv of one job; keys are its flags with '_' (gpu, tp, engine_args, budget_s...)."""
    known = {a.dest for a in profile_parser()._actions}
    argv = ["profile"]
    for key, value in job.items():
        dest = str(key).replace("-", "_")
        if dest in NOT_JOB_KEYS or (dest not in known and dest not in JOB_ONLY_KEYS):
            raise InputError(f"{where}: unknown job key {key!r} (a `measure profile` option such as gpu, engine, "
                             f"model, precision, tp, shapes, tag, base_url, or budget_s / engine_args)")
        argv += _flag_values(dest, value, where)
    try:
        profile_parser().parse_args(argv[1:])
    except InputError as err:
        raise InputError(f"{where}: {err}") from None
    return tuple(argv)


def _flag_values(dest: str, value: Any, where: str) -> list[str]:
    flag = JOB_ONLY_KEYS.get(dest) or "--" + dest.replace("_", "-")
    if dest == "engine_args":
        if not isinstance(value, dict):
            raise InputError(f"{where}, engine_args: expected a mapping, e.g. {{kv_cache_dtype: fp8}}")
        return [a for k, v in value.items() for a in (flag, f"{k}={json.dumps(v)}")]
    if isinstance(value, bool):
        return [flag] if value else []
    if isinstance(value, list):
        return [a for v in value for a in (flag, str(v))]
    return [flag, str(value)]


# ---------------------------------------------------------------- planning

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


def resume_hint(campaign_path: Path, ray: str | None) -> str:
    return "python -m measure campaign " + str(campaign_path) + (f" --ray {ray}" if ray else "") + " --resume"


def fmt_minutes(value: float) -> str:
    return "" if not math.isfinite(value) or value <= 0 else f"{value:.1f}"


