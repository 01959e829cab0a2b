"""The campaign file: a YAML list of jobs, each one `measure profile` invocation, parsed into a `Campaign`.

A campaign file (YAML) lists jobs; each job is exactly one `measure profile` invocation (its keys are that
command's flags), so every row's `source` is a command that reproduces it:

    name: h200-llama                 # optional (default: the file name)
    out_root: profiles/measured      # optional: where <gpu>/<engine>-<model>-... folders go
    defaults: {engine: vllm, shapes: default}
    jobs:
      - {gpu: h200, model: llama-3.1-8b, precision: fp8, tp: 1, budget_s: 1800}
      - {gpu: h200, model: llama-3.1-8b, precision: fp8, tag: tuned, engine_args: {kv_cache_dtype: fp8}}
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from fleetfacts.errors import InputError
from measure.profile_job import add_profile_args

DEFAULT_OUT_ROOT = Path("profiles") / "measured"
# Campaign-level keys; everything a job says is a `measure profile` flag, plus these two.
CAMPAIGN_KEYS = ("name", "out_root", "defaults", "jobs")
JOB_ONLY_KEYS = {"budget_s": "--max-time", "engine_args": "--engine-arg"}
# Most jobs one campaign file holds: a 10,000-job --dry-run took 25 s to plan and printed 10,000 rows
# (2026-12-04), and 1,000 jobs of the default preset are already ~5,600 GPU-minutes, days of a node. More: split
# the file (each part resumes on its own).
MAX_CAMPAIGN_JOBS = 1000
# Profile flags that belong to the campaign command, not to a job.
NOT_JOB_KEYS = ("resume", "retry_failed", "dry_run", "max_time", "command", "verbose")


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
    path = Path(path)
    data = _read_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list) or not data["jobs"]:
        raise InputError(f"{path}: expected a mapping with a non-empty 'jobs' list")
    if len(data["jobs"]) > MAX_CAMPAIGN_JOBS:
        raise InputError(f"{path}: {len(data['jobs']):,} jobs; a campaign holds at most {MAX_CAMPAIGN_JOBS:,} "
                         f"(MAX_CAMPAIGN_JOBS): split it into several campaign files")
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


def _read_yaml(path: Path) -> Any:
    """The parsed YAML of `path`; InputError naming the file when it is missing, not text or not YAML."""
    import yaml  # noqa: PLC0415 - only this command reads YAML

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: campaign file not found") from None
    except yaml.YAMLError as err:
        raise InputError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file (expected a campaign YAML)") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to be a campaign YAML") from None


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
