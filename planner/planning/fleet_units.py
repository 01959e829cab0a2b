"""What the fleet optimiser assigns and what can serve it: each route's SLO tier, its units (the route, or with the
GPU-mix lever its length buckets, with their hourly rates) and, per unit and tier, the candidate deployments (a
curve, its price and its capacity).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import pandas as pd

from planner.engine.curves import Curve
from planner.planning.catalog import Catalog, candidate_curves
from planner.planning.fleet_check import Bucket
from planner.sizing import costs, sizing
from planner.sizing.assumptions import Assumptions
from planner.traffic.logs import diurnal_profile
from planner.traffic.routes import HOURS_PER_DAY, LengthDistribution, Route, Slo
from planner.traffic.workload import route_log

# GPU mix: prompts and outputs each split at this quantile of the route's lengths (4 buckets a route).
MIX_SPLIT_QUANTILE = 0.5
# Lengths drawn per route to form its buckets (their shares and length quantiles).
MIX_SAMPLE = 20_000
# Per unit and SLO tier, the candidates kept: the cheapest per unit of load (the program's size).
CANDIDATES_PER_TIER = 3
# assumption: cold start of an engine whose engine-ops row gives none (minutes).
COLD_START_MIN_UNKNOWN = 15.0


@dataclass(frozen=True)
class Levers:
    """What the fleet may do beyond the route-by-route plan (engineering is always counted once).

    share: routes of one model may share a deployment; mix: a route's length buckets may go to
    different GPUs/engines; autoscale: replicas follow each route's hourly profile; pricing: reserved
    GPUs for the base load, on-demand for the rest (online), spot for batch jobs.
    """

    share: bool = True
    mix: bool = False
    autoscale: bool = False
    pricing: bool = True

    def describe(self) -> str:
        on = [name for name in ("share", "mix", "autoscale", "pricing") if getattr(self, name)]
        return "+".join(on) or "none"


DEFAULT_LEVERS = Levers()
NO_LEVERS = Levers(share=False, mix=False, autoscale=False, pricing=False)
ALL_LEVERS = Levers(share=True, mix=True, autoscale=True, pricing=True)


@dataclass(frozen=True)
class Tier:
    """The SLO a shared deployment holds for every request it serves."""

    slo: Slo
    percentile: float

    def admits(self, route: Route) -> bool:
        """Does holding this tier meet the route's own SLO (every target as strict, percentile as high)?"""
        if self.percentile < route.slo_percentile:
            return False
        pairs = ((self.slo.ttft_ms, route.slo.ttft_ms), (self.slo.tpot_ms, route.slo.tpot_ms),
                 (self.slo.e2e_ms, route.slo.e2e_ms))
        return all(mine is not None and mine <= theirs for mine, theirs in pairs if theirs is not None)

    def label(self) -> str:
        return f"p{self.percentile:g} {self.slo.describe()}"


def _strictest(routes: Iterable[Route]) -> Tier:
    routes = list(routes)

    def least(values: Iterable[float | None]) -> float | None:
        given = [v for v in values if v is not None]
        return min(given) if given else None
    slo = Slo(least(r.slo.ttft_ms for r in routes), least(r.slo.tpot_ms for r in routes),
              least(r.slo.e2e_ms for r in routes))
    return Tier(slo, max(r.slo_percentile for r in routes))


def own_tier(route: Route) -> Tier:
    return Tier(route.slo, route.slo_percentile)


@dataclass(frozen=True, eq=False)
class Unit:
    """A route's traffic, or one length bucket of it: `share` of its requests, `rps` in each period."""

    route: Route
    bucket: Bucket
    share: float
    sized: Route  # the unit as a route: its lengths and share of the rate (for the closed-form capacity)
    rps: np.ndarray

    @property
    def label(self) -> str:
        return f"{self.route.name}[{self.bucket.label()}]" if not self.bucket.whole else self.route.name


def hourly_multipliers(route: Route) -> np.ndarray:
    """24 rate multipliers scaled so the busiest hour is 1: the route's `diurnal`, else its log's hourly
    profile when the log spans a day, else flat."""
    profile = route.diurnal if route.diurnal is not None else _log_profile(route.log, route.name)
    if profile is None:
        return np.ones(HOURS_PER_DAY)
    values = np.asarray(profile, dtype=float)
    return values / values.max()


@lru_cache(maxsize=64)
def _log_profile(path: str, name: str) -> tuple[float, ...] | None:
    """The hourly profile of route `name`'s rows of its log (route_log), None without a log."""
    log_ = route_log(Route.from_row({"name": name, "log": path}))
    if log_ is None:
        return None
    t = log_.requests["t_s"].to_numpy(float)
    return diurnal_profile(t, log_.start, log_.span_s)


def period_rates(route: Route, periods: int) -> np.ndarray:
    """The route's request rate in each period: its peak (rate x peak_to_mean) shaped by its hourly
    profile (24 periods), or the peak (one period, always-on)."""
    if periods == 1:
        return np.array([route.peak_rps])
    return route.peak_rps * hourly_multipliers(route)


def route_units(route: Route, mix: bool, periods: int) -> list[Unit]:
    """The route as one unit; with the mix, also up to four bucket units (prompts and outputs split at their
    medians), which the program may serve instead of the whole route (`_assignment_rows`)."""
    rates = period_rates(route, periods)
    whole = Unit(route, Bucket(), 1.0, route, rates)
    if not mix:
        return [whole]
    buckets = _buckets(route, rates)
    return [whole, *buckets] if len(buckets) > 1 else [whole]


def _buckets(route: Route, rates: np.ndarray) -> list[Unit]:
    gen = np.random.default_rng(0)
    inp, out = route.input.sample(MIX_SAMPLE, gen), route.output.sample(MIX_SAMPLE, gen)
    cut_in, cut_out = (float(np.quantile(v, MIX_SPLIT_QUANTILE)) for v in (inp, out))
    in_ranges = [(0.0, cut_in), (cut_in, math.inf)] if inp.max() > cut_in else [(0.0, math.inf)]
    out_ranges = [(0.0, cut_out), (cut_out, math.inf)] if out.max() > cut_out else [(0.0, math.inf)]
    units = []
    for in_low, in_high in in_ranges:
        for out_low, out_high in out_ranges:
            bucket = Bucket(in_low, in_high, out_low, out_high)
            mine = bucket.holds(inp, out)
            share = float(mine.mean())
            if share > 0:
                sized = replace(route, rate_rps=route.rate_rps * share, input=_lengths(inp[mine]),
                                output=_lengths(out[mine]))
                units.append(Unit(route, bucket, share, sized, rates * share))
    return units


def _lengths(sample: np.ndarray) -> LengthDistribution:
    p50, p95, p99 = (float(np.percentile(sample, p)) for p in (50, 95, 99))
    return LengthDistribution(float(sample.mean()), p50, p95, p99)


@dataclass(frozen=True, eq=False)
class Candidate:
    """A fitted curve serving one model at one SLO tier (owner: the one route it serves when not shared)."""

    curve: Curve
    tier: Tier
    owner: str
    peak: costs.Price
    base: costs.Price | None
    ops: costs.EngineOps
    cold_start_min: float

    @property
    def tp(self) -> int:
        return self.curve.key.tp


def _capacity_rps(curve: Curve, unit: Unit, tier: Tier, policy: sizing.Policy) -> float:
    """Requests/s one replica serves of the unit's requests within the tier's SLOs and the utilisation cap
    (0 = cannot): the rate at which the latency door says its latency meets them (the plan's sizing model)."""
    route = replace(unit.sized, slo=tier.slo, slo_percentile=tier.percentile)
    return sizing.sustainable_rps(curve, route, policy)


def _prices(catalog: Catalog, gpu: str, a: Assumptions, levers: Levers) -> tuple[costs.Price | None,
                                                                                  costs.Price | None]:
    """(price of the varying part, price of the reserved base or None): with the pricing lever on-demand
    and reserved (when it is cheaper), else the assumptions' pricing type for all of it."""
    book = catalog.price_book
    if not levers.pricing:
        return book.find(gpu, a.provider, a.pricing_type), None
    peak = book.find(gpu, a.provider, "on-demand")
    base = book.find(gpu, a.provider, "reserved")
    if peak is None:
        return base, None
    return peak, base if base is not None and base.usd_per_gpu_hour < peak.usd_per_gpu_hour else None


def _cold_start_min(ops_df: pd.DataFrame, ops: costs.EngineOps) -> float:
    rows = ops_df[(ops_df["engine"] == ops.engine) & (ops_df["versions"].fillna("").astype(str) == ops.versions)]
    value = float(rows["cold_start_min"].iloc[0]) if len(rows) else math.nan
    return COLD_START_MIN_UNKNOWN if math.isnan(value) else value


def _usable(curve: Curve, route: Route, a: Assumptions) -> bool:
    return a.allow_unverified_latency or curve.has_latency or getattr(curve, "latency_basis", "") == "transferred"


def candidate_loads(units: list[Unit], catalog: Catalog, a: Assumptions, levers: Levers
                    ) -> tuple[list[Candidate], dict[tuple[int, int], np.ndarray]]:
    """Candidates and the load each unit puts on each, in replicas per period (unit k, candidate j)."""
    tiers = _tiers(units, levers)
    candidates: dict[tuple, Candidate] = {}
    loads: dict[tuple[int, int], np.ndarray] = {}
    index: dict[tuple, int] = {}
    for k, unit in enumerate(units):
        curves = _route_curves(unit.route, catalog, a)
        scored = []
        for tier in tiers[(unit.route.model, unit.route.name if not levers.share else "")]:
            if not tier.admits(unit.route):
                continue
            per_tier = []
            for curve in curves:
                candidate = _candidate(curve, tier, "" if levers.share else unit.route.name, catalog, a, levers)
                if candidate is None:
                    continue
                mu = _capacity_rps(curve, unit, tier, a.policy)
                if mu > 0:
                    load = unit.rps / mu   # mu is within the utilisation cap already
                    per_tier.append((float(load.max()) * candidate.tp * _unit_price(candidate), candidate, load))
            per_tier.sort(key=lambda item: item[0])
            scored += per_tier[:CANDIDATES_PER_TIER]
        for _, candidate, load in scored:
            key = (candidate.curve.key, candidate.tier, candidate.owner)
            if key not in index:
                index[key] = len(index)
                candidates[key] = candidate
            loads[(k, index[key])] = load
    return list(candidates.values()), loads


def _unit_price(c: Candidate) -> float:
    return min(c.peak.usd_per_gpu_hour, c.base.usd_per_gpu_hour if c.base else math.inf)


def _tiers(units: list[Unit], levers: Levers) -> dict[tuple[str, str], list[Tier]]:
    """Per (model, owner): the SLO tiers candidates are built at (shared: each route's own SLO and the
    strictest of the model's routes; not shared: the route's own)."""
    out: dict[tuple[str, str], list[Tier]] = {}
    routes = {u.route.name: u.route for u in units}
    for route in routes.values():
        if not levers.share:
            out[(route.model, route.name)] = [own_tier(route)]
            continue
        same = [r for r in routes.values() if r.model == route.model]
        tiers = out.setdefault((route.model, ""), [])
        for tier in (own_tier(route), _strictest(same)):
            if tier not in tiers:
                tiers.append(tier)
    return out


def _route_curves(route: Route, catalog: Catalog, a: Assumptions) -> list[Curve]:
    curves = candidate_curves(route, catalog, a.allow_prerelease)[0]
    verified = [c for c in curves if _usable(c, route, a)]
    return verified or curves


def _candidate(curve: Curve, tier: Tier, owner: str, catalog: Catalog, a: Assumptions,
               levers: Levers) -> Candidate | None:
    key = curve.key
    peak, base = _prices(catalog, key.gpu, a, levers)
    if peak is None:
        return None
    try:
        ops = catalog.ops_book.find(key.engine, key.engine_version)
    except costs.CostLookupError:
        return None
    return Candidate(curve, tier, owner, peak, base, ops, _cold_start_min(catalog.ops_df, ops))
