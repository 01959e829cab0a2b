"""Monthly cost of an option: GPU rental plus the engineering cost of model updates.

Pure functions over the PRICES and ENGINE_OPS tables (fleetfacts/schema.py):

    GPU $/month (always-on)  = gpus * usd_per_gpu_hour * hours_per_month
    GPU $/month (batch, per-use) = replicas * tp * billed_hours_per_job * jobs_per_month * usd_per_gpu_hour
    update $/month           = updates/month * (engineer_hours_per_update * engineer_usd_per_hour
                                                + build_gpu_hours_per_update * usd_per_gpu_hour)
    adoption $/month         = adoption_hours * engineer_usd_per_hour / adoption_amortise_months

Totals are linear in the update rate u, A(u) = fixed + per_update * u, which is
what the break-even between two options is computed from.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from fleetfacts.errors import FleetplanError

log = logging.getLogger(__name__)


class CostLookupError(FleetplanError, LookupError):
    """No price or engine-operations row applies; the message says what was looked for."""


@dataclass(frozen=True)
class Price:
    """One GPU's hourly price and where it comes from."""

    gpu: str
    provider: str
    pricing_type: str
    usd_per_gpu_hour: float
    source: str
    date: str

    def label(self) -> str:
        return f"{self.provider} {self.pricing_type} ${self.usd_per_gpu_hour:g}/GPU-h ({self.source}, {self.date})"


@dataclass(frozen=True)
class EngineOps:
    """What a model update costs on one engine version (a row of ENGINE_OPS)."""

    engine: str
    versions: str
    engineer_hours_per_update: float
    build_gpu_hours_per_update: float
    adoption_hours: float
    source: str


@dataclass(frozen=True)
class EngineeringCost:
    """Engineering $/month split into the part that scales with updates and the amortised adoption."""

    usd_per_update: float
    update_usd_per_month: float
    adoption_usd_per_month: float

    @property
    def total(self) -> float:
        return self.update_usd_per_month + self.adoption_usd_per_month


# ---------------------------------------------------------------- lookups

def find_price(prices: pd.DataFrame, gpu: str, provider: str | None = None,
               pricing_type: str = "on-demand") -> Price | None:
    """The price of `gpu` (cheapest provider when `provider` is None); None when there is none."""
    rows = prices[(prices["gpu"] == gpu) & (prices["pricing_type"] == pricing_type)]
    if provider is not None:
        rows = rows[rows["provider"] == provider]
    if rows.empty:
        return None
    row = rows.loc[rows["usd_per_gpu_hour"].idxmin()]
    return Price(str(row.gpu), str(row.provider), str(row.pricing_type), float(row.usd_per_gpu_hour),
                 str(row.source), str(row.date))


def no_price_reason(gpu: str, provider: str | None, pricing_type: str) -> str:
    """The infeasibility reason for an option whose GPU has no price."""
    where = f" from {provider}" if provider else ""
    return f"no price for gpu {gpu}{where} ({pricing_type})"


def find_engine_ops(ops: pd.DataFrame, engine: str, engine_version: str) -> EngineOps:
    """The ENGINE_OPS row for `engine` whose PEP 440 `versions` specifier admits `engine_version`.

    An empty specifier matches every version; the most specific (non-empty)
    matching row wins.  Raises CostLookupError when no row applies.
    """
    rows = ops[ops["engine"] == engine]
    matching = [row for _, row in rows.iterrows() if _version_matches(str(row["versions"]), engine_version)]
    release = _release(engine_version)
    if not matching and release != engine_version:
        # PEP 440 puts 1.2.0rc1 below '>=1.2' and outside '<1.2': a pre-release is costed as its release.
        matching = [row for _, row in rows.iterrows() if _version_matches(str(row["versions"]), release)]
    if not matching:
        known = ", ".join(f"{r.engine} {r.versions or '(any)'}" for _, r in ops.iterrows()) or "none"
        raise CostLookupError(f"no engine-ops row for {engine} {engine_version} (rows: {known})")
    row = sorted(matching, key=lambda r: str(r["versions"]).strip() == "")[0]
    return EngineOps(str(row.engine), str(row.versions), float(row.engineer_hours_per_update),
                     float(row.build_gpu_hours_per_update), _zero_if_nan(row.adoption_hours), str(row.source))


def _version_matches(spec: str, version: str) -> bool:
    spec = spec.strip()
    if not spec:
        return True
    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except InvalidSpecifier:
        log.warning("engine-ops versions %r is not a PEP 440 specifier; row ignored", spec)
        return False
    except InvalidVersion:
        return False


def _release(version: str) -> str:
    try:
        return Version(version).base_version
    except InvalidVersion:
        return version


def _zero_if_nan(value: Any) -> float:
    number = float(value) if value is not None else 0.0
    return 0.0 if math.isnan(number) else number


class PriceBook:
    """Prices indexed once for fast lookups (a plan looks up every option's GPU)."""

    def __init__(self, prices: pd.DataFrame) -> None:
        self._rows: dict[tuple[str, str], list[Price]] = {}
        for row in prices.itertuples(index=False):
            price = Price(str(row.gpu), str(row.provider), str(row.pricing_type), float(row.usd_per_gpu_hour),
                          str(row.source), str(row.date))
            self._rows.setdefault((price.gpu, price.pricing_type), []).append(price)

    def find(self, gpu: str, provider: str | None = None, pricing_type: str = "on-demand") -> Price | None:
        """Like find_price: cheapest matching price, or None."""
        rows = [p for p in self._rows.get((gpu, pricing_type), []) if provider is None or p.provider == provider]
        return min(rows, key=lambda p: p.usd_per_gpu_hour) if rows else None


class OpsBook:
    """Engine-ops rows with memoised (engine, version) lookups."""

    def __init__(self, ops: pd.DataFrame) -> None:
        self._ops = ops
        self._memo: dict[tuple[str, str], EngineOps | CostLookupError] = {}

    def find(self, engine: str, engine_version: str) -> EngineOps:
        """Like find_engine_ops; raises CostLookupError."""
        key = (engine, engine_version)
        if key not in self._memo:
            try:
                self._memo[key] = find_engine_ops(self._ops, engine, engine_version)
            except CostLookupError as err:
                self._memo[key] = err
        found = self._memo[key]
        if isinstance(found, CostLookupError):
            raise found
        return found


# ---------------------------------------------------------------- GPU cost

def gpu_usd_per_month(gpus: int, usd_per_gpu_hour: float, hours_per_month: float) -> float:
    """Always-on GPUs: gpus * $/GPU-hour * hours/month."""
    return gpus * usd_per_gpu_hour * hours_per_month


def billed_hours(hours: float, granularity_hours: float) -> float:
    """Hours rounded up to the billing granularity (0 = billed exactly)."""
    if granularity_hours <= 0:
        return hours
    return math.ceil(hours / granularity_hours - 1e-9) * granularity_hours


def batch_gpu_hours_per_month(replicas: int, tp: int, job_hours: float, jobs_per_month: float,
                              granularity_hours: float) -> float:
    """GPU-hours a batch route uses per month when billed per use (each job run rounded up)."""
    return replicas * tp * billed_hours(job_hours, granularity_hours) * jobs_per_month


# ---------------------------------------------------------------- engineering cost

def engineering_cost(updates_per_month: float, ops: EngineOps, engineer_usd_per_hour: float,
                     usd_per_gpu_hour: float, adoption_amortise_months: float) -> EngineeringCost:
    """Engineering $/month of model updates plus amortised adoption (0 when amortise_months is 0)."""
    per_update = (ops.engineer_hours_per_update * engineer_usd_per_hour
                  + ops.build_gpu_hours_per_update * usd_per_gpu_hour)
    adoption = (ops.adoption_hours * engineer_usd_per_hour / adoption_amortise_months
                if adoption_amortise_months > 0 else 0.0)
    return EngineeringCost(per_update, updates_per_month * per_update, adoption)


# ---------------------------------------------------------------- break-even

def breakeven_updates(fixed_a: float, per_update_a: float, fixed_b: float, per_update_b: float) -> float | None:
    """Updates/month u* where A(u) = fixed_a + per_update_a*u equals B(u); None if never (u* <= 0 or parallel)."""
    slope = per_update_a - per_update_b
    if slope == 0:
        return None
    u = (fixed_b - fixed_a) / slope
    return u if math.isfinite(u) and u > 0 else None


def monthly_total_vs_updates(options_row: pd.Series | dict, updates: np.ndarray | list[float]) -> np.ndarray:
    """An option's total $/month as a function of model updates/month (for break-even charts).

    `options_row` is a row of PlanResult.options: it needs `fixed_usd_per_month`
    (GPU + amortised adoption) and `usd_per_update`.
    """
    u = np.asarray(updates, dtype=float)
    return float(options_row["fixed_usd_per_month"]) + float(options_row["usd_per_update"]) * u
