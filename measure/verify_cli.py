"""`python -m measure verify`: its arguments, the run (load, judge, print, write the profile row)."""

from __future__ import annotations

import argparse
import math
import os
import secrets
from pathlib import Path

from fleetfacts.errors import InputError
from fleetfacts.slo import SloCheck
from fleetfacts.specs import model_facts
from measure import server_metrics, verify
from measure.envinfo import command_line
from measure.loadgen import LoadSpec, run_load_sync
from measure.profile_dir import ProfileDir, default_out_dir
from measure.stats import Measurement, metric_columns

# Token ids are drawn below this when the model's vocabulary is unknown (Llama-2's 32k: valid for most models).
DEFAULT_VOCAB_SIZE = 32000
MAX_SCALE = 100.0
PROBE_TIMEOUT_S = 30.0
# How a run's requests are drawn from the route's traffic (recorded with each run; benchmarks/roundtrip_check.py
# rebuilds them): a log compressed to the peak then split round robin; bursts split at random.
SHARE_METHOD = "round-robin"
DESCRIPTION = """\
Measure a running OpenAI-compatible deployment against its plan. The route's traffic (--log, the route's log,
or arrivals at its peak rate with its arrival CV and length distribution) is scaled to the share --replicas of
the plan's replicas carry, sent for at most --duration s / --max-requests requests, and every metric is judged:
within interval (the plan's prediction +- its interval, at least the run-to-run spread), drift (outside it but
within the SLO), SLO at risk (past the SLO at the route's percentile, or errors: requests still running at the
end of --drain count). Throughput: served output tokens/s against what the arrivals offered.
The measured point is appended as a profile row (mode rate), so the next plan can use it."""
EPILOG = f"""Exit codes: {verify.EXIT_MEETS} meets the plan, {verify.EXIT_DRIFT} SLOs kept but predictions off \
(drift), {verify.EXIT_AT_RISK} an SLO at risk, 2 bad input."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", required=True, help="plan CSV (written by `python -m planner plan`)")
    p.add_argument("--routes", required=True, help="routes CSV the plan was made from (the route's traffic and SLOs)")
    p.add_argument("--route", required=True, help="route to verify")
    p.add_argument("--base-url", required=True, help="the deployment, e.g. http://127.0.0.1:8000")
    p.add_argument("--log", help="request log to replay (CSV/JSONL: timestamp, input_len, output_len); default: "
                   "the route's log, else synthetic arrivals")
    p.add_argument("--synthetic", action="store_true", help="synthetic arrivals even when the route has a log")
    p.add_argument("--replicas", type=int, default=1, help="replicas behind --base-url (default 1)")
    p.add_argument("--scale", type=float, default=1.0, help="offer this multiple of the share (default 1; e.g. 2 "
                   "and 3 find where the SLO breaks: the verdicts still compare with the plan's figures at 1x)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals (default 60)")
    p.add_argument("--max-requests", type=int, default=1000, help="at most this many requests (default 1000)")
    p.add_argument("--drain", type=float, default=60.0, help="seconds after the arrivals before requests still "
                   "running are cancelled (counted as errors; default 60)")
    p.add_argument("--served-model", help="model name sent in requests (default: omitted)")
    p.add_argument("--endpoint", choices=("completions", "chat"), default="completions")
    p.add_argument("--no-ignore-eos", action="store_true", help="do not send ignore_eos (transformers serve)")
    p.add_argument("--prompt-format", choices=("tokens", "words"), help="tokens: random token ids, each prompt "
                   "exactly its length and as distinct as production traffic, whatever the server's tokenizer "
                   "(default where the server takes them: a one-token probe decides); words: random words (the chat "
                   "endpoint's default)")
    p.add_argument("--vocab-size", type=int, help="token ids are drawn below this (default: the plan model's "
                   "config.json vocab_size, else 32000)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="env var holding the API key")
    p.add_argument("--out", help="profile folder for the measured row (default profiles/measured/<gpu>/"
                   "<engine>-<model>-<precision>-tp<N>-verify)")
    p.add_argument("--seed", type=int, default=0, help="seed of synthetic arrivals and lengths (default 0)")
    p.add_argument("--prompt-seed", type=int, help="seed of the prompts' tokens (default: new each run, so a "
                   "server's prefix cache cannot serve one run from an earlier one's prompts)")
    p.add_argument("--assigned", metavar="FILE", help="replay these requests as they are: one replica's share as "
                   "the plan's router assigned it, at the planned load's times, with the fleet simulation's "
                   "prediction per request (`python -m planner simulate --replica-out FILE`); each SLO window's "
                   "measured percentile is printed beside the predicted one. Use with --replicas 1")
    p.add_argument("--window", metavar="heaviest:SECONDS", help="replay only the heaviest SECONDS of the route's "
                   f"load (its log, else an hour of synthetic arrivals), after up to {verify.WINDOW_LEAD_IN_S:g} s of "
                   "the arrivals before it (not judged), e.g. heaviest:60; --duration and --max-requests then bound "
                   "the window. worst:SECONDS (with --assigned): the SECONDS whose requests the file's predictions put "
                   "worst (highest TTFT at the route's percentile)")
    p.add_argument("--trace-block-size", type=int, default=512, help="tokens per hash id of a log with prefix structure "
                   "(Mooncake `hash_ids`, 512 as the published traces; sessions are cut into blocks of this size): "
                   "its prompts then share the same tokens where the log's share the same ids (--prompt-format tokens)")
    p.add_argument("--record", help="append the run (verdicts, every request's latencies, the server's /metrics "
                   "deltas) as one JSON line to this file")


# Synthetic arrivals a heaviest window is chosen from: an hour, as the planner plans a route without a log.
WINDOW_HORIZON_S = 3600.0
WINDOW_MAX_REQUESTS = 10**6


def _requests(args: argparse.Namespace, route: dict, share: verify.Share) -> tuple[tuple, str, float]:
    """(requests, arrival label, lead-in s not judged)."""
    window = verify.parse_window(args.window)
    if window is not None and verify.window_kind(args.window) != "heaviest":
        raise InputError("--window worst:SECONDS and at:START:SECONDS need --assigned: they pick the window of that "
                         "file's requests")
    duration = args.duration if window is None else WINDOW_HORIZON_S
    cap = args.max_requests if window is None else WINDOW_MAX_REQUESTS
    log = args.log or ("" if args.synthetic else route["log"])
    if log:
        duration = duration if window is None else math.inf
        specs = verify.replayed_requests(log, share, duration, cap, float(route["rate_rps"]), args.route,
                                         args.trace_block_size)
        arrival = f"replay:{Path(log).name}"
    else:
        specs = verify.synthetic_requests(route, share, duration, cap, args.seed)
        arrival = verify.synthetic_arrival(route, share)
    if window is None:
        return specs, arrival, 0.0
    start = verify.heaviest_start([r.send_at_s or 0.0 for r in specs], window)
    kept, lead = verify.window_of(specs, start, window)
    kept = tuple(r for r in kept if (r.send_at_s or 0.0) <= args.duration + lead)[:args.max_requests]
    return kept, f"{arrival} heaviest {window:g} s from {start:.0f} s (+{lead:.0f} s lead-in)", lead


def _assigned_requests(args: argparse.Namespace, route: dict) -> tuple[tuple, str, float, SloCheck]:
    """(requests, arrival label, lead-in s, the predicted verdict for them) of --assigned."""
    frame = verify.assigned_requests(args.assigned)
    specs = verify.assigned_specs(frame)
    window = verify.parse_window(args.window)
    name = Path(args.assigned).name
    if window is None:  # the whole file, from its first request
        begin, lead, label = float(frame["timestamp"].iloc[0]), 0.0, f"assigned:{name}"
        kept, _ = verify.window_of(specs, begin, math.inf, lead_in_s=0.0)
        kept = tuple(r for r in kept if (r.send_at_s or 0.0) <= args.duration)[:args.max_requests]
    else:
        kind = verify.window_kind(args.window)
        times = [r.send_at_s or 0.0 for r in specs]
        if kind == "at":
            start = verify.window_at(args.window)
        elif kind == "worst":
            start = verify.worst_start(times, frame["predicted_ttft_ms"].to_numpy(float), window,
                                       float(route["slo_percentile"]))
        else:
            start = verify.heaviest_start(times, window)
        kept, lead = verify.window_of(specs, start, window)
        kept = tuple(r for r in kept if (r.send_at_s or 0.0) <= args.duration + lead)[:args.max_requests]
        begin = start - lead
        label = f"assigned:{name} {kind} {window:g} s from {start:.0f} s (+{lead:.0f} s lead-in)"
    end = begin + max(((r.send_at_s or 0.0) for r in kept), default=0.0) + 1e-9
    predicted = verify.predicted_check(frame, begin, end, route, warmup_s=lead)
    return kept, label, lead, predicted


def _load(args: argparse.Namespace, route: dict,
          share: verify.Share) -> tuple[tuple, str, float, SloCheck | None, verify.Share]:
    """(requests, arrival label, lead-in s, the predicted verdict for them or None, the share they are)."""
    if not args.assigned:
        return (*_requests(args, route, share), None, share)
    if args.log or args.synthetic:
        raise InputError("--assigned replays its own requests: leave out --log and --synthetic")
    specs, arrival, lead_in, predicted = _assigned_requests(args, route)
    if not specs:
        return specs, arrival, lead_in, predicted, share
    rate = len(specs) / max(max(r.send_at_s or 0.0 for r in specs), 1e-9)  # the file's own rate, not the plan's share
    return specs, arrival, lead_in, predicted, verify.Share(rate, 1, share.plan_replicas)


def check_numbers(args: argparse.Namespace) -> None:
    """InputError for a run length that is not a finite number of seconds > 0 (--duration) or >= 0 (--drain),
    or fewer than one request."""
    if not (math.isfinite(args.duration) and args.duration > 0):
        raise InputError(f"--duration must be a number of seconds > 0, got {args.duration:g}")
    if not (math.isfinite(args.drain) and args.drain >= 0):
        raise InputError(f"--drain must be a number of seconds >= 0, got {args.drain:g}")
    if args.max_requests < 1:
        raise InputError(f"--max-requests must be >= 1, got {args.max_requests}")


def run(args: argparse.Namespace, argv: list[str]) -> int:
    check_numbers(args)
    plan = verify.plan_row(args.plan, args.route)
    route = verify.route_row(args.routes, args.route)
    if args.record:  # a record that cannot be written is said now, not after the run
        try:
            Path(args.record).parent.mkdir(parents=True, exist_ok=True)
            with open(args.record, "a", encoding="utf-8"):
                pass
        except OSError as err:
            raise InputError(f"--record {args.record}: cannot write ({err.strerror or err})") from None
    if not 0 < args.scale <= MAX_SCALE:
        raise InputError(f"--scale must be > 0 and <= {MAX_SCALE:g}, got {args.scale:g}")
    share = verify.share_of(route, plan, args.replicas, args.scale)
    specs, arrival, lead_in, predicted, share = _load(args, route, share)
    if not specs:
        raise InputError(f"no request of the log falls within --duration {args.duration:g} s")
    if args.prompt_format == "tokens" and args.endpoint != "completions":
        raise InputError("--prompt-format tokens needs --endpoint completions (chat messages are text)")
    base_url = args.base_url.rstrip("/")
    prompt_format = args.prompt_format or _default_prompt_format(args, base_url)
    # Prompts differ from run to run (a server keeps earlier runs' prompts in its prefix cache); arrivals follow --seed.
    prompt_seed = args.prompt_seed if args.prompt_seed is not None else secrets.randbits(63)
    spec = LoadSpec(base_url=base_url, requests=specs, endpoint=args.endpoint,
                    model=args.served_model, max_duration_s=args.duration + lead_in + args.drain,
                    api_key=os.environ.get(args.api_key_env) or None, ignore_eos=not args.no_ignore_eos,
                    prompt_format=prompt_format, vocab_size=_vocab_size(args, plan), seed=prompt_seed,
                    block_size=args.trace_block_size)
    print(f"verify {args.route}: {len(specs)} requests at {share.rate_rps:.3g} req/s ({arrival}, {prompt_format} "
          f"prompts) against {args.replicas} of the plan's {share.plan_replicas} replicas")
    recorder = server_metrics.PointRecorder(lambda: server_metrics.fetch_metrics(base_url))
    recorder.begin()
    load = run_load_sync(spec)
    server = recorder.end()
    m = verify.measurement(load, specs)
    columns = metric_columns(m)
    check = verify.window_check(load, route, warmup_s=lead_in)
    hit_rate, hit_source = verify.measured_hit_rate(load, server)
    results = (verify.verdicts(m, plan, route, load, specs) + verify.window_verdicts(check, plan, route)
               + [verify.prefix_verdict(hit_rate, route, plan, hit_source)])
    print_verdicts(results)
    if args.scale != 1.0:
        print(scaled_note(args.scale, share.rate_rps))
    print(f"SLO verdict: {check.describe()}")
    for line in check.window_lines():
        print(f"  {line}")
    windows = verify.window_comparison(check, predicted) if predicted is not None else []
    print_windows(windows, float(route["slo_percentile"]))
    _write_record(args, plan, share, arrival, specs, m, results, server, prompt_seed, windows, load, lead_in)
    if m.first_error:
        print(f"first error: {m.first_error}")
    if m.num_requests:
        seed = None if arrival.startswith("replay:") else args.seed
        _write_profile(args, verify.profile_row(columns, m, plan, share, specs, arrival, command_line(argv), seed),
                       plan)
    return verify.exit_code(results)


def scaled_note(scale: float, rate_rps: float) -> str:
    """The line a scaled run prints under its verdicts: what its 'predicted' column is, and how to predict it."""
    return (f"note: --scale {scale:g}: 'predicted' is the plan's figure at 1x, so latency reads as drift; a "
            f"prediction for the requests this run sent: `python -m planner predict ... --log <them> --request-rate "
            f"{rate_rps:.4g} --replicas 1` (--record keeps them; docs/verify.md)")


def _default_prompt_format(args: argparse.Namespace, base_url: str) -> str:
    """tokens where the server takes token-id prompts (vLLM, SGLang, trtllm-serve do), else words, said so."""
    if args.endpoint != "completions":
        return "words"
    import httpx  # noqa: PLC0415 - only verify's probe needs it

    body: dict = {"prompt": [1, 2, 3], "max_tokens": 1}
    if args.served_model:
        body["model"] = args.served_model
    key = os.environ.get(args.api_key_env)
    try:
        answer = httpx.post(base_url + "/v1/completions", json=body, timeout=PROBE_TIMEOUT_S,
                            headers={"Authorization": f"Bearer {key}"} if key else {})
    except httpx.HTTPError as err:
        raise InputError(f"--base-url {base_url}: no answer ({type(err).__name__}: {err})") from None
    if answer.status_code == 200:
        return "tokens"
    print(f"note: the server refused a token-id prompt (HTTP {answer.status_code}): sending words, whose token "
          "count and prefix-cache hits depend on its tokenizer (the prefix-cache share is checked below)")
    return "words"


def _vocab_size(args: argparse.Namespace, plan: dict) -> int:
    if args.vocab_size is not None:
        if args.vocab_size < 2:
            raise InputError(f"--vocab-size must be at least 2, got {args.vocab_size}")
        return int(args.vocab_size)
    facts = model_facts(plan["model"]) if plan["model"] else None
    return facts.vocab_size if facts else DEFAULT_VOCAB_SIZE


def _write_record(args: argparse.Namespace, plan: dict, share: verify.Share, arrival: str, specs: tuple,
                  m: Measurement, results: list[verify.Verdict], server: dict | None, prompt_seed: int,
                  windows: list[dict], load=None, lead_in: float = 0.0) -> None:
    """The run beside the profile row: verdicts, the server's /metrics deltas, the arguments, and per completed
    request its prompt and prefix-cached tokens where the server sent them (JSON lines)."""
    if not args.record:
        return
    record = {"route": args.route, "prompt_seed": prompt_seed, "share_method": SHARE_METHOD, "plan_route": plan["route"], "replicas": args.replicas,
              "plan_replicas": share.plan_replicas, "rate_rps": share.rate_rps, "arrival": arrival,
              "requests": len(specs), "argv": vars(args) | {"record": str(args.record)},
              "verdicts": [v.row() for v in results], "server": server,
              "measured": {"ttft_ms": m.ttft_ms, "tpot_ms": m.tpot_ms, "e2e_ms": m.e2e_ms},
              "windows_measured_vs_predicted": windows,
              "prompt_cached_tokens": [[r.prompt_tokens, r.cached_tokens] for r in (load.results if load else ())
                                       if r.ok],
              # per completed request [when it was due (s from the replay's start), TTFT ms, TPOT ms (null: one
              # token)]; those due from `judged_from_s` (after the lead-in) are the ones a window's verdict judged:
              # the replicas' replays of one fleet window pool into it (measure.verify.pooled_window)
              "timeline": [[r.scheduled_s if r.scheduled_s is not None else r.start_s, r.ttft_s * 1000,
                            None if r.tpot_s is None else r.tpot_s * 1000]
                           for r in (load.results if load else ()) if r.ok and r.ttft_s is not None],
              "judged_from_s": lead_in}
    server_metrics.append_record(args.record, record)
    print(f"run recorded in {args.record}")


def _write_profile(args: argparse.Namespace, row: dict, plan: dict) -> None:
    out = Path(args.out) if args.out else default_out_dir(plan["gpu"], plan["engine"], row["model"], plan["precision"],
                                                          int(plan["tp"]), "verify")
    ProfileDir(out).append(row)
    print(f"measured row appended to {out / 'profile.csv'}")


def print_windows(windows: list[dict], percentile: float) -> None:
    """Each SLO window, measured beside the fleet simulation's prediction for the same requests (--assigned)."""
    if not windows:
        return
    print(f"per window (p{percentile:g}, ms): start_s requests  TTFT measured / predicted  TPOT measured / predicted")
    for w in windows:
        print(f"  {w['start_s']:7.0f} {w['requests']:8d}  {w['ttft_measured_ms']:9.1f} / {w['ttft_predicted_ms']:9.1f}"
              f"  {w['tpot_measured_ms']:9.1f} / {w['tpot_predicted_ms']:9.1f}")


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def print_verdicts(results: list[verify.Verdict]) -> None:
    print(f"{'metric':<18} {'measured':>10} {'predicted':>10} {'band':>21} {'SLO':>8}  verdict")
    for v in results:
        span = f"{_cell(v.low)}-{_cell(v.high)}" if v.low is not None else ""
        print(f"{v.metric:<18} {_cell(v.measured):>10} {_cell(v.predicted):>10} {span:>21} {_cell(v.slo):>8}  "
              f"{v.verdict}")
