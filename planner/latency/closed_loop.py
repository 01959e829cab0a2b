"""A benchmark's closed loop, request by request: `concurrency` clients each send a request, wait for its last token
and send the next at once, `requests` in all (`vllm bench serve --max-concurrency`, GuideLLM's and AIPerf's
concurrency sweeps).

The analytic rounds (planner.engine.curves.closed_loop_features) keep the clients in step: every round's prompts
prefill in one burst and each request's TTFT is its place in that burst.  Under chunked prefill they do not stay in
step: the requests whose chunk ends first start decoding, finish one iteration earlier and come back earlier, so the
rounds smear out, and a request's TTFT ends with the step that finishes its own last chunk.  Here each iteration is
scheduled as vLLM's V1 scheduler does it: running sequences first (one decode token each), then prompt chunks of
admitted requests in arrival order within the token budget, then new requests while max_num_seqs and the KV cache
(whole prompt + output reserved) allow.  The step's time is the curve's (planner.latency.simulate.step_model: the
server's prefill scale and expert reads included); with asynchronous scheduling (vLLM >= 0.14) a request sent when
an iteration ends joins the one after next.  A request's first token comes at the end of the step that completes
its prompt, plus the server's front-end delay at the run's rate, as the analytic tier adds it.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from fleetfacts.specs import windowed_attention_len, windowed_tokens
from planner.engine.curves import CurveLike
from planner.latency.analytic import AnalyticAnswer, Rounds, analytic
from planner.latency.simulate import step_model

# A run longer than this many iterations is not simulated step by step (the analytic rounds answer instead).
MAX_STEPS = 2_000_000
# Requests per client a benchmark's closed loop sends unless told (`predict --closed-loop rounds` without
# --num-requests, the app's Pareto chart): four rounds, enough for the clients to fall out of step.
ROUNDS_PER_CLIENT = 4


@dataclass(frozen=True)
class ClosedLoopRun:
    """Per request TTFT and TPOT (s), and the run's wall time (s) and output tokens."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    duration_s: float
    output_tokens: int

    @property
    def output_tok_per_s(self) -> float:
        return self.output_tokens / self.duration_s if self.duration_s > 0 else math.nan


@dataclass
class _Request:
    sent: float
    eligible_step: int
    prompt_left: int
    made: int = 0
    first_token: float = math.nan


class _Loop:
    """The engine's state between iterations: clients' requests waiting, prefilling and decoding."""

    def __init__(self, curve: CurveLike, concurrency: int, requests: int, input_len: int, output_len: int) -> None:
        self.model = step_model(curve)
        self.lag = 2 if self.model.async_scheduling else 1
        self.input_len, self.output_len, self.requests = int(input_len), int(output_len), int(requests)
        self.per_request = math.ceil(windowed_tokens(self.input_len + self.output_len, *self.model.window))
        self.attention_len = windowed_attention_len(self.input_len, *self.model.window)  # what a prompt token attends
        clients = max(1, min(int(concurrency), self.requests))
        self.waiting: deque[_Request] = deque(_Request(0.0, 0, self.input_len) for _ in range(clients))
        self.prefilling: deque[_Request] = deque()
        self.decoding: list[_Request] = []
        self.sent, self.clock, self.step, self.reserved = clients, 0.0, 0, 0
        self.ttfts: list[float] = []
        self.tpots: list[float] = []

    def busy(self) -> bool:
        return bool(self.waiting or self.prefilling or self.decoding)

    def iterate(self) -> None:
        """One engine iteration: admit, schedule decodes then prompt chunks, advance the clock, emit tokens."""
        self._admit()
        chunks = self._chunks()
        if chunks or self.decoding:
            p = sum(take for _, take in chunks)
            ctx = sum(self.input_len + r.made for r in self.decoding)
            self.clock += self.model.step(len(self.decoding), float(ctx), float(p), float(p * self.attention_len))
        self.step += 1
        for r in [r for r in self.decoding if r.made + 1 >= self.output_len]:
            self.decoding.remove(r)
            self._finish(r)
        for r in self.decoding:
            r.made += 1
        for r, take in chunks:
            r.prompt_left -= take
            if r.prompt_left == 0:
                self.prefilling.remove(r)
                r.first_token, r.made = self.clock, 1
                self.ttfts.append(self.clock - r.sent)
                if self.output_len <= 1:
                    self._finish(r)
                else:
                    self.decoding.append(r)

    def _admit(self) -> None:
        """New requests, in order, while max_num_seqs and the KV cache (prompt + output reserved) allow."""
        m = self.model
        while self.waiting and self.waiting[0].eligible_step <= self.step \
                and len(self.prefilling) + len(self.decoding) < m.max_num_seqs \
                and self.reserved + self.per_request <= m.kv_cache_tokens:
            self.prefilling.append(self.waiting.popleft())
            self.reserved += self.per_request

    def _chunks(self) -> list[tuple[_Request, int]]:
        """Prompt chunks of admitted requests, in order, within the budget the decodes leave."""
        budget = self.model.prefill_budget - len(self.decoding)
        chunks = []
        for r in self.prefilling:
            if budget <= 0:
                break
            take = min(r.prompt_left, budget)
            chunks.append((r, take))
            budget -= take
        return chunks

    def _finish(self, r: _Request) -> None:
        """`r`'s last token: its TPOT, its KV back, and its client's next request."""
        self.reserved -= self.per_request
        out = self.output_len
        self.tpots.append((self.clock - r.first_token) / (out - 1) if out > 1 else math.nan)
        if self.sent < self.requests:
            self.waiting.append(_Request(self.clock, self.step + self.lag - 1, self.input_len))
            self.sent += 1


def simulate_closed_loop(curve: CurveLike, concurrency: int, requests: int, input_len: int, output_len: int
                         ) -> ClosedLoopRun:
    """`concurrency` clients sending `requests` requests of `input_len` / `output_len` tokens in all (see module);
    OverflowError past MAX_STEPS iterations."""
    loop = _Loop(curve, concurrency, requests, input_len, output_len)
    while loop.busy():
        if loop.step > MAX_STEPS:
            raise OverflowError("closed loop too long to simulate step by step")
        loop.iterate()
    return ClosedLoopRun(np.array(loop.ttfts), np.array(loop.tpots), loop.clock, loop.requests * loop.output_len)


def benchmark_rounds(input_len: float, output_len: float, concurrency: int, requests: int | None = None) -> Rounds:
    """The closed loop `predict --closed-loop rounds` runs: `requests` in all (default ROUNDS_PER_CLIENT per
    client)."""
    return Rounds(input_len, output_len, concurrency, requests or ROUNDS_PER_CLIENT * int(concurrency))


# The tier of a closed loop simulated request by request.
TIER_CLOSED_LOOP = "closed-loop simulated"


def rounds_answer(curve: CurveLike, load: Rounds) -> AnalyticAnswer:
    """A benchmark's closed loop: the simulated run's mean TTFT, TPOT and throughput; the analytic rounds' interval
    widths, provenance and notes (their answer where the run is too long to simulate)."""
    base = analytic(curve, load)
    try:
        run = simulate_closed_loop(curve, int(load.concurrency), int(load.requests), int(round(load.input_len)),
                                   int(round(load.output_len)))
    except OverflowError:
        return base
    front_end = getattr(curve, "front_end", None)
    rate = load.requests / run.duration_s if run.duration_s > 0 else 0.0
    delay = front_end.mean_delay_s(load.input_len, rate, load.output_len) if front_end is not None else 0.0
    ttft_ms = (float(np.mean(run.ttft_s)) + delay) * 1000
    tpot = run.tpot_s[np.isfinite(run.tpot_s)]
    tpot_ms = float(np.mean(tpot)) * 1000 if len(tpot) else math.nan
    old, tok_s = base.prediction, run.output_tok_per_s
    ratio = tok_s / old.output_tok_per_s if old.output_tok_per_s > 0 else 1.0
    e2e_ms = ttft_ms + (load.output_len - 1) * (tpot_ms if math.isfinite(tpot_ms) else 0.0)
    prediction = replace(old, output_tok_per_s=tok_s, low=old.low * ratio, high=old.high * ratio, ttft_ms=ttft_ms,
                         tpot_ms=tpot_ms, e2e_ms=e2e_ms)
    return AnalyticAnswer(prediction, load, TIER_CLOSED_LOOP)
