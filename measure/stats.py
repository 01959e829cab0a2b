"""Per-point metrics: throughput from token counts and latency percentiles.

Latencies are per request, in ms.  TTFT: request sent to first token.  TPOT:
(e2e - ttft) / (output_tokens - 1), so it excludes the first token (vLLM's
definition).  ITL: every gap between consecutive tokens (chunks).  Percentiles
use numpy's linear interpolation, as vLLM's benchmarks do.  A metric without
data is None (written blank), never 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")
STATS = (("mean", None), ("p50", 50.0), ("p95", 95.0), ("p99", 99.0))


@dataclass(frozen=True)
class Measurement:
    """What one point measured. Lists hold one value per request (itl: per gap), ms."""

    num_requests: int
    duration_s: float
    input_tokens: int
    output_tokens: int
    ttft_ms: Sequence[float] = ()
    tpot_ms: Sequence[float] = ()
    itl_ms: Sequence[float] = ()
    e2e_ms: Sequence[float] = ()
    errors: int = 0
    first_error: str = ""
    notes: str = ""
    extra: dict = field(default_factory=dict)


def tpot_ms(e2e_ms: float, ttft_ms: float, output_tokens: int) -> float | None:
    """vLLM's TPOT: time per output token after the first; None for a single-token output."""
    if output_tokens <= 1:
        return None
    return (e2e_ms - ttft_ms) / (output_tokens - 1)


def summarize(values: Sequence[float]) -> dict[str, float | None]:
    """mean/p50/p95/p99 of finite values; all None when there are none."""
    data = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if data.size == 0:
        return {name: None for name, _ in STATS}
    return {name: float(data.mean()) if q is None else float(np.percentile(data, q)) for name, q in STATS}


def metric_columns(m: Measurement) -> dict[str, float | int | None]:
    """PROFILE columns computed from a measurement (throughputs and latency stats)."""
    cols: dict[str, float | int | None] = {"num_requests": m.num_requests, "duration_s": m.duration_s}
    ok = m.duration_s > 0 and m.output_tokens > 0
    cols["output_tok_per_s"] = m.output_tokens / m.duration_s if ok else None
    cols["total_tok_per_s"] = (m.input_tokens + m.output_tokens) / m.duration_s if ok else None
    cols["req_per_s"] = m.num_requests / m.duration_s if m.duration_s > 0 and m.num_requests else None
    for metric in LATENCY_METRICS:
        for stat, value in summarize(getattr(m, f"{metric}_ms")).items():
            cols[f"{metric}_{stat}_ms"] = value
    return cols
