"""Share of the GPU's memory-bandwidth limit that a measured decode reached.

A decode step of `b` sequences with mean context `c` must read the weights
once and every sequence's KV cache:  bytes = W + b * c * kv_per_token.  At
`bandwidth` bytes/s over `tp` GPUs the fastest possible step is
t_min = bytes / (tp * bandwidth).  The roofline fraction is t_min over the
measured step time (TPOT, which excludes the first token); without a TPOT it
is measured output tokens/s over the bound b / t_min (that includes prefill
time, so it is a lower bound on decode efficiency).
"""

from __future__ import annotations

import math


def min_step_time_s(weight_bytes: float, kv_bytes_per_token: float, batch: float, mean_context: float,
                    bandwidth_bytes_s: float, tp: int = 1) -> float:
    """Fastest possible decode step, s: (weights + KV read) / aggregate bandwidth."""
    if bandwidth_bytes_s <= 0 or tp < 1:
        raise ValueError(f"bandwidth must be > 0 and tp >= 1, got {bandwidth_bytes_s}, {tp}")
    return (weight_bytes + batch * mean_context * kv_bytes_per_token) / (tp * bandwidth_bytes_s)


def roofline_fraction(*, weight_bytes: float, kv_bytes_per_token: float, batch: float, input_len: float,
                      output_len: float, bandwidth_bytes_s: float, tp: int = 1, tpot_mean_ms: float | None = None,
                      output_tok_per_s: float | None = None) -> float | None:
    """Measured decode speed over the bandwidth bound (0..~1); None without a usable measurement."""
    if batch <= 0:
        return None
    t_min = min_step_time_s(weight_bytes, kv_bytes_per_token, batch, input_len + output_len / 2.0,
                            bandwidth_bytes_s, tp)
    if tpot_mean_ms is not None and math.isfinite(tpot_mean_ms) and tpot_mean_ms > 0:
        return t_min / (tpot_mean_ms / 1000.0)
    if output_tok_per_s is not None and math.isfinite(output_tok_per_s) and output_tok_per_s > 0:
        return output_tok_per_s / (batch / t_min)
    return None


def effective_batch(point, info, num_requests: int) -> float | None:
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


def roofline_for(gpu: str, config, estimator=None):
    """A callable (point, measurement, engine info) -> roofline fraction, or None when specs are missing.

    Needs the GPU in the spec table (planner/data/gpu_specs.csv) and the model's
    facts (config.json or model_specs.csv); the estimator's fallbacks are never used here.
    """
    from measure.stats import summarize  # noqa: PLC0415

    bound = _decode_bound(gpu, config.model, config.model_path, config.precision, config.tp, config.engine_args)
    if bound is None:
        return None

    def compute(point, measurement, info) -> float | None:
        tok_s = measurement.output_tokens / measurement.duration_s if measurement.duration_s > 0 else None
        return bound(point, info, measurement.num_requests, summarize(measurement.tpot_ms)["mean"], tok_s)

    return compute


def _decode_bound(gpu: str, model: str, model_path: str, precision: str, tp: int, engine_args: dict):
    """(point, info, num_requests, tpot_mean_ms, output_tok_per_s) -> fraction; None without GPU or model specs."""
    from pathlib import Path  # noqa: PLC0415

    from measure.specs import gpu_spec, model_facts  # noqa: PLC0415

    spec = gpu_spec(gpu)
    facts = model_facts(model, model_path if model_path and Path(model_path).is_dir() else None)
    if spec is None or facts is None:
        return None
    kv_bytes = 1.0 if str(engine_args.get("kv_cache_dtype", "")).startswith("fp8") else 2.0

    def bound(point, info, num_requests: int, tpot_mean_ms, output_tok_per_s) -> float | None:
        batch = effective_batch(point, info, num_requests)
        if batch is None:
            return None
        return roofline_fraction(weight_bytes=facts.weight_bytes_read_per_step(precision),
                                 kv_bytes_per_token=facts.kv_bytes_per_token(kv_bytes), batch=batch,
                                 input_len=point.input_len, output_len=point.output_len,
                                 bandwidth_bytes_s=spec.mem_bandwidth_tb_s * 1e12, tp=tp,
                                 tpot_mean_ms=tpot_mean_ms, output_tok_per_s=output_tok_per_s)

    return bound


def fill_profile_roofline(profile) -> int:
    """Compute roofline_frac where an ok row of a profile folder has none (rows from before the column was
    filled); the same formula as during a sweep, from the row's own measurements.  Returns rows filled."""
    from types import SimpleNamespace  # noqa: PLC0415

    from measure.points import point_from_mapping  # noqa: PLC0415

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
        info = SimpleNamespace(max_num_seqs=_int(row.get("max_num_seqs")), kv_cache_tokens=_int(row.get("kv_cache_tokens")))
        point = point_from_mapping(row, f"{profile.csv_path}, line {i + 2}")
        value = bound(point, info, _int(row.get("num_requests")) or point.requests, _float(row.get("tpot_mean_ms")),
                      _float(row.get("output_tok_per_s")))
        if value is not None:
            row["roofline_frac"] = value
            filled += 1
    if filled:
        profile.rewrite(rows)
    return filled


def _int(text) -> int | None:
    try:
        return int(float(text))
    except (TypeError, ValueError):
        return None


def _float(text) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None
