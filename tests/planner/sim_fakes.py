"""Fake curves for the simulator tests, following planner.engine.curves' step-time API.

step_time_s(b, c, p, I) = t0 + a*b + k*b*c + q*p + r*p*I seconds: the same
affine iteration model the real fitted curves use (`Curve.step_time_s`).
`CurvedStepCurve` is deliberately not affine in context, to exercise the
simulator's direct-call fallback.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class SimCurve:
    t0: float = 6e-3
    a: float = 4e-5
    k: float = 1.5e-8
    q: float = 6e-5
    r: float = 1e-9
    kv_cache_tokens: int = 500_000
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    request_overhead_s: float = 0.0
    async_scheduling: bool = False  # vLLM's: an arrival joins the iteration after next (planner.latency.simulate)
    has_latency: bool = True  # as a curve fitted on latency rows (the door's reports name their basis)

    def step_time_s(self, batch: float, context: float, prefill_tokens: float = 0.0,
                    prefill_context: float = 0.0) -> float:
        return (self.t0 + self.a * batch + self.k * batch * context + self.q * prefill_tokens
                + self.r * prefill_tokens * prefill_context)

    def max_batch(self, input_len: float, output_len: float) -> int:
        return max(1, min(self.max_num_seqs, int(self.kv_cache_tokens // (input_len + output_len))))


@dataclass(frozen=True, eq=False)
class CurvedStepCurve(SimCurve):
    """Step time grows with the square root of context: not affine, so the simulator calls it directly."""

    def step_time_s(self, batch: float, context: float, prefill_tokens: float = 0.0,
                    prefill_context: float = 0.0) -> float:
        return (self.t0 + self.a * batch + 1e-6 * batch * math.sqrt(max(context, 0.0)) + self.q * prefill_tokens
                + self.r * prefill_tokens * prefill_context)


@dataclass(frozen=True, eq=False)
class MoeCurve(SimCurve):
    """SimCurve plus routed experts read as planner.engine.curves models them: m * (1 - (1 - k/E)^tokens)."""

    m: float = 9e-3
    expert_share: float = 8 / 128

    def expert_read_s(self, tokens: float) -> float:
        return self.m * (1.0 - (1.0 - self.expert_share) ** tokens) if tokens > 0 else 0.0

    def step_time_s(self, batch: float, context: float, prefill_tokens: float = 0.0,
                    prefill_context: float = 0.0) -> float:
        return (super().step_time_s(batch, context, prefill_tokens, prefill_context)
                + self.expert_read_s(batch + prefill_tokens))
