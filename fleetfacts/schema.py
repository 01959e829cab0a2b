"""Declared schemas of Fleetplan's file formats, and their validating loaders.

Every CSV the project reads or writes (profiles, routes, prices, engine
operations costs, plans) is described once here as a tuple of `Column`s.
`load_table` checks a file against its schema and raises `InputError` with a
one-line message naming the file, the line and the column, so a user mistake
never surfaces as a traceback.  `measure/` writes profiles with these schemas and
`planner/` reads them.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import pandas as pd

from fleetfacts.errors import InputError

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# A profile's `config` when it names no settings: the engine's own defaults (published profiles too).
DEFAULT_CONFIG = "default"

# Input bounds: not capacity claims, the largest values the planner is built and tested for; a larger
# value is refused with the limit named instead of overflowing or exhausting memory.
# Requests/s of one route: 1e7 needs millions of replicas, past any fleet this tool is meant to plan.
MAX_RATE_RPS = 1e7
# Requests in one batch job (the simulation check samples a bounded subset of them).
MAX_BATCH_REQUESTS = 1e9
# Tokens of one request: the longest published context windows are ~1e7 tokens.
MAX_TOKENS = 1e9
# Peak over mean rate, and arrival CV: beyond these a route is not a steady service to size.
MAX_PEAK_TO_MEAN = 1e3
MAX_ARRIVAL_CV = 1e2
# Replicas in one plan row.
MAX_REPLICAS = 1e7

# Characters that make a spreadsheet treat a cell as a formula (OWASP CSV injection).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class Column:
    """One column of a file format.

    kind: "str" (free text), "slug" (lowercase identifier; input is lower-cased),
    "int", "float", or "enum" (one of `choices`, lower-cased).
    minimum: inclusive lower bound for numbers; `positive` makes it exclusive.
    maximum: inclusive upper bound (an input bound, see the MAX_* constants).
    """

    name: str
    kind: str
    required: bool = False
    doc: str = ""
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    positive: bool = False
    default: object = None
    maximum: float | None = None


@dataclass(frozen=True)
class Schema:
    name: str
    columns: tuple[Column, ...]
    # (old name, new name) of columns renamed since files were first written: a file with the old name reads.
    renamed: tuple[tuple[str, str], ...] = ()

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


def _latency_columns() -> tuple[Column, ...]:
    cols = []
    for metric, what in (
        ("ttft", "time to first token"),
        ("tpot", "time per output token after the first (vLLM's definition)"),
        ("itl", "inter-token latency"),
        ("e2e", "end-to-end request latency"),
    ):
        for statistic in ("mean", "p50", "p95", "p99"):
            cols.append(Column(f"{metric}_{statistic}_ms", "float", doc=f"{what}, {statistic}, ms", minimum=0))
    return tuple(cols)


# Profile row statuses that hold a measurement (a resumed sweep skips their points); only "ok" rows are fitted.
MEASURED_STATUSES = ("ok", "", "suspect")

PROFILE = Schema(
    "profile",
    (
        Column("gpu", "slug", True, "GPU type, e.g. h100, h200, a100, l40s, b200"),
        Column("engine", "slug", True, "serving engine: vllm, trtllm, sglang, ..."),
        Column("engine_version", "str", True, "engine version as reported, e.g. 0.26.0"),
        Column("model", "slug", True, "model slug, e.g. llama-3.1-8b"),
        Column("precision", "slug", True, "weight precision: bf16, fp16, fp8, fp4, ..."),
        Column("tp", "int", True, "tensor-parallel GPUs per replica", minimum=1),
        Column("pp", "int", False, "pipeline-parallel stages per replica", minimum=1, default=1),
        Column("config", "slug", False, "engine settings label: default (the engine's defaults), or a name "
               "such as tuned whose settings the profile's env.json records", default=DEFAULT_CONFIG),
        Column("mode", "enum", True, "offline = N requests submitted at once; concurrency = N in flight; "
               "rate = arrivals per second", choices=("offline", "concurrency", "rate")),
        Column("input_len", "int", True, "prompt tokens per request", minimum=1),
        Column("output_len", "int", True, "output tokens per request", minimum=1),
        Column("batch_size", "int", False, "offline mode: requests submitted at once", minimum=1),
        Column("concurrency", "int", False, "concurrency mode: requests kept in flight", minimum=1),
        Column("request_rate", "float", False, "rate mode: mean arrivals per second", positive=True),
        Column("arrival", "str", False, "rate mode: arrival process, e.g. poisson, gamma:cv=2"),
        Column("arrival_seed", "int", False, "rate mode: seed of the arrival draw (fleetfacts.arrivals), so the "
               "planner replays the arrivals the point was measured under", minimum=0),
        Column("num_requests", "int", False, "requests completed in the point", minimum=1),
        Column("duration_s", "float", False, "wall time of the timed region, s", positive=True),
        Column("output_tok_per_s", "float", False, "output tokens/s of the whole replica (all its GPUs)",
               positive=True),
        Column("total_tok_per_s", "float", False, "input + output tokens/s of the whole replica", positive=True),
        Column("req_per_s", "float", False, "completed requests/s", positive=True),
        *_latency_columns(),
        Column("kv_cache_tokens", "int", False, "KV-cache capacity the engine reported, tokens", minimum=1),
        Column("max_num_seqs", "int", False, "engine's cap on sequences in a batch", minimum=1),
        Column("max_num_batched_tokens", "int", False, "engine's token budget per step", minimum=1),
        Column("cuda_graph_max_batch", "int", False, "engine's largest CUDA-graph batch, sequences (vLLM: "
               "compilation_config.max_cudagraph_capture_size); a bigger batch runs without the graphs. Blank: "
               "the engine's default (planner.engine.curves.DEFAULT_CUDA_GRAPH_MAX_BATCH)", minimum=1),
        Column("roofline_frac", "float", False, "measured decode speed over the memory-bandwidth bound",
               minimum=0),
        Column("status", "enum", False, "ok; failed (reason in `error`); or suspect: measured but not steady "
               "speed, e.g. first-use kernel compilation, the reason in `notes` (kept, never fitted)",
               choices=("ok", "failed", "suspect"), default="ok"),
        Column("error", "str", False, "why a failed point failed"),
        Column("provenance", "enum", True, "measured (by this project) or published",
               choices=("measured", "published")),
        Column("source", "str", True, "the command that measured it, or the URL and document version"),
        Column("date", "str", True, "date measured or published (YYYY-MM-DD)"),
        Column("notes", "str", False, "anything a reader needs to interpret the row"),
    ),
)

# One fitted curve per group: rows differing in any of these (engine settings included) are never merged.
PROFILE_GROUP = ("engine", "engine_version", "gpu", "model", "precision", "tp", "config")

ROUTES = Schema(
    "routes",
    (
        Column("name", "str", True, "route name"),
        Column("model", "slug", True, "model slug the route serves"),
        Column("traffic", "enum", True, "online (requests arrive, SLOs apply) or batch (a job with a deadline)",
               choices=("online", "batch")),
        Column("rate_rps", "float", False, "online: mean request rate, requests/s", positive=True,
               maximum=MAX_RATE_RPS),
        Column("peak_to_mean", "float", False, "online: peak rate over mean rate (diurnal)", minimum=1, default=1.0,
               maximum=MAX_PEAK_TO_MEAN),
        Column("arrival_cv", "float", False, "online: coefficient of variation of inter-arrival times "
               "(1 = Poisson, >1 = bursty)", minimum=0, default=1.0, maximum=MAX_ARRIVAL_CV),
        Column("num_requests", "int", False, "batch: requests in one job", minimum=1,
               maximum=MAX_BATCH_REQUESTS),
        Column("jobs_per_month", "float", False, "batch: how often the job runs", minimum=0, default=30.0),
        Column("deadline_hours", "float", False, "batch: the job must finish within this many hours",
               positive=True),
        Column("input_len_mean", "float", True, "mean prompt tokens", positive=True, maximum=MAX_TOKENS),
        Column("input_len_p50", "float", False, "median prompt tokens", positive=True, maximum=MAX_TOKENS),
        Column("input_len_p95", "float", False, "p95 prompt tokens", positive=True, maximum=MAX_TOKENS),
        Column("input_len_p99", "float", False, "p99 prompt tokens", positive=True, maximum=MAX_TOKENS),
        Column("output_len_mean", "float", True, "mean output tokens", positive=True, maximum=MAX_TOKENS),
        Column("output_len_p50", "float", False, "median output tokens", positive=True, maximum=MAX_TOKENS),
        Column("output_len_p95", "float", False, "p95 output tokens", positive=True, maximum=MAX_TOKENS),
        Column("output_len_p99", "float", False, "p99 output tokens", positive=True, maximum=MAX_TOKENS),
        Column("slo_percentile", "float", False, "percentile the latency SLOs apply to (95 or 99)",
               choices=(), minimum=50, default=95.0),
        Column("ttft_slo_ms", "float", False, "online: time-to-first-token target, ms", positive=True),
        Column("tpot_slo_ms", "float", False, "online: time-per-output-token target, ms", positive=True),
        Column("e2e_slo_ms", "float", False, "online: end-to-end latency target, ms", positive=True),
        Column("slo_window_s", "float", False, "online: the SLO must hold in every window of this many seconds "
               "(fleetfacts.slo; 0 = over the whole run)", minimum=0, default=60.0),
        Column("model_updates_per_month", "float", False, "new checkpoints deployed per month", minimum=0,
               default=0.0),
        Column("engines", "str", False, "allowed engines, ';'-separated (empty = all)"),
        Column("gpus", "str", False, "allowed GPUs, ';'-separated (empty = all)"),
        Column("precisions", "str", False, "allowed precisions, ';'-separated (empty = all)"),
        Column("tps", "str", False, "allowed tensor-parallel sizes, ';'-separated (empty = all)"),
        Column("configs", "str", False, "allowed engine settings (a profile's `config`: `default` or a name such "
               "as `tuned`), ';'-separated (empty = all)"),
        Column("diurnal", "str", False, "online: 24 rate multipliers by UTC hour 0-23, ';'-separated (any scale: "
               "the busiest hour runs at rate_rps x peak_to_mean); `planner fleet --autoscale` follows them "
               "(blank: the route's log when it spans a day, else flat)"),
        Column("prefix_hit_rate", "float", False, "online: share of prompt tokens production serves from the "
               "engine's prefix cache (shared system prompts, multi-turn); `measure verify` flags a run whose "
               "server reports more, since it measured less prefill than production does", minimum=0, maximum=1,
               default=0.0),
        Column("shared_prefix_tokens", "int", False, "a route without a log: prompt tokens every request starts "
               "with (a system prompt), at most the shortest prompt length given (input_len_*); blank = none. "
               "The plan gives every request's first floor(shared / 512) blocks the same ids and simulates each replica's "
               "prefix cache on them (plan column prefix_hit_rate_pred)", minimum=0,
               maximum=MAX_TOKENS),
        Column("log", "str", False, "online: request log replayed by the simulation check (path relative to "
               "the routes file; empty = synthetic arrivals from rate_rps, peak_to_mean and arrival_cv); a log of "
               "several routes replays only the rows whose route is the route's name (ignoring case when one "
               "matches so) and is refused when none does"),
        Column("notes", "str", False, "where the route's numbers come from"),
    ),
)

PRICES = Schema(
    "prices",
    (
        Column("gpu", "slug", True, "GPU type slug"),
        Column("provider", "slug", True, "cloud or vendor, e.g. lambda, aws, runpod"),
        Column("pricing_type", "enum", True, "on-demand, reserved or spot",
               choices=("on-demand", "reserved", "spot")),
        Column("usd_per_gpu_hour", "float", True, "price of one GPU for one hour, USD", positive=True),
        Column("source", "str", True, "URL of the price page or its transcription"),
        Column("date", "str", True, "date the price was read"),
        Column("notes", "str", False, "instance type, region, how derived"),
    ),
)

ENGINE_OPS = Schema(
    "engine_ops",
    (
        Column("engine", "slug", True, "engine slug"),
        Column("versions", "str", False, "PEP 440 version specifier the row applies to, e.g. '<1.0' "
               "(empty = every version)"),
        Column("flow", "str", True, "what a model update involves on this engine"),
        Column("engineer_hours_per_update", "float", True, "engineer hours per model update", minimum=0),
        Column("build_gpu_hours_per_update", "float", True, "GPU-hours spent building/compiling per update",
               minimum=0),
        Column("cold_start_min", "float", False, "minutes from start to serving", minimum=0),
        Column("adoption_hours", "float", False, "one-time engineer hours to adopt the engine", minimum=0,
               default=0.0),
        Column("source", "str", True, "where the figures come from, or 'assumption: ...'"),
        Column("notes", "str", False, ""),
    ),
)

PLAN = Schema(
    "plan",
    (
        Column("route", "str", True, "route name"),
        Column("status", "enum", True, "ok, or infeasible with the reason in `notes`",
               choices=("ok", "infeasible")),
        Column("traffic", "enum", False, "online or batch", choices=("online", "batch")),
        Column("model", "slug", False, "model slug of the route (what a deployment serves)"),
        Column("engine", "slug", False, "recommended engine"),
        Column("engine_version", "str", False, ""),
        Column("engine_config", "slug", False, "engine settings the recommendation assumes: the profile's config "
               "(default = the engine's defaults; another name, e.g. tuned, is described in that profile's env.json)"),
        Column("gpu", "slug", False, ""),
        Column("precision", "slug", False, ""),
        Column("tp", "int", False, "GPUs per replica", minimum=1),
        Column("replicas", "int", False, "replicas (the fleet simulation where checked, else the one-replica screen)", minimum=0,
               maximum=MAX_REPLICAS),
        Column("gpus", "int", False, "replicas x tp", minimum=0),
        Column("gpus_low", "int", False, "GPUs if a replica delivers the high end of its throughput interval "
               "(interval at least the group's leave-one-out error)", minimum=0),
        Column("gpus_high", "int", False, "GPUs if a replica delivers only the low end of its throughput interval",
               minimum=0),
        Column("in_flight_p99", "float", False, "online: requests in flight per replica at the planned "
               "load, 99th percentile (the engine's batch cap must hold it); batch: the batch size", minimum=0),
        Column("replica_output_tok_per_s", "float", False, "predicted output tokens/s per replica", minimum=0),
        Column("replica_output_tok_per_s_low", "float", False, "lower end of its interval", minimum=0),
        Column("replica_output_tok_per_s_high", "float", False, "upper end of its interval", minimum=0),
        Column("ttft_pred_ms", "float", False, "online: predicted TTFT at the SLO percentile, ms, for one replica "
               "carrying its share of the peak rate (what `measure verify` measures); batch: one request's",
               minimum=0),
        Column("ttft_pred_ms_low", "float", False, "low end of its 90% interval", minimum=0),
        Column("ttft_pred_ms_high", "float", False, "high end of its 90% interval", minimum=0),
        Column("tpot_pred_ms", "float", False, "predicted TPOT at the SLO percentile (online, at the planned load)",
               minimum=0),
        Column("tpot_pred_ms_low", "float", False, "low end of its 90% interval", minimum=0),
        Column("tpot_pred_ms_high", "float", False, "high end of its 90% interval", minimum=0),
        Column("e2e_pred_ms", "float", False, "predicted end-to-end latency at the SLO percentile, ms", minimum=0),
        Column("e2e_pred_ms_low", "float", False, "low end of its 90% interval", minimum=0),
        Column("e2e_pred_ms_high", "float", False, "high end of its 90% interval", minimum=0),
        Column("latency_tier", "str", False, "what produced the latency columns: simulated (open-loop arrivals at "
               "the route's arrival CV and lengths), replayed log (the route's log at each replica's share), "
               "analytic (batch: the offline batch's means)"),
        Column("utilisation", "float", False, "offered load over fleet capacity", minimum=0),
        Column("gpu_usd_per_month", "float", False, "", minimum=0),
        Column("eng_usd_per_month", "float", False, "engineering cost of model updates (+ amortised adoption)",
               minimum=0),
        Column("total_usd_per_month", "float", False, "", minimum=0),
        Column("total_usd_per_month_low", "float", False, "total at gpus_low (batch per-use: at the faster job)",
               minimum=0),
        Column("total_usd_per_month_high", "float", False, "total at gpus_high (batch per-use: at the slower job)",
               minimum=0),
        Column("usd_per_1m_output_tok", "float", False, "", minimum=0),
        Column("runner_up", "str", False, "engine/version/gpu/precision/tp[/config] of the second-cheapest option"),
        Column("runner_up_total_usd_per_month", "float", False, "", minimum=0),
        Column("savings_usd_per_month", "float", False, "runner-up total minus this total"),
        Column("breakeven_updates_per_month", "float", False, "model updates/month at which the runner-up "
               "would cost the same (empty: never, or not meaningful: see breakeven_note)"),
        Column("breakeven_note", "str", False, "why break-even is empty (never crosses, or the two options run "
               "the same engine and differ only in prices)"),
        Column("sim_attainment", "float", False, "share of simulated requests meeting every SLO", minimum=0),
        Column("sim_replicas", "int", False, "replicas the simulation check settled on", minimum=0),
        Column("ttft_worst_window_ms", "float", False, "online: TTFT at the SLO percentile in the worst SLO window "
               "of the planned fleet's simulation (fleetfacts.slo)", minimum=0),
        Column("tpot_worst_window_ms", "float", False, "online: TPOT at the SLO percentile in the worst SLO window",
               minimum=0),
        Column("windows", "int", False, "online: SLO windows judged (slo_window_s long; small ones pooled)",
               minimum=0),
        Column("windows_in_breach", "int", False, "online: windows whose TTFT or TPOT percentile misses the SLO",
               minimum=0),
        Column("busiest_window_start_s", "float", False, "online: start of the window with the most arrivals, s from "
               "the first arrival of the replayed load", minimum=0),
        Column("slo_attainment", "float", False, "online: share of requests within every SLO target at the planned "
               "load (the same simulation)", minimum=0),
        Column("whole_log_replicas", "int", False, "online: replicas sized on the whole run's percentile instead "
               "of every window (as other planners size), on the same simulation", minimum=0),
        Column("whole_log_usd_per_month", "float", False, "online: $/month of that whole-log fleet", minimum=0),
        Column("whole_log_windows_in_breach", "int", False, "online: SLO windows the whole-log fleet breaks",
               minimum=0),
        Column("autoscaled_floor", "int", False, "online: always-on replicas of the autoscaled option (scaling up "
               "to `replicas` on the arrival rate, plan.assumptions.json scale_up_s); equal to `replicas` when "
               "autoscaling cannot beat steady (planner.sizing.autoscaled; the notes say why)", minimum=1),
        Column("autoscaled_usd_per_month", "float", False, "online: $/month of the autoscaled option (GPU-hours "
               "billed on the route's load, plus the same engineering)", minimum=0),
        Column("autoscaled_windows_in_breach", "int", False, "online: SLO windows the autoscaled fleet breaks",
               minimum=0),
        Column("load_bursts", "str", False, "online: the planned load's bursts: peak 10 s / 60 s / 300 s arrival "
               "rate over its mean and the index of dispersion at 60 s (planner.traffic.logs.burst_descriptors)"),
        Column("resampled_hours", "int", False, "online: hours drawn at random from the load's SLO windows "
               "(planner.sizing.resampled)", minimum=0),
        Column("holds_in_resampled_hours", "int", False, "online: of those hours, how many the recommended fleet "
               "holds in every SLO window", minimum=0),
        Column("router", "enum", False, "online: the load balancer the fleet was sized behind (the assumptions' "
               "`router`, or prefix-affinity where the route has prefix structure and that fleet is cheaper; "
               "`deploy` writes it)", choices=("least-outstanding", "round-robin", "prefix-affinity")),
        Column("prefix_hit_rate_pred", "float", False, "online, a route with prefix structure (its log's hash_ids or "
               "session_id, or shared_prefix_tokens): share of prompt tokens the planned fleet's replicas find in "
               "their prefix caches, as the fleet simulation predicts it (blank: no prefix structure, prompts "
               "sized cold)", minimum=0, maximum=1),
        Column("host_kv_gib", "float", False, "online: GiB of host memory per replica the fleet was sized with as a "
               "KV tier behind its prefix cache (the assumptions' `host_kv_gib`, measured once on an H100; kept "
               "only where that fleet is cheaper; `deploy` writes vLLM's --kv-offloading-size); 0: none",
               minimum=0),
        Column("ttft_idle_infeasible", "int", False, "online: requests of the planned load whose prompt alone, "
               "on an idle replica of the recommended curve, takes longer than the TTFT target (no replica count "
               "helps: they are judged on every target but TTFT; planner.latency.idle); 0: none, blank: not "
               "judged per window or no TTFT target", minimum=0),
        Column("ttft_idle_infeasible_share", "float", False, "online: those requests over all the planned load's",
               minimum=0, maximum=1),
        Column("ttft_idle_infeasible_longest_prompt", "int", False, "online: the longest prompt among them, tokens "
               "(blank: none)", minimum=1),
        Column("max_model_len", "int", False, "context a replica must hold: the route's p99 prompt + p99 output "
               "tokens (p95, p50 or mean where a longer tail is not given)", minimum=1),
        Column("profile", "str", False, "profile files the recommended curve was fitted to, ';'-separated "
               "(relative to the project root when bundled); their env.json holds the engine settings"),
        Column("provenance", "str", False, "measured / published / predicted / extrapolated / transferred"),
        Column("latency_basis", "str", False, "what TTFT/TPOT rest on: measured (the option's own latency rows), "
               "transferred (a measured server front end of the same engine), unverified (no latency measurement)"),
        Column("price_source", "str", False, "provider, pricing type and source of the GPU price"),
        Column("notes", "str", False, ""),
    ),
    renamed=(("operating_concurrency", "in_flight_p99"),),  # issue 36: it is the 99th percentile
)

FLEET = Schema(
    "fleet",
    (
        Column("deployment", "str", True, "deployment name (d1, d2, ...)"),
        Column("kind", "enum", True, "shared (chosen by the fleet program, serving several routes), one route "
               "(chosen by the fleet program, serving one route or its length buckets), route-by-route (a route "
               "kept on its own planned option) or batch (a batch job's option)",
               choices=("shared", "one route", "route-by-route", "batch")),
        Column("model", "slug", True, "model slug the deployment serves"),
        Column("engine", "slug", True, ""),
        Column("engine_version", "str", True, ""),
        Column("engine_config", "slug", False, "engine settings label of the profile", default=DEFAULT_CONFIG),
        Column("gpu", "slug", True, ""),
        Column("precision", "slug", True, ""),
        Column("tp", "int", True, "GPUs per replica", minimum=1),
        Column("slo", "str", False, "the SLO the deployment holds for every request it serves (the strictest "
               "of its routes)"),
        Column("routes", "str", True, "routes served, ';'-separated: name[length bucket] and the share of the "
               "route's requests"),
        Column("replicas_min", "int", True, "fewest replicas over the day", minimum=0),
        Column("replicas_max", "int", True, "most replicas over the day", minimum=0),
        Column("replicas_by_hour", "str", False, "replicas in UTC hours 0-23, ';'-separated (autoscaling; blank "
               "= always on)"),
        Column("reserved_replicas", "int", False, "replicas on reserved pricing (the rest on-demand)", minimum=0),
        Column("gpus_max", "int", True, "replicas_max x tp", minimum=0),
        Column("gpus_low", "int", False, "GPUs at the busiest hour if each replica delivers the high end of its "
               "throughput interval (the plan's option rows of the same option for the routes it serves)",
               minimum=0),
        Column("gpus_high", "int", False, "GPUs at the busiest hour if each replica delivers only the low end of its "
               "throughput interval: the range the recommendation carries", minimum=0),
        Column("pricing", "str", False, "pricing type(s), provider and source of the GPU price(s)"),
        Column("gpu_usd_per_month", "float", True, "GPU cost, USD per month (cold starts included)", minimum=0),
        Column("sim_attainment", "float", False, "lowest share of a served route's simulated requests meeting "
               "its SLOs (batch: the job finished by its deadline)", minimum=0),
        Column("prefix_hit_rate_pred", "float", False, "routes with prefix structure (a log's hash_ids or "
               "session_id, or shared_prefix_tokens): prompt tokens found in the replicas' prefix caches over their "
               "prompt tokens, simulated at the busiest hour (a kept option: its plan row's); blank without",
               minimum=0),
        Column("router", "enum", False, "online: the load balancer the deployment's replicas were checked behind "
               "(the assumptions' `router`, or the other router where its streams carry prefix structure and the "
               "busiest hour needs fewer replicas behind it; a kept option: its plan row's); blank for batch",
               choices=("least-outstanding", "round-robin", "prefix-affinity")),
        Column("host_kv_gib", "float", False, "online: host-memory KV tier per replica the deployment was checked "
               "with (the assumptions' `host_kv_gib`, measured once on an H100; kept where the busiest hour needs "
               "fewer replicas with it; a kept option: its plan row's); 0: none", minimum=0),
        Column("notes", "str", False, ""),
    ),
)

SCHEMAS = {s.name: s for s in (PROFILE, ROUTES, PRICES, ENGINE_OPS, PLAN, FLEET)}


def slug(value: object) -> str:
    """Normalise an identifier the way the CLIs accept it: case-insensitively."""
    return str(value).strip().lower()


def _is_blank(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == ""


def _convert(value: object, col: Column) -> object:
    """Convert one raw cell; raise ValueError with what was expected."""
    if col.kind == "str":
        return str(value)
    if col.kind in ("slug", "enum"):
        text = slug(value)
        if col.kind == "slug" and not SLUG_RE.match(text):
            raise ValueError(f"expected a lowercase identifier (letters, digits, '.', '_', '-'), got {value!r}")
        if col.kind == "enum" and text not in col.choices:
            raise ValueError(f"expected one of {', '.join(col.choices)}, got {value!r}")
        return text
    number = _to_number(value, col)
    if col.minimum is not None and number < col.minimum:
        raise ValueError(f"expected a value >= {col.minimum:g}, got {value!r}")
    if col.positive and number <= 0:
        raise ValueError(f"expected a value > 0, got {value!r}")
    if col.maximum is not None and number > col.maximum:
        raise ValueError(f"expected a value <= {col.maximum:g} (the planner's input bound), got {value!r}")
    return number


def _to_number(value: object, col: Column) -> float | int:
    try:
        number = float(str(value).strip())
    except ValueError:
        raise ValueError(f"expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"expected a finite number, got {value!r}")
    if col.kind == "int":
        if number != int(number):
            raise ValueError(f"expected a whole number, got {value!r}")
        return int(number)
    return number


def validate_frame(frame: pd.DataFrame, schema: Schema, where: str = "<table>") -> pd.DataFrame:
    """Check and convert a raw (all-string) frame against `schema`.

    Returns a frame with exactly the schema's columns, in order, typed; optional
    columns that are absent are filled with their default (or NaN / "").
    Raises InputError naming `where`, the CSV line and the column.
    """
    frame = frame.rename(columns=lambda c: str(c).strip())
    frame = frame.rename(columns={old: new for old, new in schema.renamed
                                  if old in frame.columns and new not in frame.columns})
    unknown = [c for c in frame.columns if c not in schema.names]
    if unknown:
        raise InputError(f"{where}: unknown column(s) {', '.join(map(repr, unknown))} for a {schema.name} file; "
                         f"expected columns: {', '.join(schema.names)}")
    missing = [c.name for c in schema.columns if c.required and c.name not in frame.columns]
    if missing:
        raise InputError(f"{where}: missing required column(s) {', '.join(missing)} for a {schema.name} file")
    out = {}
    lines = row_lines(frame)
    for col in schema.columns:
        raw = frame[col.name].tolist() if col.name in frame.columns else [None] * len(frame)
        out[col.name] = [_cell(v, col, where, line) for line, v in zip(lines, raw, strict=True)]
    result = pd.DataFrame(out, columns=schema.names, index=range(len(frame)))
    for col in schema.columns:
        if col.kind in ("int", "float"):
            result[col.name] = pd.to_numeric(result[col.name], errors="coerce").astype(
                "Int64" if col.kind == "int" else "float64")
    # Set last: pandas deep-copies a frame's attrs into every column it hands out (half of a profile's load).
    result.attrs["lines"] = lines
    return result


def _cell(value: object, col: Column, where: str, line: int) -> object:
    try:
        return typed_cell(value, col)
    except ValueError as err:
        raise InputError(f"{where}, line {line}, column {col.name!r}: {err}") from None


def typed_cell(value: object, col: Column) -> object:
    """One cell as its column types it: text as str (slugs and enums lower-cased), numbers as int or float
    within their bounds; a blank cell as the column's default, else '' (text) or NaN (numbers).
    Raises ValueError saying what was expected (the caller names the file, line and column)."""
    if _is_blank(value):
        if col.required:
            raise ValueError(f"a value is required ({col.doc})")
        if col.default is not None:
            return col.default
        return "" if col.kind in ("str", "slug", "enum") else math.nan
    return _convert(value, col)


def read_csv_text(path: Path) -> pd.DataFrame:
    """Read a CSV as strings, skipping leading '#' comment lines (plan assumptions).

    The index (named "line") holds each row's physical line in the file, so
    errors name the line an editor shows (comment lines, blank lines and
    quoted newlines counted).
    """
    try:
        skip = _leading_comment_lines(path)
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=True, skiprows=skip)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: the file is empty (expected a CSV with a header row)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"{path}: not a readable CSV file ({first})") from None
    lines = record_lines(path, skip, encoding="utf-8")
    if len(lines) == len(frame):
        frame.index = pd.Index(lines, name="line")
    return frame


def record_lines(path: str | Path, skip: int = 0, encoding: str = "utf-8-sig") -> list[int]:
    """Physical (1-based) first line of each non-blank record after the header, `skip` lines in.

    Counts quoted newlines and blank lines as an editor does; [] when the file cannot be read as CSV.
    """
    try:
        with open(path, encoding=encoding, newline="") as handle:
            return _record_lines(handle, skip)
    except (OSError, UnicodeDecodeError, csv.Error):
        return []


def text_record_lines(text: str, skip: int = 0) -> list[int]:
    """record_lines of CSV text already in memory (an upload)."""
    try:
        return _record_lines(io.StringIO(text, newline=""), skip)
    except csv.Error:
        return []


def _record_lines(handle: TextIO, skip: int) -> list[int]:
    out = []
    for _ in range(skip):
        handle.readline()
    reader = csv.reader(handle)
    end, header = skip, False
    for record in reader:
        start, end = end + 1, skip + reader.line_num
        if not any(cell.strip() for cell in record):
            continue
        if header:
            out.append(start)
        header = True
    return out


def row_lines(frame: pd.DataFrame) -> list[int]:
    """The file line of each row: the "line" index of read_csv_text, else row + 2 (line 1 is the header)."""
    if frame.index.name == "line":
        return [int(x) for x in frame.index]
    kept = frame.attrs.get("lines")
    if isinstance(kept, list) and len(kept) == len(frame):
        return list(kept)
    return [i + 2 for i in range(len(frame))]


def _leading_comment_lines(path: Path) -> int:
    count = 0
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.startswith("#"):
                    break
                count += 1
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a CSV file") from None
    return count


def load_table(path: str | Path, schema: Schema) -> pd.DataFrame:
    """Load and validate one CSV file; raises InputError on any problem."""
    path = Path(path)
    return validate_frame(read_csv_text(path), schema, str(path))


def load_tables(paths: Iterable[str | Path], schema: Schema) -> pd.DataFrame:
    """Load several files of one schema and concatenate them (with a `file` column)."""
    frames = []
    for p in paths:
        frame = load_table(p, schema)
        frame["file"] = str(p)
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=[*schema.names, "file"])
    return pd.concat(frames, ignore_index=True)


def split_list(cell: object) -> list[str]:
    """Split a ';'-separated allow-list cell into lowercase items ([] = no restriction)."""
    if _is_blank(cell):
        return []
    return [slug(item) for item in str(cell).split(";") if item.strip()]


def escape_formula(value: object) -> object:
    """Make a text cell safe to open in a spreadsheet (OWASP CSV injection).

    Text starting with a formula character gets a leading apostrophe; numbers are
    left alone so they read back unchanged.  `unescape_formula` reverses it.
    """
    if isinstance(value, str) and _needs_escape(value):
        return "'" + value
    return value


def _needs_escape(text: str) -> bool:
    # Text that already starts with the escape apostrophe is escaped too, so unescaping is exact.
    return (text.startswith(FORMULA_PREFIXES) and not _looks_numeric(text)) or _escaped(text)


def _escaped(text: str) -> bool:
    return text.startswith("'") and (text[1:2] == "'" or _needs_escape(text[1:]) if len(text) > 1 else False)


# Terminal control characters (C0 but newline and tab, DEL, C1 such as the 8-bit CSI) and bidirectional
# overrides: printed as visible escapes so a user string cannot move the cursor, recolour or retitle
# the terminal, hide text, or reorder what is shown.
_TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(value: object) -> str:
    """`value` as text with every terminal control character shown as an escape (e.g. ESC -> '\\x1b')."""
    return _TERMINAL_UNSAFE.sub(lambda m: ascii(m.group())[1:-1], str(value))


# What a route name may not carry raw into any output (CSV, workbook, deployment files, console): C0 controls
# (tab, line feed and carriage return included: a CSV row must stay one line), DEL, C1, the Unicode line and
# paragraph separators and the bidirectional overrides and isolates (they reorder what is shown).
_NAME_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """`text` with every control character as a visible escape (ESC -> '\\x1b', U+2028 -> '\\u2028') and, in
    such a text, every backslash doubled so the escape reads back unambiguously; other text is unchanged
    (so escaping twice is escaping once).  Route names pass through it when routes are loaded."""
    if not _NAME_UNSAFE.search(text):
        return text
    return _NAME_UNSAFE.sub(_escape, text.replace("\\", "\\\\"))


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def csv_cell(value: object) -> object:
    """A cell as written to every CSV: text with its control characters escaped (`escape_controls`, so a row
    stays one line) and formula-escaped (`escape_formula`); other values unchanged."""
    return escape_formula(escape_controls(value)) if isinstance(value, str) else value


def unescape_formula(value: object) -> object:
    if isinstance(value, str) and _escaped(value):
        return value[1:]
    return value


# A number a spreadsheet reads as a number (not "-inf", "+nan" or Python's "1_000", which it reads as formulas).
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _looks_numeric(text: str) -> bool:
    return _PLAIN_NUMBER.fullmatch(text) is not None


def write_table(frame: pd.DataFrame, path: str | Path, schema: Schema, comments: Sequence[str] = ()) -> None:
    """Write `frame` in `schema`'s column order, formula-safe, with optional '#' header lines (atomic)."""
    write_csv(frame.reindex(columns=schema.names), path, comments)


def write_csv(frame: pd.DataFrame, path: str | Path, comments: Sequence[str] = ()) -> None:
    """Write any frame as a formula-safe CSV of one line per row (`csv_cell`), atomically (a temp file in the
    same folder, renamed)."""
    atomic_write_bytes(path, csv_bytes(frame, comments))


def csv_bytes(frame: pd.DataFrame, comments: Sequence[str] = ()) -> bytes:
    """The bytes write_csv writes: optional '# ' comment lines, then the frame, formula-safe (`csv_cell`)."""
    safe = frame.map(csv_cell)
    text = "".join(f"# {line}\n" for line in comments) + safe.to_csv(index=False, lineterminator="\n")
    return text.encode("utf-8")


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` via a temp file in the same folder and os.replace: a kill or a full disk
    leaves the old file (or none), never a partial one.  Raises InputError naming `path` when it cannot be
    written (its folder missing or unwritable, the disk full)."""
    atomic_write_all([(path, data)])


def atomic_write_all(files: Sequence[tuple[str | Path, bytes]]) -> None:
    """Write several files that belong together: every one to a temp file beside its target first, then all
    renamed (in the order given).  A file that cannot be written (a missing or unwritable folder, /proc, a full
    disk) raises InputError naming its path as given, and no target is replaced; temp files are removed."""
    staged: list[tuple[Path, str]] = []
    try:
        for path, data in files:
            staged.append(_write_temp(path, data))
        for index, (target, temp) in enumerate(staged):
            _replace(target, temp, [str(t) for t, _ in staged[:index]])
    finally:
        for _, temp in staged:
            Path(temp).unlink(missing_ok=True)


def _write_temp(path: str | Path, data: bytes) -> tuple[Path, str]:
    """(target, temp file holding `data` beside it, with the target's mode or the umask's); InputError naming
    `path` when the temp file cannot be made or written."""
    target = Path(os.path.realpath(path)) if Path(path).is_symlink() else Path(path)  # write through a link
    if target.is_dir():
        raise InputError(f"{path}: is a directory, expected a file name to write")
    if not target.parent.exists():
        raise InputError(f"{path}: folder {target.parent} does not exist")
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o666 & ~_umask()
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as err:
        raise InputError(f"{path}: cannot write a file in {target.parent} ({err.strerror}); no output was "
                         "replaced") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)  # mkstemp makes 0600: keep the old file's mode, or the umask's
            os.fsync(handle.fileno())
    except OSError as err:
        Path(temp).unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write ({err.strerror}); no output was replaced") from None
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target, temp


def _replace(target: Path, temp: str, replaced: list[str]) -> None:
    """Rename `temp` over `target`; InputError naming the target and the files already replaced on failure."""
    try:
        os.replace(temp, target)
    except OSError as err:
        done = f"already replaced: {', '.join(replaced)}" if replaced else "no output was replaced"
        raise InputError(f"{target}: cannot replace ({err.strerror}); {done}") from None


def _umask() -> int:
    """The process umask, read without changing it where Linux shows it (/proc), else set and restored."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def load_plan_rows(path: str | Path) -> pd.DataFrame:
    """The rows of a plan file (schema PLAN), text cells unescaped; leading '#' lines are skipped.

    Works for a plan with its assumptions in its first line ('# fleetplan-assumptions: {...}') and
    for a plain CSV whose assumptions sit in a JSON file beside it (they are not read here).
    Raises InputError naming the file, the line and the column.
    """
    frame = load_table(path, PLAN)
    for column in PLAN.columns:
        if column.kind == "str":
            frame[column.name] = frame[column.name].map(unescape_formula)
    return frame


def schema_markdown(schema: Schema) -> str:
    """The schema as a Markdown table (for the README's format reference)."""
    rows = ["| column | type | required | meaning |", "|---|---|---|---|"]
    for c in schema.columns:
        kind = f"one of {'/'.join(c.choices)}" if c.kind == "enum" else c.kind
        rows.append(f"| `{c.name}` | {kind} | {'yes' if c.required else ''} | {c.doc} |")
    return "\n".join(rows)
