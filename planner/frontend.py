"""What an OpenAI-compatible server adds to the engine's TTFT: its front end.

The simulator (planner.simulate) reproduces the engine's iterations.  A request
served through vLLM's OpenAI server also passes the API process: HTTP and
request parsing, hand-off to the engine process, and the first streamed chunk
back.  That process is one event loop shared by every request and every
streamed token, so its delay grows with load.  On the H200 (session 5) the
server's own TTFT metric was 3-23 ms below what clients measured, and the
engine-side prefill time grew with load while the scheduler queue stayed
empty: the gap is load, not queueing for the engine.

Model, per request with a prompt of I tokens, on a replica taking lambda
requests/s of mean output O tokens:

    delay = fixed_s + per_prompt_token_s * I + W
    rho   = lambda * (per_request_s + per_output_token_s * O)     (front-end utilisation)
    W     = 0 with probability 1 - rho, else exponential with mean service_s / (1 - rho)

W is the waiting time of an M/M/1 queue with utilisation rho and mean service
service_s; rho >= 1 means the front end cannot keep up (infinite delay).  The
parameters are fitted on a group's open-loop server rows (planner.latency).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# The names of FrontEnd's fitted parameters, in the order planner.latency fits them.
PARAMS = ("fixed_s", "per_prompt_token_s", "per_request_s", "per_output_token_s", "service_s")


@dataclass(frozen=True)
class FrontEnd:
    """A server's front-end delay model (seconds); `basis` says where it comes from."""

    fixed_s: float
    per_prompt_token_s: float
    per_request_s: float
    per_output_token_s: float
    service_s: float
    basis: str = "measured"   # "measured: N server rows of <group>" or "transferred from <group>"
    rel_error: float = 0.0    # relative error of the fit's TTFT percentiles (its residual scale)

    def utilisation(self, rate_rps: float, output_len_mean: float) -> float:
        """Share of the front end's time busy at `rate_rps` requests/s per replica."""
        return rate_rps * (self.per_request_s + self.per_output_token_s * output_len_mean)

    def delays_s(self, input_len: np.ndarray, rate_rps: float, output_len_mean: float,
                 uniform: np.ndarray) -> np.ndarray:
        """One delay per request (s), drawn with the given uniforms in [0, 1); inf when saturated."""
        rho = self.utilisation(rate_rps, output_len_mean)
        base = self.fixed_s + self.per_prompt_token_s * np.asarray(input_len, dtype=float)
        if rho >= 1.0:
            return np.full(base.shape, math.inf)
        waiting = uniform >= 1.0 - rho
        tail = np.clip((1.0 - uniform) / max(rho, 1e-300), 1e-300, 1.0)
        return base + np.where(waiting, -np.log(tail) * self.service_s / (1.0 - rho), 0.0)

    def mean_delay_s(self, input_len: float, rate_rps: float, output_len_mean: float) -> float:
        """Mean delay (s) of a request with a prompt of `input_len` tokens; inf when saturated."""
        rho = self.utilisation(rate_rps, output_len_mean)
        if rho >= 1.0:
            return math.inf
        return self.fixed_s + self.per_prompt_token_s * input_len + rho * self.service_s / (1.0 - rho)

    def transferred(self, label: str) -> FrontEnd:
        """This model, labelled as borrowed by another option."""
        return FrontEnd(self.fixed_s, self.per_prompt_token_s, self.per_request_s, self.per_output_token_s,
                        self.service_s, f"transferred from {label}", self.rel_error)
