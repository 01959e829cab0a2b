"""One `measure profile` job: its arguments, their validation into a ProfileRequest, the folder checks, the
estimator and the records its rows and env.json carry.  Shared by the `profile` command (measure/cli.py) and
campaigns (measure/campaign/), which import this and not each other's entry points.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

from fleetfacts.errors import InputError
from fleetfacts.schema import SLUG_RE, slug
from fleetfacts.specs import MODELS_DIR, ModelSpec, gpu_spec, model_facts
from measure.engines.base import EngineConfig, EngineInfo, kv_cache_precision, parse_engine_args
from measure.envinfo import command_line, environment_record
from measure.estimate import Estimator, make_estimator
from measure.points import Point, list_presets, load_shapes
from measure.profile_dir import ProfileDir, default_out_dir
from measure.redact import is_secret_name, redact_json, register_secret, safe
from measure.sweep import Identity

ENGINES = ("vllm", "trtllm", "openai")
# max_model_len given to in-process engines: the sweep's longest request, rounded up to this.
MAX_MODEL_LEN_ROUND = 1024
# An HTTP sweep (--engine openai, --server) whose points fail this many times in a row stops (resumable): the
# server is likely down or refusing us, and every later point would fail the same way.  In-process engines go on
# by default: there a failure is usually one shape out of memory, and the engine is restarted for the next.
DEFAULT_STOP_AFTER_FAILURES_HTTP = 3
# Largest tensor-parallel group a replica can span: one NVLink domain (GB200 NVL72 racks; an 8-GPU HGX node is the
# common case). A larger --tp is a typo, and a campaign would estimate GPU time from it.
MAX_TP = 72
MAX_PORT = 65535
# Identity fields that must match when --resume appends to an existing profile folder.
IDENTITY_FIELDS = ("gpu", "engine", "model", "precision", "tp", "engine_args", "model_path", "server", "config")
# What an identity field meant in env.json files written before the field existed.
IDENTITY_DEFAULTS = {"config": "default"}


def add_profile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu", required=True, type=slug, help="GPU slug, e.g. h100, h200")
    p.add_argument("--engine", required=True, type=slug, choices=ENGINES)
    p.add_argument("--model", required=True, type=slug, help="model slug, e.g. llama-3.1-8b")
    p.add_argument("--model-path", help="what the engine loads (dir or hub id); default profiles/models/<model>, "
                   "config-only => dummy weights")
    p.add_argument("--precision", default="bf16", type=slug, help="bf16 (default), fp16, fp8 (vllm: online FP8; "
                   "trtllm: needs --model-path to a pre-quantized checkpoint)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel GPUs per replica")
    p.add_argument("--shapes", default="default", help=f"preset ({', '.join(list_presets())}) or a shapes CSV")
    p.add_argument("--out", help="profile folder (default profiles/measured/<gpu>/<engine>-<model>-<precision>-tp<N>)")
    p.add_argument("--tag", default="", type=slug, help="name of non-default engine settings, e.g. tuned: the "
                   "profile's config column (default: default) and a suffix of the default folder name")
    p.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="engine argument passed through (JSON value), repeatable: kv_cache_dtype=fp8")
    p.add_argument("--resume", action="store_true", help="continue an existing profile folder")
    p.add_argument("--retry-failed", action="store_true", help="with --resume: run failed points again")
    p.add_argument("--stop-after-failures", type=int, metavar="N",
                   help="stop cleanly (resume printed) after N failed points in a row; 0 = never (default "
                   f"{DEFAULT_STOP_AFTER_FAILURES_HTTP} for --engine openai and --server, else 0)")
    p.add_argument("--max-time", type=float, help="seconds this invocation may use; stops before a point "
                   "that would not fit (resume later)")
    p.add_argument("--dry-run", action="store_true", help="print the points and an estimate of GPU-minutes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--record-hostname", action="store_true", help="write the host name into env.json")
    http = p.add_argument_group("OpenAI-compatible server (engine openai, or --server)")
    http.add_argument("--server", action="store_true", help="vllm/trtllm: launch the engine's OpenAI server "
                      "and drive it with the load generator (concurrency and rate points)")
    http.add_argument("--base-url", default="", help="e.g. http://127.0.0.1:8000 (engine openai)")
    http.add_argument("--served-model", help="model name sent in requests (default: omitted)")
    http.add_argument("--endpoint", choices=("completions", "chat"), default="completions")
    http.add_argument("--api-key-env", default="OPENAI_API_KEY", help="env var holding the API key")
    http.add_argument("--api-key", help="API key (prefer --api-key-env; never written anywhere)")
    http.add_argument("--no-ignore-eos", action="store_true", help="do not send ignore_eos (servers that reject "
                      "unknown fields, e.g. transformers serve)")
    http.add_argument("--prompt-format", choices=("words", "tokens"), default="words",
                      help="prompts as random words, or as token-id lists (servers that accept them)")
    http.add_argument("--request-timeout", type=float, default=600.0, help="per request, s")
    http.add_argument("--point-timeout", type=float, help="per point, s (requests still running are cancelled)")
    http.add_argument("--engine-name", type=slug, help="engine column of the profile (default: --engine), e.g. "
                      "vllm when --engine openai drives a vLLM server")
    http.add_argument("--engine-version", help="version to record when the server does not report one")
    http.add_argument("--port", type=int, default=8000, help="--server: port for the launched server")
    http.add_argument("--server-cmd", default="", help="launch this command line instead of vllm/trtllm-serve "
                      "(implies --server; {port} and {model} are filled in), e.g. for SGLang or a custom build")
    http.add_argument("--server-start-timeout", type=float, default=600.0,
                      help="--server: seconds to wait for the launched server to answer /health")


@dataclass(frozen=True)
class ProfileRequest:
    """The resolved profile command."""

    config: EngineConfig
    points: tuple[Point, ...]
    out: Path
    identity: dict


def resolve(args: argparse.Namespace) -> ProfileRequest:
    """Validate arguments into an engine config, points and the output folder; raises InputError."""
    check_numbers(args)
    points = load_shapes(args.shapes)
    engine_args = parse_engine_args(args.engine_arg)
    model_path = args.model_path or _default_model_path(args)
    max_len = max(p.input_len + p.output_len for p in points)
    out = Path(args.out) if args.out else default_out_dir(args.gpu, args.engine_name or args.engine, args.model, args.precision,
                                                          args.tp, args.tag)
    config = EngineConfig(
        engine=args.engine, model=args.model, model_path=model_path, precision=args.precision, tp=args.tp,
        engine_args=engine_args, server=args.server or bool(args.server_cmd) or args.engine == "openai", seed=args.seed,
        max_model_len=None if "max_model_len" in engine_args else
        int(math.ceil(max_len / MAX_MODEL_LEN_ROUND) * MAX_MODEL_LEN_ROUND),
        base_url=args.base_url.rstrip("/"), served_model=args.served_model, endpoint=args.endpoint,
        api_key=_api_key(args), ignore_eos=not args.no_ignore_eos,
        prompt_format=args.prompt_format, request_timeout_s=args.request_timeout,
        point_timeout_s=args.point_timeout, server_port=args.port, server_start_timeout_s=args.server_start_timeout,
        server_cmd=args.server_cmd, server_log=str(out / "server.log"), engine_version=args.engine_version)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: is a file, expected a profile folder (new or to --resume)")
    _register_secrets(engine_args, config.base_url)
    if args.engine == "openai" and not config.base_url and not config.server_cmd:
        raise InputError("--engine openai needs --base-url (e.g. http://127.0.0.1:8000) or --server-cmd")
    identity = {"gpu": args.gpu, "engine": args.engine_name or args.engine, "model": args.model, "precision": args.precision,
                "tp": args.tp, "engine_args": engine_args, "model_path": model_path, "server": config.server,
                "shapes": args.shapes, "config": args.tag or "default"}
    return ProfileRequest(config=config, points=points, out=out, identity=identity)


def _api_key(args: argparse.Namespace) -> str | None:
    """The key the load generator sends; registered so that no sink writes or prints it."""
    key = args.api_key or os.environ.get(args.api_key_env) or None
    register_secret(key)
    return key


def _register_secrets(engine_args: dict, base_url: str) -> None:
    """Secret engine arguments (api_key=...) and a URL's user:password: no sink writes or prints them."""
    for key, value in engine_args.items():
        if is_secret_name(key):
            register_secret(str(value))
    parts = urlsplit(base_url)
    register_secret(parts.password)
    register_secret(parts.username)


def check_numbers(args: argparse.Namespace) -> None:
    """Slugs, counts and timeouts, checked before anything runs; InputError naming the flag."""
    for flag in ("gpu", "model", "precision", "tag", "engine_name"):
        value = getattr(args, flag)
        if value and not SLUG_RE.match(value):
            raise InputError(f"--{flag.replace('_', '-')} {safe(repr(value))}: expected a slug (lowercase letters, "
                             "digits, '.', '_', '-'; starting with a letter or digit), e.g. h200")
    if not 1 <= args.tp <= MAX_TP:
        raise InputError(f"--tp must be in 1..{MAX_TP} (MAX_TP: the largest NVLink domain a replica spans), "
                         f"got {args.tp}")
    if args.stop_after_failures is not None and args.stop_after_failures < 0:
        raise InputError(f"--stop-after-failures must be >= 0 (0 = never), got {args.stop_after_failures}")
    if not 1 <= args.port <= MAX_PORT:
        raise InputError(f"--port must be in 1..{MAX_PORT}, got {args.port}")
    for flag in ("request_timeout", "point_timeout", "server_start_timeout", "max_time"):
        value = getattr(args, flag)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise InputError(f"--{flag.replace('_', '-')} must be a number of seconds > 0, got {value}")


def _default_model_path(args: argparse.Namespace) -> str:
    candidate = MODELS_DIR / args.model
    if args.engine == "openai":
        return str(candidate) if candidate.is_dir() else args.model
    if not (candidate / "config.json").is_file():
        raise InputError(f"no config-only dir {candidate} for model {args.model!r}: pass --model-path "
                         "(a checkpoint dir or hub id, or a dir with config.json for dummy weights)")
    return str(candidate)


def check_folder(profile: ProfileDir, req: ProfileRequest, args: argparse.Namespace) -> None:
    """Refuse to mix runs: an existing folder needs --resume and the same identity."""
    if profile.exists() and profile.rows() and not args.resume and not args.dry_run:
        raise InputError(f"{profile.path} already holds a profile: pass --resume to continue it, "
                         "or --out/--tag for a new one")
    old = profile.identity()
    if old and args.resume:
        old, new = {**IDENTITY_DEFAULTS, **old}, cast(dict, redact_json(req.identity))  # env.json: redacted
        old["model_path"], new["model_path"] = (_portable_model_path(x.get("model_path")) for x in (old, new))
        diff = [f for f in IDENTITY_FIELDS if old.get(f) != new.get(f)]
        if diff:
            raise InputError(f"{profile.env_path}: --resume with different {', '.join(diff)} "
                             f"(was {', '.join(f'{f}={old.get(f)!r}' for f in diff)}); use another --out")


def _portable_model_path(path: object) -> object:
    """A checkout's bundled config-only dir (…/profiles/models/NAME) names the same model wherever the checkout
    lives, so a committed profile resumes from any clone; every other path compares as written."""
    if not isinstance(path, str):
        return path
    parts = Path(path).parts
    return "/".join(parts[-3:]) if len(parts) >= 3 and parts[-3:-1] == ("profiles", "models") else path


def make_point_estimator(req: ProfileRequest) -> tuple[Estimator, list[str]]:
    cfg = req.config
    return make_estimator(gpu_spec(req.identity["gpu"]), _model_facts(cfg), cfg.precision,
                          cfg.tp, kv_precision=kv_cache_precision(cfg.engine_args),
                          max_num_seqs=cfg.engine_args.get("max_num_seqs"), engine=cfg.engine)


def row_identity(req: ProfileRequest, argv: list[str]) -> Identity:
    """The columns every row of this profile shares; `source` is the command that reproduces it."""
    cfg, ident = req.config, req.identity
    dummy = cfg.is_dummy() and cfg.engine != "openai"
    notes = "dummy weights (load_format=dummy, config-only model dir)" if dummy else ""
    if cfg.engine_args:
        notes += ("; " if notes else "") + "engine args " + json.dumps(cfg.engine_args, sort_keys=True)
    return Identity(gpu=ident["gpu"], engine=ident["engine"], model=ident["model"], precision=ident["precision"],
                    tp=ident["tp"], source=command_line(argv), notes=notes, config=ident["config"],
                    suspect=_dummy_routing_collapse(cfg) if dummy else "")


DUMMY_ROUTING_COLLAPSE = ("dummy weights collapse this router: every token picks the same experts "
                          "(fleetfacts.specs._dummy_routing_collapses); not the model's speed under real routing")


def _dummy_routing_collapse(cfg: EngineConfig) -> str:
    """Why every dummy-weight row of this model is suspect, or "" when its routing survives dummy weights."""
    facts = _model_facts(cfg)
    return DUMMY_ROUTING_COLLAPSE if facts is not None and facts.dummy_routing_collapse else ""


def _model_facts(cfg: EngineConfig) -> ModelSpec | None:
    """The profiled model's facts: its model dir's config.json where the path is a folder, else the bundled ones."""
    return model_facts(cfg.model, cfg.model_path if Path(cfg.model_path).is_dir() else None)


def run_record(req: ProfileRequest, info: EngineInfo, argv: list[str], record_hostname: bool) -> dict:
    """The env.json record of one run, taken on the machine the engine runs on."""
    cfg = req.config
    return environment_record(req.identity["engine"], info.version, cfg.engine_args, argv, record_hostname, {
        "effective_engine_args": info.effective_args, "kv_cache_tokens": info.kv_cache_tokens,
        "max_num_seqs": info.max_num_seqs, "max_num_batched_tokens": info.max_num_batched_tokens,
        "cuda_graph_max_batch": info.cuda_graph_max_batch, "engine_start_s": info.start_s, "engine_notes": info.notes,
        "model_path": cfg.model_path, "shapes": req.identity["shapes"]})
