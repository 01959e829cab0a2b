"""The one SLO verdict: does a set of requests, simulated or measured, meet a route's SLO?

Semantics, stated once (the planner's sizing and checks, `planner simulate`, `fleet`, `measure verify` and the app
all judge with `judge`):

(a) **Every window.**  Requests are grouped by arrival into consecutive windows of `window_s` seconds counted from the
    first arrival (`window_s` 0: one window, the whole run).  In every window the `percentile` of TTFT and of TPOT
    must be within target.  A window with fewer requests than a percentile needs (1 / (1 - p): 20 for p95) is pooled
    with the window after it (the last with the one before), never skipped.  A request that was never served
    counts as an unbounded TTFT; a one-token request has no TPOT.
(b) **Attainment.**  The share of all judged requests within every target (TTFT, TPOT and end-to-end) is at least
    `attainment_target`.

The SLO holds when (a) and (b) do.  Requests arriving before `warmup_s` are served but not judged (a simulation's
empty start).  A served request named in `ttft_exempt` (one whose prompt cannot meet the TTFT target even alone on
an idle replica: planner.latency.idle) is left out of its window's TTFT percentile and passes TTFT in (b); it still
counts for TPOT, end-to-end latency and the rest of (b).  It lives here, beside the file schemas, because the planner and `measure` both judge with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# The SLO window when a route names none: the minute users feel (issue 34).
DEFAULT_WINDOW_S = 60.0


@dataclass(frozen=True)
class Targets:
    """A route's SLO: per-request targets (ms, None = none) at a percentile, judged per window."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    percentile: float = 95.0
    window_s: float = DEFAULT_WINDOW_S
    attainment: float = 0.99

    @property
    def empty(self) -> bool:
        return self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None

    def describe(self) -> str:
        """e.g. "p95 TTFT 300 ms, TPOT 30 ms in every 60 s window; 99% of requests within every target"."""
        parts = [f"{name} {value:g} ms" for name, value in (("TTFT", self.ttft_ms), ("TPOT", self.tpot_ms))
                 if value is not None]
        where = f"in every {self.window_s:g} s window" if self.window_s > 0 else "over the whole run"
        head = f"p{self.percentile:g} {', '.join(parts)} {where}; " if parts else ""
        e2e = f" (e2e {self.e2e_ms:g} ms)" if self.e2e_ms is not None else ""
        return f"{head}{self.attainment:.0%} of requests within every target{e2e}"

    def met(self, ttft_s: np.ndarray, tpot_s: np.ndarray, e2e_s: np.ndarray,
            ttft_exempt: np.ndarray | None = None) -> np.ndarray:
        """Per request: within every target?  Never served (NaN e2e) never is; no TPOT (one token) passes TPOT;
        ttft_exempt (per request, optional): passes TTFT."""
        ok = np.isfinite(e2e_s)
        with np.errstate(invalid="ignore"):
            if self.ttft_ms is not None:
                within = ttft_s * 1000.0 <= self.ttft_ms
                ok &= within if ttft_exempt is None else within | ttft_exempt
            if self.tpot_ms is not None:
                ok &= ~(tpot_s * 1000.0 > self.tpot_ms)
            if self.e2e_ms is not None:
                ok &= e2e_s * 1000.0 <= self.e2e_ms
        return ok


@dataclass(frozen=True, eq=False)
class SloCheck:
    """What `judge` found: per window (start, requests, TTFT and TPOT at the percentile, ms, breach), attainment."""

    targets: Targets
    start_s: np.ndarray
    end_s: np.ndarray
    requests: np.ndarray
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    breach: np.ndarray
    attainment: float

    @property
    def windows(self) -> int:
        return int(self.start_s.size)

    @property
    def windows_in_breach(self) -> int:
        return int(np.count_nonzero(self.breach))

    @property
    def holds_every_window(self) -> bool:
        return self.windows_in_breach == 0

    @property
    def meets_attainment(self) -> bool:
        return self.attainment >= self.targets.attainment

    @property
    def ok(self) -> bool:
        return self.holds_every_window and self.meets_attainment

    @property
    def worst_ttft_ms(self) -> float:
        return _max(self.ttft_ms)

    @property
    def worst_tpot_ms(self) -> float:
        return _max(self.tpot_ms)

    @property
    def worst_window(self) -> int:
        """Index of the window furthest over (or closest to) its targets; -1 when there is none."""
        if not self.windows:
            return -1
        return int(np.argmax(self._ratio()))

    @property
    def busiest_window(self) -> int:
        """Index of the window with the highest arrival rate; -1 when there is none."""
        if not self.windows:
            return -1
        return int(np.argmax(self.requests / np.maximum(self.end_s - self.start_s, 1e-9)))

    @property
    def busiest_window_start_s(self) -> float:
        i = self.busiest_window
        return float(self.start_s[i]) if i >= 0 else math.nan

    def _ratio(self) -> np.ndarray:
        t = self.targets
        ratios = [np.zeros(self.windows)]
        if t.ttft_ms is not None:
            ratios.append(np.nan_to_num(self.ttft_ms, nan=0.0) / t.ttft_ms)
        if t.tpot_ms is not None:
            ratios.append(np.nan_to_num(self.tpot_ms, nan=0.0) / t.tpot_ms)
        return np.max(np.vstack(ratios), axis=0)

    def window_lines(self) -> list[str]:
        """One line per window in breach: where it starts, its requests, what broke."""
        t = self.targets
        out = []
        for i in np.flatnonzero(self.breach):
            parts = []
            if t.ttft_ms is not None and self.ttft_ms[i] > t.ttft_ms:
                parts.append(f"TTFT p{t.percentile:g} {_ms(self.ttft_ms[i])} ms > {t.ttft_ms:g}")
            if t.tpot_ms is not None and self.tpot_ms[i] > t.tpot_ms:
                parts.append(f"TPOT p{t.percentile:g} {_ms(self.tpot_ms[i])} ms > {t.tpot_ms:g}")
            out.append(f"window {self.start_s[i]:.0f}-{self.end_s[i]:.0f} s ({int(self.requests[i])} requests): "
                       + ", ".join(parts))
        return out

    def describe(self) -> str:
        """One line: does it hold, in how many windows, the worst one, and the attainment."""
        t = self.targets
        span = f"{t.window_s:g} s window" if t.window_s > 0 else "whole-run window"
        within = f"{self.attainment:.1%} of requests within every target"
        if not self.windows:
            return "no requests judged"
        if self.holds_every_window:
            head = f"holds every {span} ({self.windows} of {self.windows})"
        else:
            w = self.worst_window
            head = (f"{self.windows_in_breach} of {self.windows} {span}s break the SLO (worst from "
                    f"{self.start_s[w]:.0f} s: TTFT p{t.percentile:g} {_ms(self.ttft_ms[w])} ms, "
                    f"TPOT p{t.percentile:g} {_ms(self.tpot_ms[w])} ms)")
        need = "" if self.meets_attainment else f" (< {t.attainment:.0%})"
        return f"{head}; {within}{need}"


def judge(arrival_s: np.ndarray, ttft_s: np.ndarray, tpot_s: np.ndarray, e2e_s: np.ndarray, targets: Targets,
          warmup_s: float = 0.0, origin_s: float | None = None, ttft_exempt: np.ndarray | None = None) -> SloCheck:
    """The verdict of the module doc on requests given as arrays (seconds; NaN TTFT/e2e = never served);
    origin_s: where the first window starts (default: the first judged arrival); ttft_exempt: per request, True
    where a served request's TTFT is not judged (module doc)."""
    t = np.asarray(arrival_s, dtype=float)
    judged = t >= warmup_s
    if not judged.any():
        judged = np.ones_like(judged)
    t, ttft, tpot, e2e = (np.asarray(a, dtype=float)[judged] for a in (arrival_s, ttft_s, tpot_s, e2e_s))
    order = np.argsort(t, kind="stable")
    t, ttft, tpot, e2e = t[order], ttft[order], tpot[order], e2e[order]
    exempt = None if ttft_exempt is None else np.asarray(ttft_exempt, dtype=bool)[judged][order] & np.isfinite(e2e)
    attainment = float(np.mean(targets.met(ttft, tpot, e2e, exempt))) if t.size else math.nan
    bounds = _windows(t, targets.window_s, min_window_requests(targets.percentile), origin_s)
    ttft_unbounded = np.where(np.isfinite(e2e) & np.isfinite(ttft), ttft, np.inf)
    if exempt is not None:
        ttft_unbounded[exempt] = np.nan  # not judged: a window of exempt requests only has no TTFT percentile
    starts, ends, counts, p_ttft, p_tpot = [], [], [], [], []
    for lo, hi, start, end in bounds:
        starts.append(start)
        ends.append(end)
        counts.append(hi - lo)
        p_ttft.append(_pct_ms(ttft_unbounded[lo:hi], targets.percentile))
        p_tpot.append(_pct_ms(tpot[lo:hi], targets.percentile))
    ttft_ms, tpot_ms = np.array(p_ttft, dtype=float), np.array(p_tpot, dtype=float)
    breach = np.zeros(ttft_ms.size, dtype=bool)
    if targets.ttft_ms is not None:
        breach |= ttft_ms > targets.ttft_ms  # NaN: no request's TTFT judged in the window
    if targets.tpot_ms is not None:
        breach |= tpot_ms > targets.tpot_ms
    return SloCheck(targets, np.array(starts, dtype=float), np.array(ends, dtype=float), np.array(counts),
                    ttft_ms, tpot_ms, breach, attainment)


def min_window_requests(percentile: float) -> int:
    """Fewest requests with a percentile above the largest value's neighbour: 1 / (1 - p)."""
    tail = max(1.0 - percentile / 100.0, 1e-6)
    return max(1, math.ceil(1.0 / tail - 1e-9))


def occupied_windows(t: np.ndarray, window_s: float, origin: float
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The windows [origin + k w, origin + (k + 1) w) that hold any of the sorted arrivals `t` (t[0] >= origin,
    window_s > 0): their indices k, each one's first and end index into t, and how many windows span t (the last
    takes every arrival from its start on).  Empty windows cost nothing: a log with a year between two requests
    has a handful of windows here, not half a million.  The edges are those of
    `origin + window_s * np.arange(count + 1)`, bit for bit."""
    count = max(1, math.floor((float(t[-1]) - origin) / window_s) + 1)
    guess = np.unique(np.floor((t - origin) / window_s).astype(np.int64))
    # An arrival within rounding of an edge may belong to the window beside its guess.
    k = np.unique(np.concatenate([guess - 1, guess, guess + 1]))
    k = k[(k >= 0) & (k < count)]
    first = np.searchsorted(t, origin + window_s * k, side="left")
    end = np.searchsorted(t, origin + window_s * (k + 1), side="left")
    end[k == count - 1] = t.size
    held = end > first
    return k[held], first[held], end[held], count


def _windows(t: np.ndarray, window_s: float, min_requests: int,
             origin_s: float | None = None) -> list[tuple[int, int, float, float]]:
    """(first index, end index, start s, end s) of each window of sorted arrivals `t` from `origin_s` (default
    its first arrival), small ones pooled.  Only windows holding requests are visited: an empty stretch joins the
    window after it (as a window with too few requests does), the last window ends where the last span does."""
    if not t.size:
        return []
    origin, last = float(t[0]) if origin_s is None else min(float(origin_s), float(t[0])), float(t[-1])
    if not window_s > 0:
        return [(0, t.size, origin, max(last, origin))]
    k, first, end, count = occupied_windows(t, window_s, origin)
    starts = origin + window_s * np.concatenate([[0], k[:-1] + 1])  # from the end of the window before
    ends = origin + window_s * (k + 1)
    pooled: list[list] = []
    carry: list | None = None
    for span in ([int(a), int(b), float(s), float(e)] for a, b, s, e in zip(first, end, starts, ends, strict=True)):
        if carry is not None:
            span = [carry[0], span[1], carry[2], span[3]]
            carry = None
        if span[1] - span[0] < min_requests:
            carry = span
            continue
        pooled.append(span)
    if carry is not None:
        if pooled:
            pooled[-1] = [pooled[-1][0], carry[1], pooled[-1][2], carry[3]]
        else:
            pooled.append(carry)
    pooled[-1][3] = float(origin + window_s * count)
    return [(a, b, s, e) for a, b, s, e in pooled]


def _pct_ms(values_s: np.ndarray, pct: float) -> float:
    """Percentile in ms of the finite-or-infinite values (NaN ignored); NaN when none."""
    v = values_s[~np.isnan(values_s)]
    if not v.size:
        return math.nan
    with np.errstate(invalid="ignore"):
        value = float(np.percentile(v, pct)) * 1000.0
    return math.inf if math.isnan(value) else value


def _max(values: np.ndarray) -> float:
    finite = values[~np.isnan(values)]
    return float(np.max(finite)) if finite.size else math.nan


def _ms(value: float) -> str:
    if math.isnan(value):
        return "not judged"
    if not math.isfinite(value):
        return "unbounded"
    return f"{value:.1f}" if abs(value) < 10 else f"{value:.0f}"
