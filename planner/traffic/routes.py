"""A route, parsed once from a ROUTES row: its traffic, its SLO and its two length distributions.

`Route.from_row(row)` is the only reader of a ROUTES row's numbers; the
the sizing (planner.sizing.sizing), the simulator's request generator
(planner.traffic.workload) and the planner (planner.planning.plan) all take a `Route`.

`LengthDistribution` is one token-length distribution (a route's prompt or
output lengths) as the row gives it: a mean and optional p50 / p95 / p99.
Each consumer reads it its own way, from the same object:
- `at_percentile(p)`: the length at the SLO percentile (sizing);
- `cv2()`: squared CV under a lognormal fit (sizing's service-time variability);
- `sample(n, seed)`: draws from a piecewise inverse CDF through the
  quantiles whose mean matches the route's mean (the simulator).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from fleetfacts.schema import ROUTES, split_list
from fleetfacts.slo import DEFAULT_WINDOW_S, Targets

# Length percentile columns of the ROUTES schema, and the z-score of each tail under a lognormal.
LENGTH_PERCENTILES = (50, 95, 99)
Z_SCORES = {95: 1.6449, 99: 2.3263}
# Quantile levels of the ROUTES length columns, for the sampler's knots.
LENGTH_KNOTS = ((0.5, "p50"), (0.95, "p95"), (0.99, "p99"))
MIN_TOKENS = 1.0
# Quantiles within this many tokens of the mean count as equal to it (tables round lengths).
SAME_LENGTH_TOKENS = 0.5
# Largest top tail considered when matching a mean: this many times the last quantile.
MAX_TAIL_FACTOR = 1000.0
# Route columns that restrict which options (fitted curves) a route may use.
ALLOW_LISTS = ("engines", "gpus", "precisions", "tps", "configs")
HOURS_PER_DAY = 24


def _num(value: object, default: float = math.nan) -> float:
    """float(value), or `default` for a blank, NaN or non-numeric cell."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default
    return default if math.isnan(number) else number


# The schema's default SLO percentile, for a row that leaves the column out.
DEFAULT_SLO_PERCENTILE = _num(ROUTES.column("slo_percentile").default)


def _get(row: Any, name: str) -> Any:
    return row.get(name) if hasattr(row, "get") else None


def parse_diurnal(cell: object) -> tuple[float, ...] | None:
    """A `diurnal` cell: 24 ';'-separated rate multipliers (UTC hours 0-23), or None when blank.

    Raises ValueError naming what is wrong: not 24 numbers, a negative or non-finite one, or all zero.
    """
    if cell is None or (isinstance(cell, float) and math.isnan(cell)) or not str(cell).strip():
        return None
    items = [item.strip() for item in str(cell).split(";") if item.strip()]
    try:
        values = tuple(float(item) for item in items)
    except ValueError:
        raise ValueError(f"expected {HOURS_PER_DAY} numbers separated by ';', got {cell!r}") from None
    if len(values) != HOURS_PER_DAY:
        raise ValueError(f"expected {HOURS_PER_DAY} numbers (UTC hours 0-23) separated by ';', got {len(values)}")
    if not all(math.isfinite(v) and v >= 0 for v in values) or max(values) <= 0:
        raise ValueError("expected finite multipliers >= 0, at least one above 0")
    return values


# ---------------------------------------------------------------- SLO

@dataclass(frozen=True)
class Slo:
    """Latency targets in ms; None = no target on that metric."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    @classmethod
    def from_row(cls, row: Any) -> Slo:
        """The SLO columns of a ROUTES row (blank/NaN = none)."""
        def get(name: str) -> float | None:
            number = _num(_get(row, name))
            return None if math.isnan(number) else number
        return cls(get("ttft_slo_ms"), get("tpot_slo_ms"), get("e2e_slo_ms"))

    @property
    def empty(self) -> bool:
        return self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None

    def met(self, ttft_s: np.ndarray, tpot_s: np.ndarray, e2e_s: np.ndarray) -> np.ndarray:
        """Per request: does it meet every target?  NaN latency (rejected) never does; NaN TPOT (1 token) does."""
        return Targets(self.ttft_ms, self.tpot_ms, self.e2e_ms).met(ttft_s, tpot_s, e2e_s)

    def describe(self) -> str:
        parts = [f"{name} {value:g} ms" for name, value in
                 (("TTFT", self.ttft_ms), ("TPOT", self.tpot_ms), ("e2e", self.e2e_ms)) if value is not None]
        return ", ".join(parts) or "no SLO"


# ---------------------------------------------------------------- lengths

@dataclass(frozen=True)
class QuantileSampler:
    """A piecewise inverse CDF through (0, low), the route's quantiles and (1, high).

    Between knots the length is interpolated linearly, or geometrically
    (linear in log length) when `log_scale`: heavy-tailed length tables
    often have a mean below what linear segments between p50 and p95 imply.
    low (>= 1 token, <= p50) and high (>= the last quantile) are chosen so the
    distribution's mean equals the route's mean: linear segments when that
    works, else geometric ones; `mean_matched` says whether it worked (if not,
    the closest is used: low = 1, high = the last quantile).  Only a mean
    given, or every quantile equal to it: every request has that length.
    """

    levels: tuple[float, ...]
    values: tuple[float, ...]
    log_scale: bool
    mean_matched: bool

    @property
    def mean(self) -> float:
        return _knots_mean(self.levels, self.values, self.log_scale)

    def sample(self, n: int, seed: Any = 0) -> np.ndarray:
        """n whole token counts >= 1 (seed: an int or a numpy Generator)."""
        if len(self.levels) == 1:
            return np.full(n, max(1, round(self.values[0])), dtype=np.int64)
        u = np.random.default_rng(seed).uniform(0.0, 1.0, size=n)
        if self.log_scale:
            x = np.exp(np.interp(u, self.levels, np.log(self.values)))
        else:
            x = np.interp(u, self.levels, self.values)
        return np.maximum(1, np.rint(x)).astype(np.int64)


@dataclass(frozen=True)
class LengthDistribution:
    """Token lengths of a route's prompts or outputs: mean and p50 / p95 / p99 (NaN = not given)."""

    mean: float
    p50: float = math.nan
    p95: float = math.nan
    p99: float = math.nan

    @classmethod
    def from_row(cls, row: Any, prefix: str) -> LengthDistribution:
        """`{prefix}_mean` and `{prefix}_p50/p95/p99` of a ROUTES row (prefix input_len or output_len)."""
        return cls(_num(_get(row, f"{prefix}_mean")),
                   *(_num(_get(row, f"{prefix}_p{p}")) for p in LENGTH_PERCENTILES))

    def quantile(self, percentile: int) -> float:
        return float(getattr(self, f"p{percentile}"))

    def at_percentile(self, percentile: float) -> float:
        """The length at the SLO percentile: the first given quantile at or above it, else the mean.

        Never below the mean (a conservative choice for skewed length distributions).
        """
        for p in LENGTH_PERCENTILES:
            if p >= percentile and not math.isnan(self.quantile(p)):
                return max(self.mean, self.quantile(p))
        return self.mean

    def cv2(self) -> float | None:
        """Squared CV of the distribution assumed lognormal, from its median and tail or mean.

        sigma = ln(p95/p50)/1.645, ln(p99/p50)/2.326 or sqrt(2 ln(mean/p50)); the
        largest sigma given wins; cv^2 = exp(sigma^2) - 1.  None without a median.
        """
        median = self.p50
        if math.isnan(median):
            return None
        sigmas = [0.0]
        if self.mean > median:
            sigmas.append(math.sqrt(2.0 * math.log(self.mean / median)))
        for p, z in Z_SCORES.items():
            tail = self.quantile(p)
            if tail > median:
                sigmas.append(math.log(tail / median) / z)
        return math.expm1(max(sigmas) ** 2)

    @cached_property
    def sampler(self) -> QuantileSampler:
        """The inverse CDF the simulator draws from (see QuantileSampler).

        Fixed lengths (only a mean, or every quantile equal to it) are drawn as such.  Otherwise
        low = 1 token; high solved so the mean matches, with linear segments when
        the mean is at least their mean at high = the last quantile, else with
        geometric ones; a mean below even that is not matched (closest kept).
        """
        mean = self.mean
        knots = _monotone([(u, self.quantile(int(name[1:]))) for u, name in LENGTH_KNOTS
                           if math.isfinite(self.quantile(int(name[1:])))])
        if not knots or all(abs(x - mean) <= SAME_LENGTH_TOKENS for _, x in knots):
            return QuantileSampler((0.0,), (mean,), False, True)  # fixed lengths (every benchmark's shape)
        levels = (0.0, *(u for u, _ in knots), 1.0)
        inner = [max(MIN_TOKENS, x) for _, x in knots]
        low, top = min(MIN_TOKENS, inner[0]), inner[-1]
        log_scale = _knots_mean(levels, (low, *inner, top), False) > mean

        def mean_at(high: float) -> float:
            return _knots_mean(levels, (low, *inner, high), log_scale)
        if mean_at(top) > mean:
            return QuantileSampler(levels, (low, *inner, top), True, False)
        ceiling = top * MAX_TAIL_FACTOR
        high = _solve(mean_at, mean, top, ceiling) if mean_at(ceiling) >= mean else ceiling
        return QuantileSampler(levels, (low, *inner, high), log_scale, mean_at(ceiling) >= mean)

    @property
    def mean_matched(self) -> bool:
        return self.sampler.mean_matched

    def sample(self, n: int, seed: Any = 0) -> np.ndarray:
        """n whole token counts >= 1 drawn from `sampler` (seed: an int or a numpy Generator)."""
        return self.sampler.sample(n, seed)


def _monotone(knots: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Quantiles as given, each raised to at least the one before (a table may round them)."""
    out: list[tuple[float, float]] = []
    for u, x in knots:
        out.append((u, max(x, out[-1][1]) if out else x))
    return out


def _knots_mean(levels: Sequence[float], values: Sequence[float], log_scale: bool) -> float:
    """Mean of the piecewise (linear or geometric) quantile function through the knots."""
    if len(levels) == 1:
        return float(values[0])
    total = 0.0
    for j in range(len(levels) - 1):
        w, x0, x1 = levels[j + 1] - levels[j], values[j], values[j + 1]
        if log_scale and x1 > x0 > 0:
            total += w * (x1 - x0) / math.log(x1 / x0)
        else:
            total += w * (x0 + x1) / 2
    return total


def _solve(f: Callable[[float], float], target: float, low: float, high: float) -> float:
    """x in [low, high] with f(x) = target for increasing f (bisection, 60 halvings)."""
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if f(mid) < target else (low, mid)
    return (low + high) / 2


# ---------------------------------------------------------------- the route

@dataclass(frozen=True)
class Route:
    """One ROUTES row, parsed: traffic, lengths, SLO, update rate and which options it allows.

    Rates in requests/s; deadline in hours (NaN for an online route); slo_percentile
    in percent.  allow_lists: (column, cell as given: ';'-separated text or blank) of the allow-list columns.
    shared_prefix_tokens: prompt tokens every request starts with (0 = none declared).
    """

    name: str
    model: str
    traffic: str
    rate_rps: float
    peak_to_mean: float
    arrival_cv: float
    num_requests: int
    jobs_per_month: float
    deadline_hours: float
    input: LengthDistribution
    output: LengthDistribution
    slo: Slo
    slo_percentile: float
    updates_per_month: float
    log: str = ""
    slo_window_s: float = DEFAULT_WINDOW_S
    allow_lists: tuple[tuple[str, Any], ...] = ()
    diurnal: tuple[float, ...] | None = None
    shared_prefix_tokens: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Route:
        """Parse a ROUTES row (planner.planning.route_table.validate_routes checks its columns; a blank cell = not given)."""
        log = _get(row, "log")
        return cls(
            name=str(_get(row, "name") or ""), model=str(_get(row, "model") or ""),
            traffic=str(_get(row, "traffic") or ""), rate_rps=_num(_get(row, "rate_rps")),
            peak_to_mean=_num(_get(row, "peak_to_mean"), 1.0), arrival_cv=_num(_get(row, "arrival_cv"), 1.0),
            num_requests=int(_num(_get(row, "num_requests"), 0)),
            jobs_per_month=_num(_get(row, "jobs_per_month"), 0.0), deadline_hours=_num(_get(row, "deadline_hours")),
            input=LengthDistribution.from_row(row, "input_len"),
            output=LengthDistribution.from_row(row, "output_len"), slo=Slo.from_row(row),
            slo_percentile=_num(_get(row, "slo_percentile"), DEFAULT_SLO_PERCENTILE),
            updates_per_month=_num(_get(row, "model_updates_per_month"), 0.0),
            log=log if isinstance(log, str) else "",
            slo_window_s=_num(_get(row, "slo_window_s"), DEFAULT_WINDOW_S),
            allow_lists=tuple((c, _get(row, c)) for c in ALLOW_LISTS),
            diurnal=parse_diurnal(_get(row, "diurnal")),
            shared_prefix_tokens=int(_num(_get(row, "shared_prefix_tokens"), 0.0)),
        )

    def targets(self, attainment: float) -> Targets:
        """The route's SLO as the one verdict judges it (fleetfacts.slo), with the share of requests required."""
        return Targets(self.slo.ttft_ms, self.slo.tpot_ms, self.slo.e2e_ms, self.slo_percentile, self.slo_window_s,
                       attainment)

    @property
    def peak_rps(self) -> float:
        """The rate the fleet is sized for: mean rate x peak_to_mean, requests/s."""
        return self.rate_rps * self.peak_to_mean

    @property
    def input_len(self) -> float:
        """Mean prompt tokens."""
        return self.input.mean

    @property
    def output_len(self) -> float:
        """Mean output tokens."""
        return self.output.mean

    @cached_property
    def input_len_pct(self) -> float:
        """Prompt tokens at the SLO percentile (LengthDistribution.at_percentile)."""
        return self.input.at_percentile(self.slo_percentile)

    @cached_property
    def output_len_pct(self) -> float:
        """Output tokens at the SLO percentile."""
        return self.output.at_percentile(self.slo_percentile)

    def allowed(self, column: str) -> list[str]:
        """The items of an allow-list column (engines, gpus, precisions, tps, configs); [] = all allowed."""
        return split_list(dict(self.allow_lists).get(column))

    def allow_list_text(self, column: str) -> str:
        """The allow-list column as written in the routes file."""
        return f"{dict(self.allow_lists).get(column)}"
