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
    from pathlib import Path  # noqa: PLC0415

    from measure.specs import gpu_spec, model_facts  # noqa: PLC0415

    spec = gpu_spec(gpu)
    model_dir = config.model_path if Path(config.model_path).is_dir() else None
    facts = model_facts(config.model, model_dir)
    if spec is None or facts is None:
        return None
    kv_bytes = 1.0 if str(config.engine_args.get("kv_cache_dtype", "")).startswith("fp8") else 2.0

    def compute(point, measurement, info) -> float | None:
        batch = effective_batch(point, info, measurement.num_requests)
        if batch is None:
            return None
        from measure.stats import summarize  # noqa: PLC0415

        tpot = summarize(measurement.tpot_ms)["mean"]
        tok_s = measurement.output_tokens / measurement.duration_s if measurement.duration_s > 0 else None
        return roofline_fraction(weight_bytes=facts.weight_bytes_read_per_step(config.precision),
                                 kv_bytes_per_token=facts.kv_bytes_per_token(kv_bytes), batch=batch,
                                 input_len=point.input_len, output_len=point.output_len,
                                 bandwidth_bytes_s=spec.mem_bandwidth_tb_s * 1e12, tp=config.tp,
                                 tpot_mean_ms=tpot, output_tok_per_s=tok_s)

    return compute
