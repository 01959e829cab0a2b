"""Share of the GPU's memory-bandwidth limit that a measured decode reached (the profile's roofline_frac).

The formula is fleetfacts.roofline.roofline_fraction; this module applies it to a
sweep's points (as each is measured) and to the rows of an existing profile folder
(`python -m measure roofline DIR`).  It needs the GPU in the spec table and the
model's facts (config.json or the model table); the estimator's fallback GPU and model
are never used here, so a missing spec leaves the column blank instead of inventing a number.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from fleetfacts.roofline import roofline_fraction
from fleetfacts.specs import (
    UNKNOWN_PRECISION_BYTES,
    gpu_spec,
    kv_bytes_per_token,
    model_facts,
    weight_bytes_read_per_step,
)
from measure.engines.base import EngineConfig, EngineInfo, kv_cache_precision
from measure.points import Point, point_from_mapping
from measure.profile_dir import ProfileDir
from measure.stats import Measurement, summarize


class EngineCaps(Protocol):
    """The engine caps that bound a decode batch (EngineInfo, or a profile row's columns)."""

    @property
    def max_num_seqs(self) -> int | None: ...

    @property
    def kv_cache_tokens(self) -> int | None: ...


@dataclass(frozen=True)
class RowCaps:
    """The caps a profile row recorded."""

    max_num_seqs: int | None
    kv_cache_tokens: int | None


# (point, caps, num_requests, tpot_mean_ms, output_tok_per_s) -> fraction, or None
DecodeBound = Callable[[Point, EngineCaps | None, int, float | None, float | None], float | None]
RooflineFn = Callable[[Point, Measurement, EngineInfo], float | None]


def effective_batch(point: Point, info: EngineCaps | None, num_requests: int) -> float | None:
    """Sequences decoding together: the load, capped by max_num_seqs and by KV-cache room."""
    if point.mode == "offline":
        load = float(min(point.batch_size or num_requests, num_requests))
    elif point.mode == "concurrency":
        load = float(point.concurrency or 1)
    else:
        return None
    if info is not None and info.max_num_seqs:
        load = min(load, float(info.max_num_seqs))
    if info is not None and info.kv_cache_tokens:
        load = min(load, max(1.0, float(info.kv_cache_tokens // (point.input_len + point.output_len))))
    return load


def roofline_for(gpu: str, config: EngineConfig) -> RooflineFn | None:
    """A callable (point, measurement, engine info) -> roofline fraction, or None when specs are missing."""
    bound = _decode_bound(gpu, config.model, config.model_path, config.precision, config.tp, config.engine_args)
    if bound is None:
        return None

    def compute(point: Point, measurement: Measurement, info: EngineInfo) -> float | None:
        tok_s = measurement.output_tokens / measurement.duration_s if measurement.duration_s > 0 else None
        return bound(point, info, measurement.num_requests, summarize(measurement.tpot_ms)["mean"], tok_s)

    return compute


def _decode_bound(gpu: str, model: str, model_path: str, precision: str, tp: int,
                  engine_args: dict) -> DecodeBound | None:
    """(point, info, num_requests, tpot_mean_ms, output_tok_per_s) -> fraction; None without GPU or model specs."""
    spec = gpu_spec(gpu)
    facts = model_facts(model, model_path if model_path and Path(model_path).is_dir() else None)
    if spec is None or facts is None:
        return None
    weights = weight_bytes_read_per_step(facts, precision, UNKNOWN_PRECISION_BYTES)
    kv_bytes = kv_bytes_per_token(facts, kv_cache_precision(engine_args))

    def bound(point: Point, info: EngineCaps | None, num_requests: int, tpot_mean_ms: float | None,
              output_tok_per_s: float | None) -> float | None:
        batch = effective_batch(point, info, num_requests)
        if batch is None:
            return None
        return roofline_fraction(weight_bytes=weights, kv_bytes_per_token=kv_bytes, batch=batch,
                                 input_len=point.input_len, output_len=point.output_len,
                                 bandwidth_bytes_s=spec.mem_bandwidth_tb_s * 1e12, tp=tp,
                                 tpot_mean_ms=tpot_mean_ms, output_tok_per_s=output_tok_per_s)

    return bound


def fill_profile_roofline(profile: ProfileDir) -> int:
    """Compute roofline_frac where an ok row of a profile folder has none (rows from before the column was
    filled); the same formula as during a sweep, from the row's own measurements.  Returns rows filled."""
    identity = profile.identity() or {}
    rows = profile.rows()
    if not rows:
        return 0
    first = rows[0]
    bound = _decode_bound(first["gpu"], first["model"], identity.get("model_path", ""), first["precision"],
                          int(first["tp"]), identity.get("engine_args") or {})
    if bound is None:
        return 0
    filled = 0
    for i, row in enumerate(rows):
        if row.get("status", "ok") not in ("ok", "") or row.get("roofline_frac"):
            continue
        info = RowCaps(max_num_seqs=_int(row.get("max_num_seqs")), kv_cache_tokens=_int(row.get("kv_cache_tokens")))
        point = point_from_mapping(row, f"{profile.csv_path}, line {i + 2}")
        value = bound(point, info, _int(row.get("num_requests")) or point.requests, _float(row.get("tpot_mean_ms")),
                      _float(row.get("output_tok_per_s")))
        if value is not None:
            row["roofline_frac"] = value
            filled += 1
    if filled:
        profile.rewrite(rows)
    return filled


def _int(text: str | float | None) -> int | None:
    if text is None:
        return None
    try:
        return int(float(text))
    except (TypeError, ValueError):
        return None


def _float(text: str | float | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None
