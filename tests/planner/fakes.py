"""A small fake Curve following the same physics as planner.curves, for sizing and plan tests.

One engine iteration takes t(b, c, p) = t0 + a*b + k*b*c + q*p seconds for b
decoding sequences of mean context c and p prefill tokens.  At concurrency C
(capped by KV cache and max_num_seqs) the mean step is t(C, I + O/2, C*I/O);
TTFT = half a step (waiting for the current one) + one step with the own prompt;
e2e = TTFT + (O - 1) * step.  Throughput intervals are +-`spread` (relative).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from planner.curves import GroupKey, Prediction


@dataclass(frozen=True, eq=False)
class FakeCurve:
    key: GroupKey
    t0: float = 6e-3
    a: float = 4e-5
    k: float = 1.5e-8
    q: float = 6e-6
    kv_cache_tokens: int = 500_000
    max_num_seqs: int = 256
    spread: float = 0.05
    measured_max_load: float = 512
    source_provenance: str = "measured"
    has_latency: bool = True
    calls: list = field(default_factory=list, repr=False)

    def step_time_s(self, batch: float, context: float, prefill_tokens: float = 0.0,
                    prefill_context: float = 0.0) -> float:
        return self.t0 + self.a * batch + self.k * batch * context + self.q * prefill_tokens

    def max_batch(self, input_len: float, output_len: float) -> int:
        return max(1, min(self.max_num_seqs, int(self.kv_cache_tokens // (input_len + output_len))))

    def _latencies(self, i: float, o: float, concurrency: float) -> tuple[float, float, float]:
        c_eff = min(concurrency, self.max_batch(i, o))
        tau = self.step_time_s(c_eff, i + o / 2, c_eff * i / o)
        ttft = 0.5 * tau + self.step_time_s(c_eff, i + o / 2, i)
        e2e = ttft + (o - 1) * tau
        queue = (concurrency / c_eff - 1.0) * e2e
        return ttft + queue, tau, e2e + queue

    def _pred(self, tok_s: float, ttft: float, tpot: float, e2e: float, load: float) -> Prediction:
        extrapolated = load > self.measured_max_load
        width = self.spread * (2.0 if extrapolated else 1.0)
        return Prediction(tok_s, tok_s * (1 - width), tok_s * (1 + width), ttft * 1000, tpot * 1000, e2e * 1000,
                          float(load), extrapolated, "extrapolated" if extrapolated else "predicted", "")

    def predict_concurrency(self, input_len: float, output_len: float, concurrency: float) -> Prediction:
        self.calls.append(("concurrency", input_len, output_len, concurrency))
        ttft, tpot, e2e = self._latencies(input_len, output_len, concurrency)
        return self._pred(concurrency * output_len / e2e, ttft, tpot, e2e, concurrency)

    def predict_offline(self, input_len: float, output_len: float, batch_size: int) -> Prediction:
        self.calls.append(("offline", input_len, output_len, batch_size))
        cap = self.max_batch(input_len, output_len)
        waves = math.ceil(batch_size / cap)
        ttft, tpot, wave_s = self._latencies(input_len, output_len, min(batch_size, cap))
        seconds = waves * wave_s
        return self._pred(batch_size * output_len / seconds, ttft, tpot, seconds, batch_size)

    def saturated(self, input_len: float, output_len: float) -> Prediction:
        return self.predict_offline(input_len, output_len, 20 * self.max_batch(input_len, output_len))


def key(engine: str = "vllm", gpu: str = "h100", model: str = "llama-3.1-8b", precision: str = "bf16",
        tp: int = 1, version: str = "0.26.0") -> GroupKey:
    return GroupKey(engine, version, gpu, model, precision, tp)


def fake_curves(*curves: FakeCurve) -> dict[GroupKey, FakeCurve]:
    return {c.key: c for c in curves}
