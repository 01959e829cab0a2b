"""Fitted performance curves: one iteration-time model per profile group.

INTERFACE FILE (being implemented): the names and signatures below are the
contract other modules code against.

A group is (engine, engine_version, gpu, model, precision, tp).  Each fitted
`Curve` knows the time of one engine iteration

    t(b, c, p) = t0 + a*b + k*b*c + q*p + r*p*c_p          [seconds]

(b decoding sequences with mean context c tokens, p prefill tokens whose
prompts average c_p tokens) and derives from it offline-batch throughput and
online latency (TTFT, TPOT, e2e) at any shape, with an interval and a flag
saying whether the shape lies outside what was measured.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupKey:
    engine: str
    engine_version: str
    gpu: str
    model: str
    precision: str
    tp: int

    def label(self) -> str:
        return f"{self.engine} {self.engine_version} / {self.gpu} x{self.tp} / {self.model} {self.precision}"


@dataclass(frozen=True)
class Prediction:
    """Predicted performance of one replica at one shape.

    output_tok_per_s is for the whole replica (all tp GPUs); low/high bound it
    (about a 90% interval).  Latencies are means in ms (NaN where the group
    has no basis for them).  provenance: "measured" (a measured point at this
    exact shape), "published", "predicted" (inside the measured range) or
    "extrapolated" (outside it: interval widened).
    """

    output_tok_per_s: float
    low: float
    high: float
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    concurrency: float
    extrapolated: bool
    provenance: str
    note: str = ""
