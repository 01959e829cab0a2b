"""`python -m planner predict`: one replica's throughput and latency at one shape or load, through the latency
door.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from fleetfacts.errors import InputError
from fleetfacts.schema import slug, terminal_safe
from fleetfacts.specs import context_window, gpu_spec, load_model_config, model_facts, model_spec_from_config
from planner.commands.base import Command, num, register
from planner.engine.curves import Curve, NoCurveError, find_curve, load_profiles
from planner.engine.physics_prior import fit_with_physics
from planner.engine.transfer_check import default_transfer_target, transfer_for
from planner.engine.transfer_physics import HOST_LOAD_GB_PER_S, host_tier_terms
from planner.latency import (
    DEFAULT_ROUTER,
    ROUTERS,
    Fleet,
    HostTier,
    LatencyReport,
    Lengths,
    OpenLoop,
    Replay,
    predict,
    rounds_answer,
    with_server_latency_of,
)
from planner.latency.analytic import AnalyticLoad, Offline, Rounds, Steady, analytic
from planner.latency.closed_loop import ROUNDS_PER_CLIENT, benchmark_rounds
from planner.traffic.logs import DEFAULT_BLOCK_SIZE, FORMATS, TrafficLog, log_blocks, read_log
from planner.traffic.routes import Route
from planner.traffic.workload import route_requests

# How `predict --concurrency` runs its clients (see --closed-loop).
CLOSED_LOOPS = ("staggered", "rounds")

log = logging.getLogger(__name__)


def _predict_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu", required=True, type=slug)
    p.add_argument("--engine", required=True, type=slug)
    p.add_argument("--model", required=True, type=slug)
    p.add_argument("--engine-version", help="default: the newest profiled version")
    p.add_argument("--precision", type=slug, help="default: any profiled precision")
    p.add_argument("--tp", type=int, help="tensor-parallel GPUs per replica (default: the smallest profiled)")
    p.add_argument("--config", type=slug, help="engine settings label of the profile, e.g. tuned (default: "
                   "'default' where profiled, else any other)")
    p.add_argument("--input-len", type=int, help="prompt tokens per request (required unless --log)")
    p.add_argument("--output-len", type=int, help="output tokens per request (required unless --log)")
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--batch-size", type=int, help="offline: requests submitted at once")
    load.add_argument("--concurrency", type=int, help="online: requests kept in flight (see --closed-loop)")
    load.add_argument("--request-rate", type=float, metavar="R",
                      help="online, open loop: arrivals per second to one replica; prints TTFT/TPOT/ITL/e2e "
                           "p50/p95/p99 from simulation, with 90%% intervals")
    p.add_argument("--arrival-cv", type=float, metavar="CV",
                   help="only with --request-rate: CV of the gaps between arrivals (1 = Poisson, default; 2, 4 = bursty)")
    p.add_argument("--log", metavar="FILE", help="with --request-rate: replay this request log (any format "
                   "`planner traffic` reads) with its times scaled to R req/s and its own lengths, as `plan` "
                   "sizes a route with a log; a log with prefix structure (Mooncake `hash_ids`, or `session_id`) "
                   "is simulated with a prefix cache per replica and the report gives its token hit rate")
    p.add_argument("--format", choices=FORMATS, type=slug, help="only with --log: its format (default: detected)")
    p.add_argument("--trace-block-size", type=int, metavar="TOKENS", help=f"only with --log: tokens per hash id "
                   f"of its `hash_ids` (default {DEFAULT_BLOCK_SIZE}, as the Mooncake traces); for a log with "
                   "`session_id`, the block size of the prefix cache")
    p.add_argument("--share", type=int, metavar="N", help="only with --request-rate: one of N replicas "
                   "behind a load balancer: R/N req/s with the bursts split at random (--log: every N-th "
                   "request) (default 1)")
    p.add_argument("--replicas", type=int, metavar="N", help="only with --request-rate: R req/s is the whole route's "
                   "rate, served by N replicas behind --router, simulated together on an hour of arrivals (--log: "
                   "the log's own timestamps scaled to R): the fleet tier `plan` sizes and reports online routes on")
    p.add_argument("--host-kv-gib", type=float, metavar="GIB", help="only with --log prefix structure: a "
                   "host-memory KV tier of GIB GiB per replica behind its prefix cache (vLLM's CPU offloading, "
                   "LMCache): every block the GPU caches is written there too, and what the GPU has evicted comes "
                   "back at --host-gb-per-s instead of being prefilled again. Its hit rate and cost were "
                   "measured once, on an H100 (docs/traffic.md)")
    p.add_argument("--host-gb-per-s", type=float, metavar="GB_S", help="with --host-kv-gib: host-to-GPU "
                   f"rate a KV hit comes back at (default {HOST_LOAD_GB_PER_S:g}: measured once on an H100 with "
                   "vLLM's native CPU offloading; PCIe 5.0 x16's peak is 64)")
    p.add_argument("--kv-cache-tokens", type=int, metavar="TOKENS", help="only with --request-rate: a replica "
                   "whose KV cache holds this many tokens instead of its profile's (a server started with another "
                   "--gpu-memory-utilization or --num-gpu-blocks-override: the number its log prints as 'GPU KV "
                   "cache size'); it bounds the batch and, with --log prefix structure, the prefix cache")
    p.add_argument("--router", choices=tuple(ROUTERS), help="only with --replicas: the load "
                   f"balancer (default {DEFAULT_ROUTER}, as plan assumes)")
    p.add_argument("--closed-loop", choices=CLOSED_LOOPS,
                   help="only with --concurrency: 'staggered' = clients in steady state, as real traffic (default); "
                        "'rounds' = a benchmark's clients starting together and staying in step "
                        "(vllm bench serve --max-concurrency), whose mean TTFT is far higher")
    p.add_argument("--num-requests", type=int, help="only with --closed-loop rounds: requests sent in all "
                   f"(default: {ROUNDS_PER_CLIENT} x concurrency)")
    p.add_argument("--profiles", metavar="DIR", help="profiles directory (default: bundled profiles/)")
    p.add_argument("--model-config", metavar="PATH", help="the model's Hugging Face config.json (or its folder): "
                   "predict by transfer from its architecture")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise InputError(f"--{name.replace('_', '-')}: expected a whole number >= 1, got {value}")


def _refuse_unused(args: argparse.Namespace) -> None:
    """InputError naming a flag the asked prediction would not use (none is silently ignored); then the
    defaults of the ones it uses."""
    open_loop = args.request_rate is not None
    unused = (("--share", args.share is not None and not open_loop, "--request-rate"),
              ("--arrival-cv", args.arrival_cv is not None and not open_loop, "--request-rate"),
              ("--replicas", args.replicas is not None and not open_loop, "--request-rate"),
              ("--kv-cache-tokens", args.kv_cache_tokens is not None and not open_loop, "--request-rate"),
              ("--host-kv-gib", args.host_kv_gib is not None and not args.log, "--log"),
              ("--host-gb-per-s", args.host_gb_per_s is not None and args.host_kv_gib is None, "--host-kv-gib"),
              ("--router", args.router is not None and args.replicas is None, "--replicas"),
              ("--format", args.format is not None and not args.log, "--log"),
              ("--trace-block-size", args.trace_block_size is not None and not args.log, "--log"),
              ("--closed-loop", args.closed_loop is not None and args.concurrency is None, "--concurrency"),
              ("--num-requests", args.num_requests is not None and args.closed_loop != "rounds",
               "--closed-loop rounds"))
    for flag, ignored, needs in unused:
        if ignored:
            raise InputError(f"{flag}: only with {needs} (this prediction would not use it); drop it")
    args.share = 1 if args.share is None else args.share
    args.router = args.router or DEFAULT_ROUTER
    args.trace_block_size = args.trace_block_size or DEFAULT_BLOCK_SIZE
    args.closed_loop = args.closed_loop or "staggered"


def _run_predict(args: argparse.Namespace) -> int:
    _refuse_unused(args)
    if args.log and args.request_rate is None:
        raise InputError("--log needs --request-rate (the rate the log is replayed at)")
    if not args.log and (args.input_len is None or args.output_len is None):
        raise InputError("--input-len and --output-len are required (or --log with --request-rate)")
    if args.input_len is not None and args.output_len is not None:
        _check_context(args.model, args.input_len + args.output_len)
    if args.request_rate is not None:
        return _run_predict_open_loop(args)

    curve = _predict_curve(args, serving=args.batch_size is None)
    load = _analytic_load(args)
    answer = rounds_answer(curve, load) if isinstance(load, Rounds) else analytic(curve, load)
    record = {**_prediction_record(curve, answer.prediction), "closed_loop": args.closed_loop if args.concurrency
              else None, "tier": answer.tier, "statistic": answer.statistic}
    if args.json:
        print(json.dumps(record, allow_nan=False, default=str))
    else:
        _print_prediction(record)
    return 0


def _check_context(model: str, tokens: float) -> None:
    """One line when prompt + output exceed the model's context window (max_position_embeddings)."""
    known = context_window(model)
    if known is not None and tokens > known[0]:
        raise InputError(f"prompt + output ({tokens:,.0f} tokens) exceed {model}'s context window of {known[0]:,} "
                         f"tokens (max_position_embeddings, {known[1]})")


def _analytic_load(args: argparse.Namespace) -> AnalyticLoad:
    """The one load `predict`'s flags describe (without --request-rate): an offline batch, or a closed loop."""
    if args.batch_size is not None:
        return Offline(args.input_len, args.output_len, args.batch_size)
    if args.closed_loop == "rounds":
        return benchmark_rounds(args.input_len, args.output_len, args.concurrency, args.num_requests)
    return Steady(args.input_len, args.output_len, args.concurrency)


def _transferred_curve(args: argparse.Namespace, profiles, config_path: str | None):
    """No fitted curve (or --model-config given): the curve planner.engine.transfer predicts from the facts."""
    model = _model_for(args.model, config_path)
    gpu = gpu_spec(args.gpu)
    if gpu is None:
        raise NoCurveError(f"no datasheet facts for GPU {args.gpu!r} (fleetfacts/data/gpu_specs.csv)")
    return default_transfer_target(transfer_for(profiles), args.engine, model, gpu, args.precision, args.tp)


def _model_for(name: str, config_path: str | None):
    if config_path is None:
        model = model_facts(name)
        if model is None:
            raise NoCurveError(f"no facts for model {name!r}: pass --model-config PATH "
                               f"(a Hugging Face config.json) or see `python -m planner models`")
        return model
    path = Path(config_path)
    config = load_model_config(path if path.is_dir() else path.parent)
    if config is None:
        raise InputError(f"--model-config {config_path}: no config.json there")
    try:
        return model_spec_from_config(name, config, str(path))
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"--model-config {config_path}: not a decoder config.json (missing or bad {err})") from None


def _predict_curve(args: argparse.Namespace, serving: bool = True) -> Curve:
    """The curve `predict` asks for; `serving`: with its server model (the front end the online loads add;
    an offline batch does not meet it, and skips its fit)."""
    for name in ("input_len", "output_len", "batch_size", "concurrency", "tp", "num_requests"):
        _positive(name, getattr(args, name))
    profiles = load_profiles(args.profiles)
    why = ""
    if not args.model_config:
        asked = profiles[(profiles["engine"] == args.engine) & (profiles["gpu"] == args.gpu)
                         & (profiles["model"] == args.model)] if not profiles.empty else profiles
        try:  # fit the asked engine, GPU and model only (every other group is left alone)
            curve = find_curve(fit_with_physics(profiles, asked), args.engine, args.gpu, args.model, args.precision, args.tp,
                               args.engine_version, args.config)
            return with_server_latency_of(curve, profiles) if serving else curve
        except NoCurveError:
            try:  # say what is available: every group (fitted only on this path)
                find_curve(fit_with_physics(profiles), args.engine, args.gpu, args.model, args.precision, args.tp,
                           args.engine_version, args.config)
            except NoCurveError as err:
                why = str(err)
    try:  # no fitted curve (or --model-config given): predict by transfer from the facts
        return _transferred_curve(args, profiles, args.model_config)
    except NoCurveError as err:
        raise NoCurveError(f"{why}; no transfer either: {err}" if why else str(err)) from None


# Percentiles `predict --request-rate` prints.
SHOWN_PERCENTILES = (50, 95, 99)
# A log replay must keep this many requests for its p99 to rest on more than one request.
MIN_REPLAY_REQUESTS = 100
# Served output below this share of the offered output: the replica is overloaded (a short run's drain tail
# alone stays well above it).
OVERLOAD_SERVED_SHARE = 0.8


def _run_predict_open_loop(args: argparse.Namespace) -> int:
    _check_open_loop_args(args)
    curve = _with_kv_cache(_predict_curve(args), args.kv_cache_tokens)
    if args.replicas is not None:
        pred, offered_tok_s = _predict_fleet(args, curve), math.nan
    elif args.log:
        pred, offered_tok_s = _predict_log(args, curve)
    else:
        pred = predict(curve, OpenLoop(args.request_rate, args.arrival_cv).share(args.share),
                       Lengths.fixed(args.input_len, args.output_len), percentiles=SHOWN_PERCENTILES)
        offered_tok_s = args.request_rate / args.share * args.output_len
    record = {"group": curve.key.label(), "config": curve.key.config, "input_len": args.input_len,
              "output_len": args.output_len, "arrival_cv": args.arrival_cv,
              **{k: _finite(v) for k, v in pred.to_record().items()},
              "front_end": curve.front_end.basis if curve.front_end else None, "provenance": "predicted",
              "overloaded": bool(pred.output_tok_per_s < OVERLOAD_SERVED_SHARE * offered_tok_s)}
    if args.json:
        print(json.dumps(record, allow_nan=False, default=str))
        return 0
    _print_open_loop(record)
    return 0


def _with_kv_cache(curve: Curve, tokens: int | None) -> Curve:
    """The curve with a replica's KV cache of `tokens` (None: as profiled); InputError below one token."""
    if tokens is None:
        return curve
    _positive("kv_cache_tokens", tokens)
    return replace(curve, caps=replace(curve.caps, kv_cache_tokens=tokens))


def _check_open_loop_args(args: argparse.Namespace) -> None:
    """InputError on a bad rate, CV or share, or on flags --log would ignore; the CV defaults to 1 (Poisson)."""
    if not (args.request_rate > 0 and math.isfinite(args.request_rate)):
        raise InputError(f"--request-rate: expected a number > 0, got {args.request_rate:g}")
    if args.log:
        given = [flag for flag, value in (("--input-len", args.input_len), ("--output-len", args.output_len),
                                          ("--arrival-cv", args.arrival_cv)) if value is not None]
        if given:
            raise InputError(f"{', '.join(given)}: not used with --log (the log's own lengths and arrival times "
                             "are replayed); drop them")
    if args.arrival_cv is None:
        args.arrival_cv = 1.0
    if not (args.arrival_cv > 0 and math.isfinite(args.arrival_cv)):
        raise InputError(f"--arrival-cv: expected a number > 0, got {args.arrival_cv:g}")
    if args.share < 1:
        raise InputError(f"--share: expected a whole number >= 1, got {args.share}")


def _predict_log(args: argparse.Namespace, curve) -> tuple[LatencyReport, float]:
    """`predict --request-rate R --log FILE [--share N]`: one replica's share of the log replayed at R req/s;
    (its latency, the output tok/s it is offered)."""
    traffic = _read_log(args)
    requests = traffic.requests
    if len(requests) // args.share < MIN_REPLAY_REQUESTS:
        raise InputError(f"--share {args.share}: leaves {len(requests) // args.share} of the log's "
                         f"{len(requests)} requests, too few for a p99 (at least {MIN_REPLAY_REQUESTS}); "
                         f"use --share {max(1, len(requests) // MIN_REPLAY_REQUESTS)} or less")
    lengths = (requests["input_len"].to_numpy(), requests["output_len"].to_numpy())
    load = replace(Replay.of_log(requests["t_s"].to_numpy(float), lengths, args.request_rate, args.share,
                                 Path(args.log).name, log_blocks(traffic)), host=_host_tier(args, curve))
    return predict(curve, load, percentiles=SHOWN_PERCENTILES), load.rate_rps * float(np.mean(load.output_len))


def _predict_fleet(args: argparse.Namespace, curve) -> LatencyReport:
    """`predict --request-rate R --replicas N`: the route's one load at R req/s (planner.traffic.workload.
    route_requests, as plan builds it) on N replicas behind the router: the fleet tier."""
    if args.replicas < 1 or args.share != 1:
        raise InputError(f"--replicas: expected a whole number >= 1 and no --share, got {args.replicas}")
    row: dict = {"name": "predict", "model": args.model, "traffic": "online", "rate_rps": args.request_rate,
                 "peak_to_mean": 1.0, "arrival_cv": args.arrival_cv, "input_len_mean": args.input_len,
                 "output_len_mean": args.output_len}
    log, blocks = None, None
    if args.log:
        traffic = _read_log(args)
        requests, blocks = traffic.requests, log_blocks(traffic)
        t = np.sort(requests["t_s"].to_numpy(float))
        own = (t.size - 1) / (t[-1] - t[0]) if t.size > 1 and t[-1] > t[0] else args.request_rate
        row.update(rate_rps=own, peak_to_mean=args.request_rate / own, input_len_mean=1.0, output_len_mean=1.0)
        log = (requests["t_s"].to_numpy(float), (requests["input_len"].to_numpy(), requests["output_len"].to_numpy()))
    route = Route.from_row(row)
    load = Fleet(route_requests(route, log, blocks), args.replicas, args.router, host=_host_tier(args, curve))
    return predict(curve, load, percentiles=SHOWN_PERCENTILES)


def _host_tier(args: argparse.Namespace, curve: Curve) -> HostTier | None:
    """--host-kv-gib's tier for the curve's model, engine and precision; None without it.  InputError on a size or
    bandwidth that is not a number > 0, or a model without facts (its KV bytes per token are unknown)."""
    if args.host_kv_gib is None:
        return None
    gb_per_s = HOST_LOAD_GB_PER_S if args.host_gb_per_s is None else args.host_gb_per_s
    for flag, value in (("--host-kv-gib", args.host_kv_gib), ("--host-gb-per-s", gb_per_s)):
        if not (math.isfinite(value) and value > 0):
            raise InputError(f"{flag}: expected a number > 0, got {value:g}")
    model = model_facts(curve.key.model)
    if model is None:
        raise InputError(f"--host-kv-gib: no model facts for {curve.key.model} (its KV bytes per token are unknown)")
    return HostTier(*host_tier_terms(model, curve.key.engine, curve.key.precision, args.host_kv_gib, gb_per_s))


def _read_log(args: argparse.Namespace) -> TrafficLog:
    if args.trace_block_size < 1:
        raise InputError(f"--trace-block-size: expected a whole number of tokens >= 1, got {args.trace_block_size}")
    return read_log(args.log, args.format, block_size=args.trace_block_size)


def _finite(value: object) -> object:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _print_open_loop(r: dict) -> None:
    print(f"{r['group']}  (predicted, latency {r['latency_basis']})")
    lengths = "its own lengths" if r["input_len"] is None else f"{r['input_len']}/{r['output_len']} tokens"
    print(terminal_safe(f"  {r['load']}, {lengths} ({r['tier']}): {r['output_tok_per_s']:.0f} output tok/s"))
    for metric in ("ttft", "tpot", "itl", "e2e"):
        cells = []
        for p in SHOWN_PERCENTILES:
            name = f"{metric}_p{p}_ms"
            value, low, high = r.get(name), r.get(f"{name}_low"), r.get(f"{name}_high")
            cells.append("n/a" if value is None else f"p{p} {value:.1f} [{low:.1f}..{high:.1f}]")
        print(f"  {metric.upper():5s} ms  " + "   ".join(cells))
    if r.get("prefix_hit_rate") is not None:
        print(f"  prefix cache: {100 * r['prefix_hit_rate']:.1f}% of prompt tokens found cached (per replica, LRU "
              "of its KV cache; the rest prefilled)")
    if r["front_end"]:
        print(f"  server front end: {r['front_end']}")
    if r["overloaded"]:
        print("  overloaded: the replica serves less than the offered load, so its queue grows for as long as the "
              "run lasts; these percentiles are of this run, not of a steady state (add replicas or lower the rate)")


def _prediction_record(curve, pred) -> dict[str, object]:
    def clean(value: float) -> float | None:
        return None if value is None or not math.isfinite(value) else float(value)

    return {
        "group": curve.key.label(), "config": curve.key.config, "output_tok_per_s": clean(pred.output_tok_per_s),
        "low": clean(pred.low), "high": clean(pred.high), "extrapolated": bool(pred.extrapolated),
        "provenance": pred.provenance, "ttft_ms": clean(pred.ttft_ms), "tpot_ms": clean(pred.tpot_ms),
        "e2e_ms": clean(pred.e2e_ms), "concurrency": clean(pred.concurrency),
        "per_gpu_output_tok_per_s": clean(pred.output_tok_per_s / curve.key.tp),
        "source_provenance": curve.source_provenance, "has_latency": bool(curve.has_latency), "note": pred.note,
    }


def _print_prediction(r: dict) -> None:
    label = "EXTRAPOLATED (outside the measured range)" if r["extrapolated"] else r["provenance"]
    if r["provenance"] == "physics":
        label = "PHYSICS (longer than measured: attention and KV reads continued from the measured points)"
    if r["source_provenance"] == "transferred":
        label = "TRANSFERRED (no profile: from architecture, datasheet and calibration)" + (
            ", outside the calibrated shapes" if r["extrapolated"] else "")
    print(terminal_safe(r["group"]))
    print(f"  output tok/s (replica): {r['output_tok_per_s']:.0f}  [{r['low']:.0f} .. {r['high']:.0f}]  {label}")
    print(f"  per GPU: {r['per_gpu_output_tok_per_s']:.0f} tok/s   concurrency: {r['concurrency']:g}")
    ttft, tpot, e2e = (num(r[k], f) or "n/a" for k, f in (("ttft_ms", "{:.1f}"), ("tpot_ms", "{:.2f}"),
                                                            ("e2e_ms", "{:.0f}")))
    print(f"  TTFT {ttft} ms   TPOT {tpot} ms   e2e {e2e} ms (means)")
    if r["note"]:
        print(terminal_safe(f"  note: {r['note']}"))


register(Command("predict", "predict one replica's throughput and latency at one shape", _predict_arguments,
                 _run_predict))
