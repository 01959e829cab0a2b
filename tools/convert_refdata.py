"""Convert the shared reference data into Fleetplan's bundled files.

A developer runs this by hand when the shared reference material changes:

    python tools/convert_refdata.py --shared ../shared

It reads `<shared>/refdata/*.csv` and `<shared>/traces/`, and writes
profiles/published/*.csv (PROFILE schema), planner/data/prices.csv (PRICES),
examples/routes.csv (ROUTES) and examples/traces/ (with the trace's attribution).
Every written frame is validated against fleetfacts.schema before it is written.
The planner and the tests never read `../shared`; they read only what this
script wrote into the repository.  fleetfacts/data/gpu_specs.csv,
fleetfacts/data/model_specs.csv and planner/data/engine_ops.csv are maintained by hand (see docs/data.md).
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from fleetfacts.errors import InputError  # noqa: E402
from fleetfacts.schema import PRICES, PROFILE, ROUTES, validate_frame, write_table  # noqa: E402

log = logging.getLogger(__name__)

# The date the shared reference copies were read into this project; used where a
# document's own publication date was not recorded (said so in each row's notes).
REFDATA_READ_DATE = "2026-12-02"

GPU_SLUGS = {
    "H100": "h100", "H200": "h200", "GH200": "gh200", "A100": "a100", "L40S": "l40s", "B200": "b200",
    "GB200": "gb200", "B300": "b300", "GB300": "gb300", "RTX PRO 6000 Blackwell SE": "rtx-pro-6000",
}
MODEL_SLUGS = {
    "Llama-3.1-8B": "llama-3.1-8b", "Llama-3.1-70B": "llama-3.1-70b", "Llama-3.3-70B": "llama-3.3-70b",
    "Llama-3.1-405B": "llama-3.1-405b", "Mixtral-8x7B": "mixtral-8x7b", "Mixtral-8x22B": "mixtral-8x22b",
    "Mistral-7B": "mistral-7b", "Qwen3-30B-A3B": "qwen3-30b-a3b", "Qwen3-235B-A22B": "qwen3-235b-a22b",
    "GPT-OSS-20B": "gpt-oss-20b", "GPT-OSS-120B": "gpt-oss-120b", "Llama-4-Scout-17B-16E": "llama-4-scout",
    "Llama-4-Maverick-17B-128E": "llama-4-maverick", "DeepSeek-R1-0528": "deepseek-r1-0528",
    "LLaMA-3.1-8B": "llama-3.1-8b", "LLaMA-3.1-70B": "llama-3.1-70b",
    "Llama-3.3-70B-Instruct": "llama-3.3-70b", "DeepSeek-R1": "deepseek-r1",
}

# (prefix of the doc_version label, clean PEP 440 engine_version).  Revisions that
# are not releases get a local version label naming the branch/commit, so they
# stay distinct groups and still sort next to the release they follow.
DOC_VERSIONS = (
    ("1.2.0", "1.2.0"),
    ("main@585c756", "1.0+main.585c756"),
    ("v1.0", "1.0"),
    ("v0.21", "0.21"),
    ("v0.20-cycle", "0.20+main"),
    ("0.20.0 (published", "0.20.0"),
    ("0.20.0 (value as quoted", "0.20.0"),
    ("0.19.0", "0.19.0"),
    ("v0.17", "0.17"),
)

# num_requests per (ISL, OSL) as the perf-overview docs state them (refdata/README.md).
NUM_REQUESTS_V019_TO_V10 = {
    (128, 128): 30000, (128, 2048): 3000, (2048, 128): 3000, (1000, 1000): 3000, (500, 2000): 3000,
    (128, 4096): 1500, (1000, 2000): 1500, (2048, 2048): 1500, (5000, 500): 1500, (20000, 2000): 1000,
}
NUM_REQUESTS_V12 = {(1024, 1024): 3000, (8192, 1024): 1500, (1024, 8192): 1500, (32768, 1024): 1000,
                    (1024, 32768): 1000}

# The v0.14 online-serving table: "generated using version 0.14.0, with 500 requests".
V014_NUM_REQUESTS = 500


@dataclass
class Conversion:
    """Rows converted from one refdata file, and what was skipped with the reason."""

    rows: list[dict] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + count

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


def engine_version_for(doc_version: str) -> str:
    """Clean PEP 440 version for a perf-overview doc revision label; raises KeyError if unknown."""
    for prefix, version in DOC_VERSIONS:
        if doc_version.startswith(prefix):
            return version
    raise KeyError(doc_version)


def num_requests_for(engine_version: str, isl: int, osl: int) -> int | None:
    """The doc's num_requests for this ISL/OSL and revision, None when the doc does not state it.

    1.2.0 and main@585c756 state the 1024-based table (read in both docs); v0.19 to v1.0 state the
    older table; v0.17 states none.
    """
    if engine_version == "0.17":
        return None
    table = NUM_REQUESTS_V12 if engine_version in ("1.2.0", "1.0+main.585c756") else NUM_REQUESTS_V019_TO_V10
    return table.get((isl, osl))


def _fmt(x: float) -> str:
    return f"{x:.10g}"


# ---------------------------------------------------------------- TRT-LLM perf overview
def convert_perf_overview(raw: pd.DataFrame) -> Conversion:
    """Offline max-throughput points of the TensorRT-LLM perf-overview tables (whole-replica tok/s)."""
    conv = Conversion()
    for _, r in raw.iterrows():
        if pd.isna(r.tp) or str(r.tp).strip() == "":
            conv.skip("attention-DP + expert-parallel (DEPn) mapping: no tensor-parallel size; "
                      "the planner's group key (tp) cannot represent it")
            continue
        conv.rows.append(_perf_row(r))
    return conv


def _perf_row(r: pd.Series) -> dict:
    version = engine_version_for(r.doc_version)
    isl, osl, tp, pp, gpus = int(r.isl), int(r.osl), int(r.tp), int(r.pp), int(r.num_gpus)
    output, how = _whole_replica_output(r, gpus)
    n = num_requests_for(version, isl, osl)
    total = output * (isl + osl) / osl
    notes = [
        how,
        f"total_tok_per_s derived exactly as output x (ISL+OSL)/OSL = output x {isl + osl}/{osl} "
        "(fixed-length synthetic requests)",
        f"backend: {r.backend_flow}",
        f"doc label: {r.doc_version}",
        f"parallel mapping {r.parallel_mapping} ({gpus} GPUs per replica)",
        f"batch_size = num_requests = {n} as the doc states for {isl}/{osl}" if n else
        f"num_requests for {isl}/{osl} not stated by this doc revision: batch_size left blank",
        f"date: refdata read date ({REFDATA_READ_DATE}); the doc's own date was not recorded",
        f"source notes: {r.notes}",
    ]
    return {
        "gpu": GPU_SLUGS[r.gpu], "engine": "trtllm", "engine_version": version, "model": MODEL_SLUGS[r.model],
        "precision": str(r.precision).lower(), "tp": tp, "pp": pp, "mode": "offline",
        "input_len": isl, "output_len": osl, "batch_size": n, "num_requests": n,
        "output_tok_per_s": _fmt(output), "total_tok_per_s": _fmt(total), "status": "ok",
        "provenance": "published", "source": f"{r.source_url} ({r.doc_version})", "date": REFDATA_READ_DATE,
        "notes": "; ".join(notes),
    }


def _whole_replica_output(r: pd.Series, gpus: int) -> tuple[float, str]:
    """Output tok/s of the whole tp x pp replica, and how it was obtained from the published figure."""
    per_gpu, total = r.output_tokens_per_s_per_gpu, r.output_tokens_per_s_total
    if pd.notna(per_gpu):
        return float(per_gpu) * gpus, f"published per GPU: {_fmt(float(per_gpu))} tok/s/GPU x {gpus} GPUs"
    if pd.notna(total):
        return float(total), "published as total for the TP group"
    raise ValueError(f"row without a throughput figure: {r.to_dict()}")


# ---------------------------------------------------------------- TRT-LLM v0.14 online serving
def convert_online_v014(raw: pd.DataFrame) -> Conversion:
    """QPS sweep of the v0.17 doc's online-serving table (Triton backend, TRT-LLM 0.14.0, BF16)."""
    conv = Conversion()
    for _, r in raw.iterrows():
        conv.rows.append(_online_row(r))
    return conv


def _online_row(r: pd.Series) -> dict:
    qps = float(r.qps)
    offline = math.isinf(qps)
    load = ("QPS 'inf' in the doc: all 500 requests submitted at once, so recorded as mode=offline "
            "with batch_size=500" if offline else f"request rate {_fmt(qps)} QPS; arrival process not stated")
    notes = [
        load,
        "values are for the whole TP group as published; req/s, TTFT and ITL are rounded integers in the doc",
        "ITL (mean) published; TPOT ~ ITL, kept in itl_mean_ms",
        "ISL/OSL as labelled in the doc (the excerpt does not say whether lengths are fixed or means)",
        f"doc label: {r.doc_version}",
        f"date: refdata read date ({REFDATA_READ_DATE}); the doc's own date was not recorded",
        f"source notes: {r.notes}",
    ]
    return {
        "gpu": GPU_SLUGS[r.gpu], "engine": "trtllm", "engine_version": "0.14.0", "model": MODEL_SLUGS[r.model],
        "precision": "bf16", "tp": int(r.tp), "pp": int(r.pp), "mode": "offline" if offline else "rate",
        "input_len": int(r.isl), "output_len": int(r.osl),
        "batch_size": V014_NUM_REQUESTS if offline else None, "request_rate": None if offline else qps,
        "num_requests": V014_NUM_REQUESTS,
        "output_tok_per_s": _fmt(float(r.output_throughput_tok_s)),
        "total_tok_per_s": _fmt(float(r.total_token_throughput_tok_s)),
        "req_per_s": _fmt(float(r.request_throughput_req_s)),
        "ttft_mean_ms": _fmt(float(r.mean_ttft_ms)), "itl_mean_ms": _fmt(float(r.mean_itl_ms)),
        "status": "ok", "provenance": "published",
        "source": f"{r.source_url} (v0.17 doc page; online serving data generated with TensorRT-LLM 0.14.0)",
        "date": REFDATA_READ_DATE, "notes": "; ".join(notes),
    }


# ---------------------------------------------------------------- NVIDIA NIM
def convert_nim(raw: pd.DataFrame) -> Conversion:
    """NIM 1.8.0 Llama-3.3-70B FP8 TP2 concurrency sweep (whole 2-GPU deployment)."""
    conv = Conversion()
    for _, r in raw.iterrows():
        if int(r.num_gpus) != int(r.tp):
            conv.skip("num_gpus differs from tp (more than one replica)")
            continue
        conv.rows.append({
            "gpu": "h100", "engine": "nim", "engine_version": "1.8.0", "model": MODEL_SLUGS[r.model],
            "precision": str(r.precision).lower(), "tp": int(r.tp), "pp": 1, "mode": "concurrency",
            "input_len": int(r.isl), "output_len": int(r.osl), "concurrency": int(r.concurrency),
            "output_tok_per_s": _fmt(float(r.throughput_tokens_per_s)),
            "ttft_mean_ms": _fmt(float(r.ttft_ms)), "itl_mean_ms": _fmt(float(r.itl_ms)),
            "status": "ok", "provenance": "published", "source": f"{r.source_url} ({r.doc_version})",
            "date": REFDATA_READ_DATE,
            "notes": "; ".join([
                "engine 'nim' = NVIDIA NIM container 1.8.0, which runs a TensorRT-LLM-based engine",
                "'Throughput (Tokens/s)' as published for the whole 2-GPU deployment (output tokens presumed)",
                "TTFT/ITL as published, taken as means (the excerpt does not name the statistic)",
                "GPU labelled 'H100 80G' (SXM assumed)",
                f"date: refdata read date ({REFDATA_READ_DATE}); the page's own date was not recorded",
                f"source notes: {r.notes}",
            ]),
        })
    return conv


# ---------------------------------------------------------------- vLLM published figures
def convert_vllm(raw: pd.DataFrame) -> Conversion:
    """vLLM-published figures: none is shipped (see the skip reasons and docs/data.md)."""
    conv = Conversion()
    for _, r in raw.iterrows():
        conv.skip(_vllm_skip_reason(r))
    return conv


def _vllm_skip_reason(r: pd.Series) -> str:
    text = f"{r.isl} {r.other_metric} {r.notes} {r.source_url}"
    if "simon-mo" in text:
        if "ShareGPT" in str(r.isl):
            return "simon-mo/vLLM-Benchmark ShareGPT row: no fixed shape"
        return ("simon-mo/vLLM-Benchmark Nebius vLLM TP8 fixed-shape rows: also in head_to_head refdata; "
                "the bundle ships that benchmark's DGX H200 table (all three engines on one host) instead")
    if "req/s" in str(r.other_metric) and "ShareGPT" in str(r.isl):
        return "vLLM CI throughput test: req/s on a ShareGPT sample only (no tokens/s, no fixed shape)"
    if "latency" in str(r.other_metric):
        return "vLLM CI latency test: mean end-to-end latency at batch 8 only (no throughput)"
    if "fp8-kvcache" in str(r.source_url):
        return ("vLLM FP8-KV-cache blog: lengths ~20000/~2000 +-15% (not a fixed shape), precision column is "
                "the KV-cache dtype, vLLM version only 'after (v0.19.1)'")
    if "12315" in str(r.source_url):
        return "vLLM issue 12315: user repro on ShareGPT (no fixed shape)"
    return "vLLM blog: ratios, chart-only values or per-GPU claims without a shape"


# ---------------------------------------------------------------- head-to-head
H2H_KEEP_SOURCE = "DGX H200 table"
H2H_ENGINES = {"vLLM": ("vllm", "0.8.4"), "SGLang": ("sglang", "0.4.5.post1"),
               "TensorRT-LLM": ("trtllm", "0+main.2e669133")}


def convert_head_to_head(raw: pd.DataFrame) -> Conversion:
    """Same-host vLLM / SGLang / TRT-LLM points with a fixed shape and an output tok/s metric."""
    conv = Conversion()
    for _, r in raw.iterrows():
        reason = _h2h_skip_reason(r)
        if reason:
            conv.skip(reason)
        else:
            conv.rows.append(_h2h_row(r))
    return conv


def _h2h_skip_reason(r: pd.Series) -> str | None:
    src, par = str(r.source_url), str(r.parallelism)
    if "simon-mo" not in src:
        return _h2h_other_reason(src)
    if "git tag 2025-04-16" in src:
        return "simon-mo 2025-04-16 README: superseded by the 2025-04-18 results (its own note)"
    if "Nebius" in src:
        return ("simon-mo Nebius H200 table: same groups and shapes as the DGX H200 table (a second host would "
                "duplicate them; TRT-LLM was not run there)")
    if "ShareGPT" in str(r.isl):
        return "simon-mo ShareGPT scenario: no fixed shape"
    if "expert-parallel" in par:
        return ("simon-mo vLLM TP8 + expert-parallel variant: same group and shape as the plain TP8 row "
                "(EP is not part of the group key)")
    return None


def _h2h_other_reason(src: str) -> str:
    reasons = {
        "llm-ie-benchmarks": "sglang maintainer's table (llm-ie-benchmarks #3): metric 'presumed' output tok/s "
                             "(table unlabeled), GPU and TP only from linked context",
        "gpustack": "gpustack: 'Total TPS' (input+output), ShareGPT or unstated shape, baseline precision not "
                    "stated, GPU count not read",
        "sglang/issues/1639": "sglang #1639: total token throughput, dataset per issue commands (shape not defined)",
        "lmsys.org": "SGLang Llama-3 blog: approximate text claims and ratios only (bars are charts)",
        "perf-update": "vLLM v0.6.0 blog: qualitative ranking; values only in charts",
        "spheron": "Spheron blog: ISL/OSL not given in the excerpt",
        "runinfra": "runinfra: no ISL/OSL (saturation claim, TTFT ratio, cost per token)",
        "aimultiple": "aimultiple: 1,000 ShareGPT prompts (no fixed shape), engine versions not given",
        "bentoml": "BentoML study: 4-bit quantised model, load-test 'up to' values without a shape",
        "marktechpost": "BentoML study summary: approximate value without a shape",
    }
    for key, reason in reasons.items():
        if key in src:
            return reason
    return "no fixed shape or no output tok/s metric"


def _h2h_row(r: pd.Series) -> dict:
    engine, version = H2H_ENGINES[r.engine]
    notes = [
        f"load: {r.load_setting} - 50 prompts at 10 qps, not saturated",
        "mode=rate (request_rate=10, num_requests=50); arrival process not stated",
        f"metric: {r.metric}", f"workload: {r.workload}", f"settings: {r.parallelism}",
        f"engine version as published: {r.engine_version}",
        f"host: {r.gpu}", f"source notes: {r.notes}",
    ]
    if engine == "trtllm":
        notes.insert(0, "TRT-LLM main built from source at commit 2e669133 (2025-04-14) per the benchmark's "
                        "LOG.md; PyTorch backend; its release number is not stated, hence version 0+main.2e669133")
    return {
        "gpu": "h200", "engine": engine, "engine_version": version, "model": MODEL_SLUGS[r.model],
        "precision": str(r.precision).lower(), "tp": int(r.num_gpus), "pp": 1, "mode": "rate",
        "input_len": int(r.isl), "output_len": int(r.osl), "request_rate": 10.0, "num_requests": 50,
        "output_tok_per_s": _fmt(float(r.value)), "status": "ok", "provenance": "published",
        "source": f"{r.source_url} (README 2025-04-18)", "date": str(r.source_date),
        "notes": "; ".join(notes),
    }


# ---------------------------------------------------------------- prices
def _gpu_slug_for_price(provider: str, gpu: str, sku: str, n: float) -> tuple[str | None, str]:
    """Map a price row's GPU label to a slug, with a note; (None, reason) when it does not map cleanly."""
    g = gpu.strip()
    direct = {
        "H100 SXM 80GB": "h100", "H100 PCIe 80GB": "h100-pcie", "H100 (PCIe) 80GB": "h100-pcie",
        "H100 NVL 94GB": "h100-nvl", "H200 141GB": "h200", "H200 SXM 141GB": "h200",
        "B200 180GB": "b200", "B200 192GB": "b200", "B200 SXM 180GB": "b200", "A100 SXM 80GB": "a100",
        "A100 PCIe 80GB": "a100-pcie", "A100 SXM 40GB": "a100-40gb", "A100 40GB": "a100-40gb",
        "L40S 48GB": "l40s", "L40 48GB": "l40", "GH200 96GB": "gh200", "B300 288GB": "b300",
        "GB200 186GB": "gb200", "RTX PRO 6000 96GB": "rtx-pro-6000",
    }
    if g in direct:
        return direct[g], ""
    if g in ("H100 80GB", "H100 80GB (Mega)") and ("HGX" in sku or sku.startswith("a3-")):
        return "h100", f"listed as '{g}'; {sku} is an HGX/SXM H100 system"
    if g.startswith("GB200 Superchip"):
        return None, (f"'{g}' ({provider}) is priced per superchip of two GPUs with no GPUs-per-instance "
                      "count in the source")
    if g == "A100 80GB" and (provider == "CoreWeave" or sku.startswith("a2-ultragpu")):
        return "a100", f"listed as '{g}'; {sku} is an 8-GPU HGX/SXM A100 80GB system"
    return None, f"GPU label '{g}' ({provider} {sku}) does not say which form factor"


def _pricing_type(text: str) -> str | None:
    t = text.lower()
    if t.startswith("spot"):
        return "spot"
    if t.startswith("reserved ("):
        return "reserved"
    if t.startswith("on-demand") or t.startswith("marketplace"):
        return "on-demand"
    return None


def _provider_slug(provider: str) -> str:
    special = {"RunPod (Community Cloud)": "runpod-community", "RunPod (Secure Cloud)": "runpod-secure",
               "Hyperstack (NexGen Cloud)": "hyperstack", "Google Cloud": "gcp", "Vast.ai": "vast"}
    return special.get(provider, re.sub(r"[^a-z0-9]+", "-", provider.lower()).strip("-"))


def convert_prices(raw: pd.DataFrame) -> Conversion:
    """Per-GPU hourly prices; instance prices divided by GPUs per instance where only those are given."""
    conv = Conversion()
    for _, r in raw.iterrows():
        row = _price_row(r, conv)
        if row:
            conv.rows.append(row)
    return conv


def _price_row(r: pd.Series, conv: Conversion) -> dict | None:
    ptype = _pricing_type(str(r.pricing_type))
    if ptype is None:
        conv.skip(f"pricing type '{r.pricing_type}': not an hourly per-GPU price (note, discount or monthly "
                  "commitment)")
        return None
    slug, gpu_note = _gpu_slug_for_price(str(r.provider), str(r.gpu), str(r.sku), r.gpus_per_instance)
    if slug is None:
        conv.skip(f"ambiguous GPU: {gpu_note}")
        return None
    if pd.notna(r.usd_per_gpu_hour):
        price, how = float(r.usd_per_gpu_hour), "per-GPU price as listed"
    elif pd.notna(r.derived_usd_per_gpu_hour):
        price = float(r.derived_usd_per_gpu_hour)
        how = (f"derived: instance price / GPUs per instance = {_fmt(float(r.usd_per_instance_hour))} / "
               f"{int(r.gpus_per_instance)}")
    else:
        conv.skip("no per-GPU price and no GPUs-per-instance count to derive one")
        return None
    notes = [f"sku {r.sku}", how]
    if pd.notna(r.region):
        notes.append(f"region {r.region}")
    if gpu_note:
        notes.append(gpu_note)
    notes.append(f"pricing type as listed: {r.pricing_type}")
    if pd.notna(r.notes):
        notes.append(f"source notes: {r.notes}")
    transcriber = "" if pd.isna(r.transcribed_by) else f" (transcribed by {r.transcribed_by})"
    return {"gpu": slug, "provider": _provider_slug(str(r.provider)), "pricing_type": ptype,
            "usd_per_gpu_hour": _fmt(price), "source": f"{r.source_url}{transcriber}",
            "date": str(r.source_date), "notes": "; ".join(notes)}


# ---------------------------------------------------------------- trace and routes
@dataclass(frozen=True)
class TraceStats:
    """Request-rate and length statistics of a trace (rates per second, lengths in tokens)."""

    requests: int
    duration_s: float
    rate_rps: float
    arrival_cv: float
    input_len: dict[str, float]
    output_len: dict[str, float]


def trace_stats(trace: pd.DataFrame) -> TraceStats:
    """Mean rate, inter-arrival CV and length mean/p50/p95/p99 of an Azure LLM trace frame."""
    times = pd.to_datetime(trace["TIMESTAMP"]).sort_values()
    seconds = (times - times.iloc[0]).dt.total_seconds().to_numpy()
    gaps = np.diff(seconds)
    duration = float(seconds[-1])

    def lengths(column: str) -> dict[str, float]:
        values = trace[column].astype(float)
        return {"mean": float(values.mean()), "p50": float(values.quantile(0.50)),
                "p95": float(values.quantile(0.95)), "p99": float(values.quantile(0.99))}

    return TraceStats(requests=len(trace), duration_s=duration, rate_rps=(len(trace) - 1) / duration,
                      arrival_cv=float(gaps.std() / gaps.mean()), input_len=lengths("ContextTokens"),
                      output_len=lengths("GeneratedTokens"))


def example_routes(stats: TraceStats) -> pd.DataFrame:
    """The four example routes; the code route is derived from the trace, the others are example traffic."""
    example = "example traffic, not a measurement"
    code_note = (
        f"trace-derived from examples/traces/azure_llm_2023_code.csv ({stats.requests} requests over "
        f"{stats.duration_s:.0f} s): rate_rps = (requests-1)/duration, arrival_cv = std/mean of "
        "inter-arrival gaps, lengths = mean/p50/p95/p99 of ContextTokens and GeneratedTokens (pandas quantile, "
        "linear); the model (llama-3.1-8b), SLOs, peak_to_mean and updates/month are example settings, "
        "not from the trace (the trace does not name its model)")
    rows = [
        {"name": "chat", "model": "llama-3.1-8b", "traffic": "online", "rate_rps": 5, "peak_to_mean": 2,
         "arrival_cv": 1, "input_len_mean": 500, "output_len_mean": 250, "slo_percentile": 95,
         "ttft_slo_ms": 500, "tpot_slo_ms": 50, "model_updates_per_month": 1,
         "notes": f"{example}: rate 5 req/s, peak 2x mean, Poisson arrivals (cv 1), 500/250 tokens, "
                  "p95 TTFT 500 ms / TPOT 50 ms, one checkpoint update a month"},
        {"name": "summarise-batch", "model": "llama-3.1-8b", "traffic": "batch", "num_requests": 100000,
         "jobs_per_month": 30, "deadline_hours": 8, "input_len_mean": 4000, "output_len_mean": 300,
         "model_updates_per_month": 1,
         "notes": f"{example}: a nightly job of 100,000 documents of ~4000 prompt tokens summarised to ~300 "
                  "tokens within 8 hours, 30 jobs a month, one checkpoint update a month"},
        {"name": "code-completion", "model": "llama-3.1-8b", "traffic": "online",
         "rate_rps": round(stats.rate_rps, 4), "peak_to_mean": 1.5, "arrival_cv": round(stats.arrival_cv, 4),
         **{f"input_len_{k}": round(v, 2) for k, v in stats.input_len.items()},
         **{f"output_len_{k}": round(v, 2) for k, v in stats.output_len.items()},
         "slo_percentile": 95, "ttft_slo_ms": 300, "tpot_slo_ms": 30, "model_updates_per_month": 2,
         "notes": code_note},
        {"name": "assistant-70b", "model": "llama-3.1-70b", "traffic": "online", "rate_rps": 2,
         "peak_to_mean": 2, "arrival_cv": 1, "input_len_mean": 1000, "output_len_mean": 300,
         "slo_percentile": 95, "ttft_slo_ms": 1000, "tpot_slo_ms": 60, "model_updates_per_month": 0.5,
         "notes": f"{example}: rate 2 req/s, peak 2x mean, Poisson arrivals, 1000/300 tokens, p95 TTFT 1 s / "
                  "TPOT 60 ms, a checkpoint update every two months"},
    ]
    return pd.DataFrame(rows)


ATTRIBUTION = """# Attribution: azure_llm_2023_code.csv

`azure_llm_2023_code.csv` is an unmodified copy of one hour (2023-11-16, 18:17 to 19:14 UTC) of requests
to an LLM code-completion service in Azure: 8,819 rows of `TIMESTAMP, ContextTokens, GeneratedTokens`
(prompt and output lengths in tokens; no prompt text).

Source: Azure Public Dataset, `data/AzureLLMInferenceTrace_code.csv`
(https://github.com/Azure/AzurePublicDataset, described in its `AzureLLMInferenceDataset2023.md`).

Licence: CC-BY (Creative Commons Attribution).

Attribution the authors ask for: Pratyush Patel, Esha Choukse, Chaojie Zhang, Aashaka Shah, Íñigo Goiri,
Saeed Maleki, Ricardo Bianchini, "Splitwise: Efficient generative LLM inference using phase splitting",
ISCA 2024.

Fleetplan uses it in tests, in `examples/routes.csv` (the `code-completion` route's rate, burstiness and
lengths are computed from it by `tools/convert_refdata.py`) and in the demo.
"""


# ---------------------------------------------------------------- driver
def _strings(frame: pd.DataFrame, schema) -> pd.DataFrame:
    """All-string frame in `schema`'s column order (as a CSV reads); whole numbers in int columns lose '.0'."""
    out = frame.reindex(columns=schema.names).astype(object)
    for col in schema.columns:
        out[col.name] = [_cell_text(v, col.kind) for v in out[col.name]]
    return out


def _cell_text(value: object, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if kind == "int" and isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def write_validated(frame: pd.DataFrame, path: Path, schema) -> pd.DataFrame:
    """Validate `frame` against `schema`, then write it; returns the validated frame."""
    text = _strings(frame, schema)
    checked = validate_frame(text, schema, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_table(text, path, schema)
    return checked


def run(shared: Path, repo: Path) -> dict[str, Conversion]:
    """Convert every refdata file and write the bundled files under `repo`; returns the conversions."""
    ref = shared / "refdata"
    read = lambda name: pd.read_csv(ref / name)  # noqa: E731
    published = repo / "profiles" / "published"
    conversions = {
        "trtllm_perf_overview.csv": convert_perf_overview(read("trtllm_perf_overview.csv")),
        "trtllm_online_serving_v014.csv": convert_online_v014(read("trtllm_online_serving_v014.csv")),
        "nvidia_nim_serving.csv": convert_nim(read("nvidia_nim_serving.csv")),
        "vllm_published.csv": convert_vllm(read("vllm_published.csv")),
        "head_to_head.csv": convert_head_to_head(read("head_to_head.csv")),
    }
    for name, conv in conversions.items():
        target = published / name
        if conv.rows:
            write_validated(conv.frame(), target, PROFILE)
        elif target.exists():
            target.unlink()
    prices = convert_prices(read("gpu_prices.csv"))
    write_validated(prices.frame(), repo / "planner" / "data" / "prices.csv", PRICES)
    conversions["gpu_prices.csv"] = prices
    _write_examples(shared, repo)
    return conversions


def _write_examples(shared: Path, repo: Path) -> None:
    traces = repo / "examples" / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shared / "traces" / "azure_llm_2023_code.csv", traces / "azure_llm_2023_code.csv")
    (traces / "ATTRIBUTION.md").write_text(ATTRIBUTION, encoding="utf-8")
    stats = trace_stats(pd.read_csv(traces / "azure_llm_2023_code.csv"))
    log.info("trace: %s", stats)
    write_validated(example_routes(stats), repo / "examples" / "routes.csv", ROUTES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO_ROOT.parent / "shared",
                        help="the shared reference folder (default: ../shared)")
    parser.add_argument("--repo", type=Path, default=REPO_ROOT, help="repository root to write into")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        conversions = run(args.shared.resolve(), args.repo.resolve())
    except (InputError, OSError, KeyError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for name, conv in conversions.items():
        print(f"{name}: {len(conv.rows)} rows kept")
        for reason, count in sorted(conv.skipped.items(), key=lambda kv: -kv[1]):
            print(f"    skipped {count}: {reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
