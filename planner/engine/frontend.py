"""What an OpenAI-compatible server adds to the engine model: its front end, and its prefill speed.

The simulator (planner.latency.simulate) reproduces the engine's iterations.  A request
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
distribution: exponential waits put the p99 of chat at 33 req/s 2-5x too high),
and no longer than a load lasting the window can build (a queue needs its
relaxation time, service_s / (1 - sqrt(rho))^2, to reach that wait: a burst
does not).  Work beyond the front end's capacity queues as a fluid backlog
(per 50 ms bin), added to the delay: zero below capacity, growing for as long
as an overload lasts (a saturated front end: TTFT then grows with the run's
length; the steady-state mean_delay_s is infinite there).  T_i is what the
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
# Bins of the fluid backlog: the front end's work comes in engine-step lumps (5-60 ms), so a 50 ms bin holds a
# few, and a bin above capacity is an overload rather than one step's lump.
BACKLOG_BIN_S = 0.05
# At most this many backlog bins per replica: a sparse route's replay spans hours to days (a log with a year
# between two bursts: a year), and 50 ms bins over it cost memory and time as 1/rate (0.001 req/s: ~10 GB).  Past
# it the bins cover only the stretches where a request is in flight, each quiet stretch between them one bin
# (nothing to do there: the backlog drains), and widen only if those stretches alone need more.
MAX_BACKLOG_BINS = 200_000


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

    def delays_s(self, input_len: np.ndarray, load: StreamLoad) -> np.ndarray:
        """One delay per request (s) from what its replica's front end had just handled (`stream_load`).

        The wait is the queue's mean wait at the window's utilisation, up to what a load lasting
        LOAD_WINDOW_S can build (`relaxed_utilisation`), plus the backlog of work beyond the front end's
        capacity (a fluid queue over BACKLOG_BIN_S bins): zero below capacity, growing for as long as an
        overload lasts (then TTFT depends on how long the run is).
        """
        rho = self.per_request_s * load.request_rate + self.per_output_token_s * load.token_rate
        base = self.fixed_s + self.per_prompt_token_s * np.asarray(input_len, dtype=float)
        built = np.minimum(rho, self.relaxed_utilisation())
        return base + self.service_s * built / (1.0 - built) + self.backlog_s(load)

    def backlog_s(self, load: StreamLoad) -> np.ndarray:
        """Per request, the work (s) its front end still had queued when it arrived (Lindley, empty at start)."""
        if not load.bin_requests.size:
            return np.zeros(load.request_rate.shape)
        work = self.per_request_s * load.bin_requests + self.per_output_token_s * load.bin_tokens
        if not np.any(work > load.bin_s):
            return np.zeros(load.request_rate.shape)  # no bin above capacity: nothing ever queues
        surplus = np.cumsum(work - load.bin_s)
        queued = surplus - np.minimum.accumulate(np.minimum(surplus, 0.0))   # V_k = max(0, V_k-1 + work_k - bin)
        before = np.concatenate([[0.0], queued])                             # at the start of each bin
        return before[load.bin_of]

    def relaxed_utilisation(self) -> float:
        """The highest utilisation whose mean wait a load lasting LOAD_WINDOW_S can build.

        An M/M/1 queue reaches its mean wait in about its relaxation time service_s / (1 - sqrt(rho))^2
        (Morse 1955); above rho* = (1 - sqrt(service_s / window))^2 that exceeds the window, so a load
        above rho* for a window's time builds no more than the wait at rho*.
        """
        return (1.0 - math.sqrt(min(self.service_s / LOAD_WINDOW_S, 1.0))) ** 2

    def mean_delay_s(self, input_len: float, rate_rps: float, output_len_mean: float) -> float:
        """Delay (s) of a request with a prompt of `input_len` tokens in steady state (the analytic tier's): the
        simulator's delay (`delays_s`, the one model) on a load that has lasted at this rate; inf when saturated,
        where the simulated backlog grows without bound."""
        if self.utilisation(rate_rps, output_len_mean) >= 1.0:
            return math.inf
        load = StreamLoad.steady(np.array([float(rate_rps)]), np.array([float(rate_rps) * output_len_mean]))
        return float(self.delays_s(np.array([float(input_len)]), load)[0])

    def transferred(self, label: str) -> FrontEnd:
        """This model, labelled as borrowed by another option."""
        return replace(self, basis=f"transferred from {label}")


@dataclass(frozen=True)
class StreamLoad:
    """What one replica's front end handled around each request.

    request_rate, token_rate: per request, the requests/s it took and the tokens/s its engine streamed in
    the LOAD_WINDOW_S before the request arrived.  bin_requests, bin_tokens: the same counted per
    bin from the first arrival; bin_of: the bin each request arrived in.  bin_s: the bins' width (s),
    BACKLOG_BIN_S; over a long sparse span, one width per bin (MAX_BACKLOG_BINS).
    """

    request_rate: np.ndarray
    token_rate: np.ndarray
    bin_requests: np.ndarray
    bin_tokens: np.ndarray
    bin_of: np.ndarray
    bin_s: float | np.ndarray = BACKLOG_BIN_S

    @classmethod
    def steady(cls, request_rate: np.ndarray, token_rate: np.ndarray) -> StreamLoad:
        """Given rates, no backlog (nothing above capacity before): for checks and analytic uses."""
        rates = np.asarray(request_rate, dtype=float)
        return cls(rates, np.asarray(token_rate, dtype=float), np.zeros(0), np.zeros(0), np.zeros(rates.shape, int))


def stream_load(arrival_s: np.ndarray, first_token_s: np.ndarray, end_s: np.ndarray, output_len: np.ndarray,
                window_s: float = LOAD_WINDOW_S, bin_s: float = BACKLOG_BIN_S) -> StreamLoad:
    """The load one replica's front end met (StreamLoad) from its requests' arrivals and streams.

    Times are absolute seconds (NaN for requests never served, which stream nothing).  A request
    streams its first token at first_token_s and the other output_len - 1 evenly until end_s.
    """
    arrival = np.asarray(arrival_s, dtype=float)
    first, end = np.asarray(first_token_s, dtype=float), np.asarray(end_s, dtype=float)
    out = np.asarray(output_len, dtype=float)
    until = np.where(np.isfinite(end), end, arrival)  # in flight from its arrival until then
    served = np.isfinite(first) & np.isfinite(end)
    first, end, out = first[served], end[served], out[served]
    span = end - first
    rate = np.where(span > 0, (out - 1.0) / np.where(span > 0, span, 1.0), 0.0)
    firsts, ends = _Ramp(first, rate), _Ramp(end, rate)

    def streamed(x: np.ndarray) -> np.ndarray:
        return firsts.count(x) + firsts.ramp(x) - ends.ramp(x)

    ordered = np.sort(arrival)

    def arrived(x: np.ndarray) -> np.ndarray:
        return np.searchsorted(ordered, x, "left").astype(float)

    if not arrival.size:
        return StreamLoad.steady(np.zeros(0), np.zeros(0))
    start = float(ordered[0])
    rates = ((arrived(arrival) - arrived(arrival - window_s)) / window_s,
             (streamed(arrival) - streamed(arrival - window_s)) / window_s)
    if (float(ordered[-1]) - start) / MAX_BACKLOG_BINS > bin_s:
        edges = _busy_edges(arrival, until, bin_s)
        bin_of = np.minimum(np.searchsorted(edges, arrival, "right") - 1, edges.size - 2)
        return StreamLoad(*rates, _in_bins(edges, ordered), _streamed_in_bins(edges, first, end, rate), bin_of,
                          np.diff(edges))
    edges = start + bin_s * np.arange(int((float(ordered[-1]) - start) / bin_s) + 2)
    return StreamLoad(*rates, _in_bins(edges, ordered), _streamed_in_bins(edges, first, end, rate),
                      np.minimum(((arrival - start) / bin_s).astype(int), edges.size - 2), bin_s)


def _busy_edges(arrival: np.ndarray, until: np.ndarray, bin_s: float) -> np.ndarray:
    """Backlog bin edges from the first arrival to past the last: every bin_s over the stretches where a request
    is in flight (from its arrival to `until`, its end), each quiet stretch between them one bin; bin_s widened
    when those stretches need more than MAX_BACKLOG_BINS.  The cost grows with the requests, not the span: a year
    between two bursts is one bin."""
    order = np.argsort(arrival, kind="stable")
    start, last = float(arrival[order[0]]), float(arrival[order[-1]])
    t0 = arrival[order] - start
    t1 = np.clip(until[order], arrival[order], last) - start
    lo, hi = _busy_bins(t0, t1, bin_s)
    bins = int(np.sum(hi - lo + 1))
    if bins > MAX_BACKLOG_BINS:
        bin_s *= math.ceil(bins / MAX_BACKLOG_BINS)
        lo, hi = _busy_bins(t0, t1, bin_s)
    counts = hi - lo + 2  # each run's bins and the edge after them
    k = np.arange(int(counts.sum())) + np.repeat(lo - (np.cumsum(counts) - counts), counts)
    return start + bin_s * k


def _busy_bins(t0: np.ndarray, t1: np.ndarray, width: float) -> tuple[np.ndarray, np.ndarray]:
    """First and last bin of `width` of each run of bins in which some interval [t0, t1] lies (t0 sorted)."""
    lo = np.floor(t0 / width).astype(np.int64)
    hi = np.maximum.accumulate(np.floor(t1 / width).astype(np.int64))
    apart = lo[1:] > hi[:-1] + 1  # a quiet bin or more between them
    return lo[np.concatenate([[True], apart])], hi[np.concatenate([apart, [True]])]


# The per-bin figures are counted from the events' places among the edges (a bin per 50 ms far outnumbers the
# requests), each a difference of the cumulative counts and ramps stream_load evaluates at the arrivals.

def _in_bins(edges: np.ndarray, times: np.ndarray) -> np.ndarray:
    """How many of `times` fall in each bin [edges[k], edges[k+1])."""
    k = np.searchsorted(edges, times, "right") - 1
    return np.bincount(k[(k >= 0) & (k < edges.size - 1)], minlength=edges.size - 1).astype(float)


def _streamed_in_bins(edges: np.ndarray, first: np.ndarray, end: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """Tokens streamed in each bin: the first tokens in it, plus every stream's rate over its overlap with it.

    With A[m] the summed rate of the streams running at edge m, and a, b what starts (and ends, negated) at
    edge m, rate and rate x time: tokens in bin m = width x A[m] + edges[m+1] x a[m+1] - b[m+1].
    """
    k = np.searchsorted(edges, np.concatenate([first, end]), "left")  # the first edge at or after each event
    keep = k < edges.size
    k, signed = k[keep], np.concatenate([rate, -rate])[keep]
    times = np.concatenate([first, end])[keep]
    a = np.bincount(k, signed, minlength=edges.size)
    b = np.bincount(k, signed * times, minlength=edges.size)
    running = np.cumsum(a)
    return _in_bins(edges, first) + np.diff(edges) * running[:-1] + edges[1:] * a[1:] - b[1:]


class _Ramp:
    """sum over j with t_j <= x of rate_j * (x - t_j), and the count of t_j < x, for many x at once."""

    def __init__(self, times: np.ndarray, rate: np.ndarray) -> None:
        order = np.argsort(times)
        self.t = times[order]
        self.rate = np.concatenate([[0.0], np.cumsum(rate[order])])
        self.rate_t = np.concatenate([[0.0], np.cumsum(rate[order] * self.t)])

    def count(self, x: np.ndarray) -> np.ndarray:
        """How many t_j < x (so a window [x0, x1) holds the events at x0, not those at x1)."""
        return np.searchsorted(self.t, x, "left").astype(float)

    def ramp(self, x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self.t, x, "right")
        return x * self.rate[k] - self.rate_t[k]
