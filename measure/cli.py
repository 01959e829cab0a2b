"""Command line: `python -m measure profile|tokenizer|shapes ...`. Parses arguments and calls public functions."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

from fleetfacts.errors import FleetplanError, InputError
from fleetfacts.schema import SLUG_RE, slug
from fleetfacts.specs import MODELS_DIR, gpu_spec, model_facts
from measure import verify_cli
from measure.engines import make_engine
from measure.engines.base import (
    EngineConfig,
    EngineError,
    EngineInfo,
    EngineNotInstalled,
    kv_cache_precision,
    parse_engine_args,
)
from measure.envinfo import command_line, environment_record
from measure.estimate import ENGINE_START_S, Estimator, make_estimator
from measure.points import Point, list_presets, load_shapes
from measure.profile_dir import ProfileDir, default_out_dir, pending_points
from measure.redact import RedactingFilter, is_secret_name, redact_json, register_secret, safe
from measure.roofline import fill_profile_roofline, roofline_for
from measure.sweep import Budget, Calibration, Identity, Outcome, Sweep, resume_command, stderr
from measure.tokenizer import write_wordlevel_tokenizer

log = logging.getLogger("measure")

ENGINES = ("vllm", "trtllm", "openai")
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# max_model_len given to in-process engines: the sweep's longest request, rounded up to this.
MAX_MODEL_LEN_ROUND = 1024
# An HTTP sweep (--engine openai, --server) whose points fail this many times in a row stops (resumable): the
# server is likely down or refusing us, and every later point would fail the same way.  In-process engines go on
# by default: there a failure is usually one shape out of memory, and the engine is restarted for the next.
DEFAULT_STOP_AFTER_FAILURES_HTTP = 3
# Identity fields that must match when --resume appends to an existing profile folder.
# Tables are wide; keep them readable in logs that are not a terminal.
CONSOLE_WIDTH = 160
MAX_PORT = 65535
IDENTITY_FIELDS = ("gpu", "engine", "model", "precision", "tp", "engine_args", "model_path", "server", "config")
# What an identity field meant in env.json files written before the field existed.
IDENTITY_DEFAULTS = {"config": "default"}


PROFILE_DESCRIPTION = """\
Measure an engine on this GPU across batch shapes and write a profile the planner reads (profiles/**.csv).

Engines:
  vllm     vllm.LLM in this process: offline batches (N token-id prompts in ONE generate() call, only that
           call timed). Config-only model dir (config.json, no weights) => dummy weights, no download.
  trtllm   tensorrt_llm.LLM (PyTorch backend) in this process, the same way (not verified on hardware).
  openai   the load generator against a running OpenAI-compatible server (--base-url): offline, fixed
           concurrency, and rate points (poisson, gamma:cv=X bursts, replay:LOG), streaming.
  --server launches `vllm serve` / `trtllm-serve` (or --server-cmd) and drives it with the load generator.

Output (one folder): profile.csv, one row per point, written and fsync'ed as each point ends (a killed run
loses no completed point; --resume continues it, and every stop prints the resume command); a failed point
(out of memory, timeout, engine error, every request failed) is a row with status=failed and the reason, and the
sweep goes on (until --stop-after-failures points fail in a row). A torn last row is set aside in profile.csv.torn.
env.json: engine and version, torch, CUDA, driver, GPU name and memory, engine arguments given and
effective, command line (API keys removed), date; host name only with --record-hostname.
"""

CAMPAIGN_DESCRIPTION = """\
Run many `measure profile` jobs from a YAML file, one after another on this machine, or as Ray tasks across
a cluster (--ray ADDRESS|auto|local): each job asks Ray for num_gpus=tp plus {"<gpu>": tp}, so nodes declare
their GPU type, e.g. `ray start ... --num-gpus 8 --resources '{"h200": 8}'`.  Finished points stream back to
this machine and land in profiles/measured/<gpu>/<folder>/ (profile.csv + env.json of the node that ran them).
A killed run or a lost node loses no written point; --resume plans only what is missing; a failing job is
recorded in <campaign>.status.json and the campaign goes on.  Job keys are `measure profile` options
(gpu, engine, model, precision, tp, shapes, tag, engine_args: {k: v}, budget_s, base_url, ...).
See the README, "Campaigns".
"""

PROFILE_EPILOG = """\
Metrics per request (ms; mean/p50/p95/p99 per point): TTFT = request sent to first token; TPOT = (e2e - TTFT)
/ (output tokens - 1), the first token excluded as vLLM defines it; ITL = gaps between streamed chunks
(HTTP only); e2e = request sent to last token. output_tok_per_s = generated tokens / timed duration.
roofline_frac = bandwidth-bound decode step (weights + KV read, GPU spec table) / measured TPOT.
Presets: default (prompt 128-8192, output 64-2048, batch 1-1024, + concurrency/rate points for HTTP
engines), tensorrt-llm-published (NVIDIA's ISL/OSL pairs). See `python -m measure shapes PRESET`.
Exit codes: 0 done, 1 unexpected error, 2 usage or engine error, 3 stopped by --max-time or --stop-after-failures
(resume printed),
130 interrupted.
Details: docs/measure.md.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m measure", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_profile_args(sub.add_parser("profile", help="measure a sweep of shapes and write a profile folder",
                                     description=PROFILE_DESCRIPTION, epilog=PROFILE_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter))
    tok = sub.add_parser("tokenizer", help="write an offline WordLevel tokenizer for a config-only model dir")
    tok.add_argument("--model-dir", required=True, help="dir with config.json (vocab_size is read from it)")
    tok.add_argument("--out", required=True, help="output dir: config.json copy + tokenizer.json")
    roof = sub.add_parser("roofline", help="fill roofline_frac where a profile's ok rows lack it (older runs)")
    roof.add_argument("profile_dirs", nargs="+", metavar="PROFILE_DIR")
    from measure.campaign_run import add_campaign_args  # noqa: PLC0415 - the campaign modules import this one

    add_campaign_args(sub.add_parser("campaign", help="run many profile jobs (YAML), here or on a Ray cluster",
                                     description=CAMPAIGN_DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter))
    check = sub.add_parser("verify", help="measure a running deployment against its plan",
                           description=verify_cli.DESCRIPTION, epilog=verify_cli.EPILOG)
    verify_cli.add_arguments(check)
    shapes = sub.add_parser("shapes", help="list presets, or print the points of one")
    shapes.add_argument("preset", nargs="?", help="preset name or shapes CSV")
    return parser


def _add_profile_args(p: argparse.ArgumentParser) -> None:
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
    if args.tp < 1:
        raise InputError(f"--tp must be >= 1, got {args.tp}")
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
        diff = [f for f in IDENTITY_FIELDS if old.get(f) != new.get(f)]
        if diff:
            raise InputError(f"{profile.env_path}: --resume with different {', '.join(diff)} "
                             f"(was {', '.join(f'{f}={old.get(f)!r}' for f in diff)}); use another --out")


def make_point_estimator(req: ProfileRequest) -> tuple[Estimator, list[str]]:
    cfg = req.config
    model_dir = cfg.model_path if Path(cfg.model_path).is_dir() else None
    return make_estimator(gpu_spec(req.identity["gpu"]), model_facts(cfg.model, model_dir), cfg.precision,
                          cfg.tp, kv_precision=kv_cache_precision(cfg.engine_args),
                          max_num_seqs=cfg.engine_args.get("max_num_seqs"))


def print_schedule(points: list[Point], all_points: tuple[Point, ...], est: Estimator, notes: list[str],
               engine_modes: tuple[str, ...], calibration: Calibration | None = None) -> None:
    """The dry-run table: each point, its state and estimated GPU seconds (an assumption, rescaled by the
    durations the folder already holds when resuming, as the run itself does)."""
    calibration = calibration or Calibration()
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    pending = {p.key() for p in points}
    table = Table(title="sweep schedule (GPU time is an ESTIMATE from labelled assumptions, see measure/estimate.py)")
    for col in ("#", "point", "purpose", "state", "est. s"):
        table.add_column(col)
    total = 0.0
    for i, p in enumerate(all_points, 1):
        runnable = p.mode in engine_modes
        state = "skip (mode not run by this engine)" if not runnable else (
            "pending" if p.key() in pending else "done")
        secs = calibration.scale(est.point_s(p)) if runnable and p.key() in pending else 0.0
        total += secs
        table.add_row(str(i), _cell(p.label()), _cell(p.purpose), state, f"{secs:.0f}" if secs else "")
    console = Console(stderr=False, width=CONSOLE_WIDTH)
    console.print(table)
    start = ENGINE_START_S if total else 0.0
    basis = f"rescaled by {len(calibration.ratios)} measured point(s)" if calibration.ratios else "assumption-based"
    console.print(f"estimate: {total:.0f} s of points + {start:.0f} s engine start = "
                  f"{(total + start) / 60:.1f} GPU-minutes ({basis})")
    for note in notes:
        console.print(f"note: {note}")


def print_summary(outcome: Outcome) -> None:
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    table = Table(title="measured points")
    for col in ("mode", "I", "O", "load", "N", "status", "s", "out tok/s", "TTFT p50 ms", "TPOT p50 ms", "roofline"):
        table.add_column(col)
    for r in outcome.rows:
        load = r.get("batch_size") or r.get("concurrency") or r.get("request_rate")
        table.add_row(r["mode"], str(r["input_len"]), str(r["output_len"]), str(load), str(r["num_requests"]),
                      r["status"] if r["status"] == "ok" else _cell(f"failed: {r['error'][:60]}"),
                      _fmt(r.get("duration_s"), ".1f"), _fmt(r.get("output_tok_per_s"), ",.0f"),
                      _fmt(r.get("ttft_p50_ms"), ".1f"), _fmt(r.get("tpot_p50_ms"), ".2f"),
                      _fmt(r.get("roofline_frac"), ".2f"))
    Console(stderr=True, width=CONSOLE_WIDTH).print(table)


def _cell(text: str) -> str:
    """A user-supplied string for a rich table: secrets and control characters removed, markup escaped."""
    from rich.markup import escape  # noqa: PLC0415

    return escape(safe(text))


def _fmt(value: object, spec: str) -> str:
    return "" if value is None else format(value, spec)


def run_profile(args: argparse.Namespace, argv: list[str]) -> int:
    """The profile command: resolve, dry-run or sweep, summary; returns the exit code."""
    req = resolve(args)
    profile = ProfileDir(req.out)
    check_folder(profile, req, args)
    pending = pending_points(req.points, profile.point_status(), args.retry_failed)
    est, notes = make_point_estimator(req)
    engine = make_engine(req.config)
    if args.dry_run:
        print_schedule(pending, req.points, est, notes, engine.modes, Calibration.from_rows(profile.rows(), est.point_s))
        return EXIT_OK
    engine.version()  # fails fast (exit 2, install hint) when the engine package is missing
    if not [p for p in pending if p.mode in engine.modes]:
        stderr(f"nothing to do: every point of {args.shapes} this engine runs is in {profile.csv_path}")
        return EXIT_OK
    return _sweep(args, argv, req, profile, pending, est, engine)


def _sweep(args, argv, req: ProfileRequest, profile: ProfileDir, pending: list[Point], est: Estimator,
           engine) -> int:
    from tqdm import tqdm  # noqa: PLC0415

    resume = resume_command(argv, str(req.out))
    runs = profile.env_runs()
    cfg = req.config
    identity = row_identity(req, argv)

    def on_start(info: EngineInfo) -> None:
        runs.append(run_record(req, info, argv, args.record_hostname))
        profile.write_env(req.identity, runs)

    profile.write_env(req.identity, runs)
    with tqdm(total=len([p for p in pending if p.mode in engine.modes]), desc="points", unit="pt",
              file=sys.stderr, dynamic_ncols=True) as bar:
        sweep = Sweep(engine=engine, identity=identity, points=pending, write_row=profile.append,
                      estimate_s=est.point_s, engine_start_estimate_s=ENGINE_START_S,
                      budget=Budget(args.max_time), seed=args.seed,
                      calibration=Calibration.from_rows(profile.rows(), est.point_s),
                      roofline=roofline_for(req.identity["gpu"], cfg), on_engine_start=on_start, progress=bar,
                      max_consecutive_failures=_stop_after(args, cfg))
        try:
            outcome = sweep.run()
        except KeyboardInterrupt:
            stderr(f"\ninterrupted; completed points are saved in {profile.csv_path}\nresume with:\n  {resume}")
            return EXIT_INTERRUPTED
        except (InputError, EngineNotInstalled):
            raise
        except EngineError as err:
            stderr(f"error: {err}\ncompleted points are saved in {profile.csv_path}\nresume with:\n  {resume}")
            return EXIT_USAGE
        except Exception as err:  # noqa: BLE001 - the user gets the resume command, not only a traceback
            log.debug("sweep failed", exc_info=True)
            stderr(f"error: {type(err).__name__}: {err}\ncompleted points are saved in {profile.csv_path}\n"
                   f"resume with:\n  {resume}")
            return EXIT_ERROR
    return _finish(outcome, profile, resume, resume_command(argv, str(req.out), retry_failed=True))


def _stop_after(args: argparse.Namespace, config: EngineConfig) -> int | None:
    """Failed points in a row that stop the sweep (None: never)."""
    if args.stop_after_failures is not None:
        return args.stop_after_failures or None
    return DEFAULT_STOP_AFTER_FAILURES_HTTP if config.server else None


def row_identity(req: ProfileRequest, argv: list[str]) -> Identity:
    """The columns every row of this profile shares; `source` is the command that reproduces it."""
    cfg, ident = req.config, req.identity
    notes = "dummy weights (load_format=dummy, config-only model dir)" if cfg.is_dummy() and \
        cfg.engine != "openai" else ""
    if cfg.engine_args:
        notes += ("; " if notes else "") + "engine args " + json.dumps(cfg.engine_args, sort_keys=True)
    return Identity(gpu=ident["gpu"], engine=ident["engine"], model=ident["model"], precision=ident["precision"],
                    tp=ident["tp"], source=command_line(argv), notes=notes, config=ident["config"])


def run_record(req: ProfileRequest, info: EngineInfo, argv: list[str], record_hostname: bool) -> dict:
    """The env.json record of one run, taken on the machine the engine runs on."""
    cfg = req.config
    return environment_record(req.identity["engine"], info.version, cfg.engine_args, argv, record_hostname, {
        "effective_engine_args": info.effective_args, "kv_cache_tokens": info.kv_cache_tokens,
        "max_num_seqs": info.max_num_seqs, "max_num_batched_tokens": info.max_num_batched_tokens,
        "engine_start_s": info.start_s, "engine_notes": info.notes,
        "model_path": cfg.model_path, "shapes": req.identity["shapes"]})


def _finish(outcome: Outcome, profile: ProfileDir, resume: str, retry: str) -> int:
    if outcome.rows:
        print_summary(outcome)
    if outcome.skipped:
        stderr(f"skipped {len(outcome.skipped)} point(s) whose mode this engine does not run "
               f"({', '.join(sorted({p.mode for p in outcome.skipped}))}); use --server or --engine openai")
    stderr(f"profile: {profile.csv_path}")
    if outcome.stopped_for_time:
        stderr(f"stopped before the time limit with {outcome.remaining_points} point(s) left; resume with:\n"
               f"  {resume}")
        return EXIT_INCOMPLETE
    if outcome.stopped_for_failures:
        stderr(f"stopped after {outcome.stopped_for_failures} failed points in a row (their rows say why), with "
               f"{outcome.remaining_points} point(s) left; fix the cause, then resume with:\n  {retry}")
        return EXIT_INCOMPLETE
    failed = sum(r["status"] == "failed" for r in outcome.rows)
    if failed:
        stderr(f"{failed} point(s) failed (their rows say why); to run them again:\n  {retry}")
    return EXIT_OK


def run_shapes(args: argparse.Namespace) -> int:
    if not args.preset:
        print("\n".join(list_presets()))
        return EXIT_OK
    for p in load_shapes(args.preset):
        print(p.label() + (f"  # {p.purpose}" if p.purpose else ""))
    return EXIT_OK


def run_tokenizer(args: argparse.Namespace) -> int:
    path = write_wordlevel_tokenizer(Path(args.model_dir), Path(args.out))
    print(f"wrote {path}")
    return EXIT_OK


def run_roofline(args: argparse.Namespace) -> int:
    for directory in args.profile_dirs:
        profile = ProfileDir(directory)
        if not profile.exists():
            raise InputError(f"{profile.csv_path}: not found (expected a profile folder)")
        print(f"{profile.csv_path}: filled roofline_frac in {fill_profile_roofline(profile)} row(s)")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for handler in logging.getLogger().handlers:  # no key and no terminal escape reaches a log line
        handler.addFilter(RedactingFilter())
    # httpx (readiness and /metrics polls) logs every request at INFO, which drowns the progress bar.
    logging.getLogger("httpx").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    try:
        if args.command == "profile":
            return run_profile(args, argv)
        if args.command == "tokenizer":
            return run_tokenizer(args)
        if args.command == "verify":
            return verify_cli.run(args, argv)
        if args.command == "roofline":
            return run_roofline(args)
        if args.command == "campaign":
            from measure.campaign_run import run_campaign  # noqa: PLC0415

            return run_campaign(args)
        return run_shapes(args)
    except FleetplanError as err:
        stderr(f"error: {err}")
        return EXIT_USAGE
    except OSError as err:  # a file or folder that cannot be read or written: one line, not a traceback
        where = f"{err.filename}: " if err.filename else ""
        stderr(f"error: {where}{err.strerror or err}")
        return EXIT_USAGE
