"""Command line: `python -m measure profile|tokenizer|shapes ...`. Parses arguments and calls public functions."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from fleetfacts.errors import FleetplanError, InputError
from fleetfacts.schema import MEASURED_STATUSES
from measure import verify_cli
from measure.campaign import add_campaign_args, run_campaign
from measure.engines import make_engine
from measure.engines.base import (
    EngineConfig,
    EngineError,
    EngineInfo,
    EngineNotInstalled,
)
from measure.estimate import ENGINE_START_S, Estimator
from measure.points import Point, list_presets, load_shapes
from measure.profile_dir import ProfileDir, pending_points
from measure.profile_job import (
    DEFAULT_STOP_AFTER_FAILURES_HTTP,
    ProfileRequest,
    add_profile_args,
    check_folder,
    make_point_estimator,
    resolve,
    row_identity,
    run_record,
)
from measure.redact import RedactingFilter, safe
from measure.roofline import fill_profile_roofline, roofline_for
from measure.sweep import Budget, Calibration, Outcome, Sweep, resume_command, stderr
from measure.tokenizer import write_wordlevel_tokenizer

log = logging.getLogger("measure")

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# Tables are wide; keep them readable in logs that are not a terminal.
CONSOLE_WIDTH = 160


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
    add_profile_args(sub.add_parser("profile", help="measure a sweep of shapes and write a profile folder",
                                     description=PROFILE_DESCRIPTION, epilog=PROFILE_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter))
    tok = sub.add_parser("tokenizer", help="write an offline WordLevel tokenizer for a config-only model dir")
    tok.add_argument("--model-dir", required=True, help="dir with config.json (vocab_size is read from it)")
    tok.add_argument("--out", required=True, help="output dir: config.json copy + tokenizer.json")
    roof = sub.add_parser("roofline", help="fill roofline_frac where a profile's ok rows lack it (older runs)")
    roof.add_argument("profile_dirs", nargs="+", metavar="PROFILE_DIR")

    add_campaign_args(sub.add_parser("campaign", help="run many profile jobs (YAML), here or on a Ray cluster",
                                     description=CAMPAIGN_DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter))
    check = sub.add_parser("verify", help="measure a running deployment against its plan",
                           description=verify_cli.DESCRIPTION, epilog=verify_cli.EPILOG)
    verify_cli.add_arguments(check)
    shapes = sub.add_parser("shapes", help="list presets, or print the points of one")
    shapes.add_argument("preset", nargs="?", help="preset name or shapes CSV")
    return parser


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
    with profile.lock():  # one run per folder; what is pending is read again under the lock
        pending = pending_points(req.points, profile.point_status(), args.retry_failed)
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
            stderr(f"\ninterrupted; {_saved(profile)}\nresume with:\n  {resume}")
            return EXIT_INTERRUPTED
        except (InputError, EngineNotInstalled):
            raise
        except EngineError as err:
            stderr(f"error: {err}\n{_saved(profile)}\nresume with:\n  {resume}")
            return EXIT_USAGE
        except Exception as err:  # noqa: BLE001 - the user gets the resume command, not only a traceback
            log.debug("sweep failed", exc_info=True)
            stderr(f"error: {type(err).__name__}: {err}\n{_saved(profile)}\nresume with:\n  {resume}")
            return EXIT_ERROR
    return _finish(outcome, profile, resume, resume_command(argv, str(req.out), retry_failed=True))


def _stop_after(args: argparse.Namespace, config: EngineConfig) -> int | None:
    """Failed points in a row that stop the sweep (None: never)."""
    if args.stop_after_failures is not None:
        return args.stop_after_failures or None
    return DEFAULT_STOP_AFTER_FAILURES_HTTP if config.server else None


def _saved(profile: ProfileDir) -> str:
    """What a stopped run leaves: how many points profile.csv holds, or that none was completed."""
    try:
        ok = sum(row.get("status", "ok") in MEASURED_STATUSES for row in profile.rows())
    except InputError:
        ok = 0
    if not ok:
        return f"no point was completed ({profile.csv_path} holds none)"
    return f"{ok} completed point(s) are saved in {profile.csv_path}"


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

            return run_campaign(args)
        return run_shapes(args)
    except FleetplanError as err:
        stderr(f"error: {err}")
        return EXIT_USAGE
    except OSError as err:  # a file or folder that cannot be read or written: one line, not a traceback
        where = f"{err.filename}: " if err.filename else ""
        stderr(f"error: {where}{err.strerror or err}")
        return EXIT_USAGE
