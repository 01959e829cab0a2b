"""What an OpenAI-compatible server adds to the engine model: its front end, and its prefill speed.

The simulator (planner.simulate) reproduces the engine's iterations.  A request
served through vLLM's OpenAI server also passes the API process: HTTP and
request parsing, hand-off to the engine process, and the first streamed chunk
back to the client.  That process is one event loop shared by every request and
every streamed token, so its delay grows with the tokens it streams.  On the
H200 (session 5) the server's own /metrics put 5-8 ms of a light-load TTFT and
40-70 ms of a 33-40 req/s chat TTFT outside the engine (client TTFT minus the
engine's queue + prefill time), while the scheduler queue stayed empty.

Model, per request i with a prompt of I tokens, arriving at a replica that in
the LOAD_WINDOW_S seconds before streamed T_i tokens/s and took R_i requests/s:

    rho_i   = per_request_s * R_i + per_output_token_s * T_i        (front-end utilisation)
    delay_i = fixed_s + per_prompt_token_s * I + service_s * rho_i / (1 - rho_i)

the mean wait of a queue with utilisation rho_i and mean service service_s,
given to each request as its delay (the H200 rows want a narrow delay
distribution: exponential waits put the p99 of chat at 33 req/s 2-5x too high).
rho_i >= 1 means the front end cannot keep up: infinite delay.  T_i is what the
engine really streamed (the simulated run), not the offered rate x output
length: a burst above the engine's capacity does not load the front end beyond
what the engine emits.

prefill_scale: the server's engine prefills at prefill_scale x the curve's cost
per prompt token.  The curve is fitted mostly on long offline batches, during
which the power-capped H200 ran at 1.63-1.78 GHz; under the server's open-loop
loads it ran at 1.7-1.98 GHz, and prefill is compute-bound (decode, memory-bound,
barely moves).  Fitted on the server rows' TPOT (planner.latency), where the
prefill riding along with decodes shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

# The names of FrontEnd's fitted delay parameters, in the order planner.latency fits them.
PARAMS = ("fixed_s", "per_prompt_token_s", "per_request_s", "per_output_token_s", "service_s")
# The load a request meets is what the front end did in the last 4 s: a queue's wait follows sustained load, not
# a burst's instant (an M/M/1 queue relaxes in ~service/(1 - sqrt(rho))^2: 0.5-4 s at the fitted 45 ms and
# rho 0.5-0.8).  Shorter windows (1-2 s) let a burst's peak blow the wait up (docs/latency-analysis.md).
LOAD_WINDOW_S = 4.0


@dataclass(frozen=True)
class FrontEnd:
    """A server's front-end delay model (seconds) and prefill speed; `basis` says where it comes from."""

    fixed_s: float
    per_prompt_token_s: float
    per_request_s: float
    per_output_token_s: float
    service_s: float
    prefill_scale: float = 1.0
    basis: str = "measured"   # "measured: N server rows of <group>" or "transferred from <group>"
    rel_error: float = 0.0    # relative error of the fit's TTFT percentiles (its residual scale)

    @classmethod
    def engine_only(cls, prefill_scale: float) -> FrontEnd:
        """The server's engine (its prefill speed) without any front-end delay: what the fits replay."""
        return cls(0.0, 0.0, 0.0, 0.0, 0.0, prefill_scale, "engine only")

    @property
    def adds_delay(self) -> bool:
        return any(getattr(self, name) > 0 for name in PARAMS)

    def utilisation(self, rate_rps: float, output_len_mean: float) -> float:
        """Steady-state share of the front end's time busy at `rate_rps` requests/s per replica."""
        return rate_rps * (self.per_request_s + self.per_output_token_s * output_len_mean)

    def delays_s(self, input_len: np.ndarray, request_rate: np.ndarray, token_rate: np.ndarray) -> np.ndarray:
        """One delay per request (s) from the requests/s and tokens/s its replica had just taken; inf when saturated."""
        rho = self.per_request_s * np.asarray(request_rate, float) + self.per_output_token_s * np.asarray(token_rate, float)
        base = self.fixed_s + self.per_prompt_token_s * np.asarray(input_len, dtype=float)
        with np.errstate(divide="ignore"):
            wait = np.where(rho < 1.0, self.service_s * rho / np.maximum(1.0 - rho, 1e-300), math.inf)
        return base + wait

    def mean_delay_s(self, input_len: float, rate_rps: float, output_len_mean: float) -> float:
        """Delay (s) of a request with a prompt of `input_len` tokens in steady state; inf when saturated."""
        rho = self.utilisation(rate_rps, output_len_mean)
        if rho >= 1.0:
            return math.inf
        return self.fixed_s + self.per_prompt_token_s * input_len + self.service_s * rho / (1.0 - rho)

    def transferred(self, label: str) -> FrontEnd:
        """This model, labelled as borrowed by another option."""
        return replace(self, basis=f"transferred from {label}")


def recent_load(arrival_s: np.ndarray, first_token_s: np.ndarray, end_s: np.ndarray, output_len: np.ndarray,
                window_s: float = LOAD_WINDOW_S) -> tuple[np.ndarray, np.ndarray]:
    """(requests/s, tokens/s) one replica took in the `window_s` seconds before each request arrived.

    Times are absolute seconds (NaN for requests never served, which stream nothing).  A request
    streams its first token at first_token_s and the other output_len - 1 evenly until end_s.
    """
    arrival = np.asarray(arrival_s, dtype=float)
    first, end = np.asarray(first_token_s, dtype=float), np.asarray(end_s, dtype=float)
    out = np.asarray(output_len, dtype=float)
    served = np.isfinite(first) & np.isfinite(end)
    first, end, out = first[served], end[served], out[served]
    span = end - first
    rate = np.where(span > 0, (out - 1.0) / np.where(span > 0, span, 1.0), 0.0)
    firsts = _Ramp(first, rate)
    ends = _Ramp(end, rate)

    def streamed(x: np.ndarray) -> np.ndarray:
        return firsts.count(x) + firsts.ramp(x) - ends.ramp(x)

    tokens = (streamed(arrival) - streamed(arrival - window_s)) / window_s
    ordered = np.sort(arrival)
    requests = (np.searchsorted(ordered, arrival, "left") - np.searchsorted(ordered, arrival - window_s, "left"))
    return requests / window_s, tokens


class _Ramp:
    """sum over j with t_j <= x of rate_j * (x - t_j), and the count of t_j <= x, for many x at once."""

    def __init__(self, times: np.ndarray, rate: np.ndarray) -> None:
        order = np.argsort(times)
        self.t = times[order]
        self.rate = np.concatenate([[0.0], np.cumsum(rate[order])])
        self.rate_t = np.concatenate([[0.0], np.cumsum(rate[order] * self.t)])

    def count(self, x: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.t, x, "right").astype(float)

    def ramp(self, x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self.t, x, "right")
        return x * self.rate[k] - self.rate_t[k]
