"""The server's own view of a point: vLLM's Prometheus /metrics, scraped before and after it.

`--server` points (measure/engines/server.py) scrape /metrics just before the load starts and just after the
last response, and once a second in between (the scheduler gauges).  The difference of the two scrapes is what
the server recorded for this point's requests: per-request histograms of queue time (WAITING), prefill time
(scheduled to first token), decode time, inference time (RUNNING), TTFT, inter-token latency, time per output
token and e2e latency, and counters (preemptions, prompt and generation tokens, prefix-cache hits, engine steps
from the iteration-tokens histogram).  One JSON line per point goes to `server_metrics.jsonl` in the profile
folder, keyed by the point (mode, lengths, load, request count) and the seed of its arrivals, beside the
client's per-request TTFT/TPOT/e2e, so a row can say how much of TTFT is queueing, prefill and server/HTTP
overhead.

Names are vLLM 0.26's (vllm/v1/metrics/loggers.py); older spellings are accepted where they differ.  Means are
exact (sum/count).  Percentiles are estimated from the cumulative buckets the way Prometheus'
histogram_quantile does (linear within a bucket), so they are only as fine as vLLM's buckets: the
queue/prefill/decode/e2e histograms start at 0.3 s and ITL/TPOT at 10 ms, so a sub-bucket value reads as an
interpolation inside [0, first bound].  The bucket counts are stored too.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

FILE_NAME = "server_metrics.jsonl"
# Short key -> the histogram's base name(s), first present wins (seconds unless the key says otherwise).
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "queue": ("vllm:request_queue_time_seconds",),
    "prefill": ("vllm:request_prefill_time_seconds",),
    "decode": ("vllm:request_decode_time_seconds",),
    "inference": ("vllm:request_inference_time_seconds",),
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds",),
    "tpot": ("vllm:request_time_per_output_token_seconds", "vllm:time_per_output_token_seconds"),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "step_tokens": ("vllm:iteration_tokens_total",),   # tokens per engine step; its count = engine steps
}
UNITLESS = frozenset({"step_tokens"})
# Short key -> counter sample name(s) (prometheus_client adds `_total`), summed over label sets.
COUNTERS: dict[str, tuple[str, ...]] = {
    "preemptions": ("vllm:num_preemptions_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "requests_finished": ("vllm:request_success_total",),
}
# Scheduler gauges sampled during the point.
GAUGES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
}
QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))
SAMPLE_RE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?\s*$")
LABEL_RE = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
GAUGE_INTERVAL_S = 1.0
SCRAPE_TIMEOUT_S = 5.0


# ------------------------------------------------------------------ parsing (pure)

Samples = dict[str, list[tuple[dict[str, str], float]]]


def parse_prometheus(text: str) -> Samples:
    """Prometheus text exposition -> {sample name: [(labels, value), ...]}; comments and odd lines skipped."""
    samples: Samples = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = SAMPLE_RE.match(line)
        if not match:
            continue
        try:
            value = float(match.group("value"))
        except ValueError:
            continue
        labels = dict(LABEL_RE.findall(match.group("labels") or ""))
        samples.setdefault(match.group("name"), []).append((labels, value))
    return samples


@dataclass(frozen=True)
class Histogram:
    """A histogram summed over its label sets: cumulative counts per upper bound (le), count and sum."""

    buckets: tuple[tuple[float, float], ...]   # (le, cumulative count), ascending, +Inf last
    count: float
    sum: float

    def minus(self, before: Histogram | None) -> Histogram:
        if before is None:
            return self
        old = dict(before.buckets)
        return Histogram(tuple((le, cum - old.get(le, 0.0)) for le, cum in self.buckets),
                         self.count - before.count, self.sum - before.sum)

    def quantile(self, q: float) -> float | None:
        """Prometheus histogram_quantile: linear inside the bucket holding rank q*count; the first bucket's
        lower bound is 0; a rank in the +Inf bucket returns the highest finite bound (a lower bound)."""
        if self.count <= 0 or not self.buckets:
            return None
        rank = q * self.count
        lower, below = 0.0, 0.0
        for le, cum in self.buckets:
            if cum >= rank and cum > below:
                if math.isinf(le):
                    return lower
                return lower + (le - lower) * (rank - below) / (cum - below)
            lower, below = (le if not math.isinf(le) else lower), cum
        return lower


def histogram(samples: Samples, names: tuple[str, ...]) -> Histogram | None:
    """The first of `names` present, summed over label sets other than `le`; None if none is."""
    for name in names:
        rows = samples.get(name + "_bucket")
        if not rows:
            continue
        by_le: dict[float, float] = {}
        for labels, value in rows:
            try:
                le = float(labels.get("le", "nan"))
            except ValueError:
                continue
            if not math.isnan(le):
                by_le[le] = by_le.get(le, 0.0) + value
        count = sum(v for _, v in samples.get(name + "_count", []))
        total = sum(v for _, v in samples.get(name + "_sum", []))
        return Histogram(tuple(sorted(by_le.items())), count, total)
    return None


def scalar(samples: Samples, names: tuple[str, ...]) -> float | None:
    """The first of `names` present, summed over its label sets."""
    for name in names:
        if name in samples:
            return sum(v for _, v in samples[name])
    return None


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def histogram_summary(h: Histogram, unitless: bool = False) -> dict:
    """count, sum, mean and bucket-estimated quantiles (ms for time histograms) plus the bucket counts."""
    scale, unit = (1.0, "") if unitless else (1000.0, "_ms")
    out: dict = {"count": int(round(h.count)), "sum" + ("" if unitless else "_s"): _round(h.sum, 6),
                 "mean" + unit: _round(h.sum / h.count * scale) if h.count > 0 else None}
    for name, q in QUANTILES:
        value = h.quantile(q)
        out[name + unit] = _round(value * scale) if value is not None else None
    out["buckets"] = {("+Inf" if math.isinf(le) else f"{le:g}"): int(round(cum)) for le, cum in h.buckets}
    return out


def point_delta(before: Samples, after: Samples) -> dict:
    """What the server recorded between two scrapes: histogram summaries and counter increments."""
    out: dict = {}
    for key, names in HISTOGRAMS.items():
        h_after = histogram(after, names)
        if h_after is None:
            continue
        delta = h_after.minus(histogram(before, names))
        if delta.count < 0:   # the server restarted in between: counts went back
            out[key] = {"error": "counter reset between scrapes"}
            continue
        out[key] = histogram_summary(delta, unitless=key in UNITLESS)
    counters = {}
    for key, names in COUNTERS.items():
        a, b = scalar(after, names), scalar(before, names)
        if a is not None:
            counters[key] = _round(a - (b or 0.0), 1)
    out["counters"] = counters
    return out


def gauge_values(samples: Samples) -> dict[str, float]:
    return {key: value for key, names in GAUGES.items() if (value := scalar(samples, names)) is not None}


def summary_note(delta: dict) -> str:
    """A short note for the profile row: the server's mean queue/prefill/decode ms and preemptions."""
    parts = []
    for key in ("queue", "prefill", "decode"):
        mean = delta.get(key, {}).get("mean_ms")
        if mean is not None:
            parts.append(f"{key} {mean:.1f}")
    if not parts:
        return ""
    note = "server /metrics means ms: " + ", ".join(parts)
    preempt = delta.get("counters", {}).get("preemptions")
    if preempt is not None:
        note += f"; preemptions {preempt:g}"
    return note + f" ({FILE_NAME})"


# ------------------------------------------------------------------ recording around a point

def fetch_metrics(base_url: str, timeout_s: float = SCRAPE_TIMEOUT_S) -> str:
    """GET base_url/metrics as text; raises httpx errors, or RuntimeError on a non-200 answer."""
    import httpx  # noqa: PLC0415 - only the server path needs it

    response = httpx.get(base_url.rstrip("/") + "/metrics", timeout=timeout_s)
    if response.status_code != 200:
        raise RuntimeError(f"/metrics answered HTTP {response.status_code}")
    return response.text


def point_key(point) -> dict:
    """The fields that identify a point's profile row (measure.points.Point)."""
    return {"mode": point.mode, "input_len": point.input_len, "output_len": point.output_len,
            "batch_size": point.batch_size if point.mode == "offline" else None,
            "concurrency": point.concurrency if point.mode == "concurrency" else None,
            "request_rate": point.request_rate if point.mode == "rate" else None,
            "arrival": point.arrival if point.mode == "rate" else "", "num_requests": point.requests,
            "label": point.label()}


@dataclass
class PointRecorder:
    """Scrapes before (begin), samples the gauges in a thread, scrapes after (end) and builds the record."""

    fetch: Callable[[], str]
    interval_s: float = GAUGE_INTERVAL_S
    before: Samples | None = None
    error: str = ""
    series: list[list[float | None]] = field(default_factory=list)
    _t0: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _scrape(self) -> Samples | None:
        try:
            return parse_prometheus(self.fetch())
        except Exception as err:  # noqa: BLE001 - best effort: the point is measured regardless
            self.error = self.error or f"{type(err).__name__}: {' '.join(str(err).split())}"[:200]
            return None

    def begin(self) -> bool:
        """Scrape before the point; False (and nothing more is done) when /metrics has no vLLM histograms."""
        self.before = self._scrape()
        if not self.before or not any(histogram(self.before, n) for n in HISTOGRAMS.values()):
            self.before = None
            return False
        self._t0 = time.perf_counter()
        if self.interval_s > 0:
            self._thread = threading.Thread(target=self._sample, name="metrics-gauges", daemon=True)
            self._thread.start()
        return True

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            samples = self._scrape()
            if samples is None:
                continue
            g = gauge_values(samples)
            self.series.append([round(time.perf_counter() - self._t0, 2), g.get("running"), g.get("waiting"),
                                _round(g.get("kv_cache_usage"), 4)])

    def end(self) -> dict | None:
        """Scrape after the point and return the server part of the record (None if begin() failed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=SCRAPE_TIMEOUT_S + 1)
        if self.before is None:
            return None
        after = self._scrape()
        if after is None:
            return {"error": self.error or "no /metrics after the point"}
        record = point_delta(self.before, after)
        record["gauges"] = _gauge_summary(self.series)
        if self.error:
            record["scrape_error"] = self.error
        return record


def _gauge_summary(series: list[list[float | None]]) -> dict:
    out: dict = {"interval_s": GAUGE_INTERVAL_S, "series": series,
                 "columns": ["t_s", "running", "waiting", "kv_cache_usage"]}
    for i, key in enumerate(("running", "waiting", "kv_cache_usage"), start=1):
        values = [float(v) for row in series if (v := row[i]) is not None]
        if values:
            out[key] = {"mean": _round(sum(values) / len(values)), "max": _round(max(values), 4)}
    return out


def client_lists(measurement) -> dict:
    """The client's per-request figures of a measure.stats.Measurement (ms, 0.1 ms resolution)."""
    def ms(values) -> list[float]:
        return [round(float(v), 1) for v in values]
    return {"requests": measurement.num_requests, "errors": measurement.errors,
            "duration_s": _round(measurement.duration_s, 4), "ttft_ms": ms(measurement.ttft_ms),
            "tpot_ms": [round(float(v), 3) for v in measurement.tpot_ms], "e2e_ms": ms(measurement.e2e_ms)}


def build_record(point, seed: int, started: dt.datetime, server: dict | None, measurement=None,
                 error: str = "") -> dict:
    """One server_metrics.jsonl line."""
    record = {"point": point_key(point), "seed": seed, "started": started.isoformat(timespec="seconds"),
              "server": server}
    if measurement is not None:
        record["client"] = client_lists(measurement)
    if error:
        record["error"] = error[:400]
    return record


def append_record(path: str | Path, record: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, separators=(",", ":")) + "\n")


def read_records(path: str | Path) -> list[dict]:
    """Every line of a server_metrics.jsonl."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
