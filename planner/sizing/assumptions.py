"""Everything a plan assumes that is not in a data file (hours per month, engineering rate, policy, ...).

`Assumptions` travels with the plan: written beside a plan file (plan.assumptions.json) by
planner.planning.plan_files.write_plan and read back by read_plan.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from fleetfacts.errors import InputError
from fleetfacts.schema import PRICES
from planner.engine.transfer_physics import HOST_LOAD_GB_PER_S
from planner.latency import DEFAULT_ROUTER, ROUTERS
from planner.sizing import sizing
from planner.sizing.autoscaled import DEFAULT_SCALE_UP_S

BATCH_BILLING = ("per-use", "always-on")
PRICING_TYPES = PRICES.column("pricing_type").choices

# What each assumption means; shown with the plan so nobody mistakes a default for a fact.
ASSUMPTION_NOTES = {
    "hours_per_month": "8760 h / 12 months",
    "engineer_usd_per_hour": "assumption: set your loaded engineering rate",
    "provider": "None = the cheapest provider listed for each GPU",
    "pricing_type": "on-demand, reserved or spot price rows",
    "adoption_amortise_months": "one-time engine adoption hours spread over this many months (0 = not counted)",
    "utilisation_cap": "assumption: no replica planned above this peak utilisation (fit error, load shifts)",
    "slo_attainment": "share of simulated requests that must meet every SLO (planner.latency.simulate check)",
    "batch_billing": "per-use = batch GPUs billed only while a job runs; always-on = reserved all month",
    "batch_billing_granularity_hours": "assumption: each job run billed in whole hours (0 = billed exactly)",
    "batch_efficiency": "assumption: share of a batch job's wall time spent at predicted throughput",
    "allow_prerelease": "False = pre-release and development engine builds (0.20+main, 1.0rc1, ...) are not "
                        "recommended; their profiles still show in charts",
    "router": "assumption: the load balancer in front of each route's replicas (least-outstanding or "
              "round-robin); the fleet simulation that sizes online routes routes by it, and `deploy` writes it",
    "scale_up_s": "assumption: seconds from a load rise until an added replica serves (30 s detection + the "
                  "130 s vLLM start, above the 82-116 s recorded on the H200); the autoscaled option's reaction time",
    "allow_unverified_latency": "False = for online routes, options with no latency measurement behind them "
                                "(measured or transferred) rank behind those with one",
    "host_kv_gib": "assumption: GiB of host memory per replica a KV tier may use behind the prefix "
                   "cache (vLLM --kv-offloading-size; host memory of the GPU's node, no extra price); routes with "
                   "prefix structure are also priced with it and keep it where it is cheaper (the tier measured once, "
                   "on an H100: docs/traffic.md). 0 = none",
    "host_gb_per_s": "host-to-GPU GB/s a host-tier KV hit comes back at (default: measured once on an H100 "
                     "with vLLM 0.26.0's native CPU offloading, the cost of writing blocks out included)",
}


# Assumptions that plans written earlier carry but nothing uses any more: read and ignored.
# default_service_cv2 set the service-time variability of the G/G/c sizing, gone since online routes are
# sized on the simulated latency (planner.latency).
RETIRED = frozenset({"default_service_cv2"})


@dataclass(frozen=True)
class Assumptions:
    """Everything a plan assumes that is not in a data file; travels with the plan."""

    hours_per_month: float = 730.0
    engineer_usd_per_hour: float = 100.0
    provider: str | None = None
    pricing_type: str = "on-demand"
    adoption_amortise_months: float = 12.0
    utilisation_cap: float = 0.95
    slo_attainment: float = 0.99
    batch_billing: str = "per-use"
    batch_billing_granularity_hours: float = 1.0
    batch_efficiency: float = 0.9
    allow_prerelease: bool = False
    allow_unverified_latency: bool = False
    router: str = DEFAULT_ROUTER
    scale_up_s: float = DEFAULT_SCALE_UP_S
    host_kv_gib: float = 0.0
    host_gb_per_s: float = HOST_LOAD_GB_PER_S

    def __post_init__(self) -> None:
        _check_range("scale_up_s", self.scale_up_s, 0.0, 86400.0)
        _check_range("host_kv_gib", self.host_kv_gib, 0.0, 1e6)
        _check_range("host_gb_per_s", self.host_gb_per_s, 0.0, 1e4, low_open=True)
        _check_range("hours_per_month", self.hours_per_month, 0.0, 744.0, low_open=True)
        _check_range("engineer_usd_per_hour", self.engineer_usd_per_hour, 0.0, math.inf)
        _check_range("adoption_amortise_months", self.adoption_amortise_months, 0.0, math.inf)
        _check_range("utilisation_cap", self.utilisation_cap, 0.0, 1.0, low_open=True)
        _check_range("slo_attainment", self.slo_attainment, 0.0, 1.0, low_open=True)
        _check_range("batch_billing_granularity_hours", self.batch_billing_granularity_hours, 0.0, math.inf)
        _check_range("batch_efficiency", self.batch_efficiency, 0.0, 1.0, low_open=True)
        if self.pricing_type not in PRICING_TYPES:
            raise InputError(f"pricing_type: expected one of {', '.join(PRICING_TYPES)}, got {self.pricing_type!r}")
        if self.router not in ROUTERS:
            raise InputError(f"router: expected one of {', '.join(ROUTERS)}, got {self.router!r}")
        if self.batch_billing not in BATCH_BILLING:
            raise InputError(f"batch_billing: expected one of {', '.join(BATCH_BILLING)}, got {self.batch_billing!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Assumptions:
        """Rebuild from to_dict() output; unknown keys or wrong types raise InputError."""
        names = {f.name: f for f in dataclasses.fields(cls)}
        data = {k: v for k, v in data.items() if k not in RETIRED}
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise InputError(f"assumptions: unknown key(s) {', '.join(unknown)}; expected {', '.join(names)}")
        values = {}
        for key, value in data.items():
            values[key] = _coerce_assumption(key, value)
        return cls(**values)

    @property
    def policy(self) -> sizing.Policy:
        return sizing.Policy(self.utilisation_cap, self.batch_efficiency)

    def describe(self) -> list[tuple[str, Any, str]]:
        """(name, value, what it means) for display beside a plan."""
        return [(name, value, ASSUMPTION_NOTES.get(name, "")) for name, value in self.to_dict().items()]


def _check_range(name: str, value: float, low: float, high: float, low_open: bool = False) -> None:
    ok = isinstance(value, (int, float)) and math.isfinite(value) and (value > low if low_open else value >= low)
    if not ok or value > high:
        bound = f"> {low:g}" if low_open else f">= {low:g}"
        upper = f" and <= {high:g}" if math.isfinite(high) else ""
        raise InputError(f"{name}: expected a number {bound}{upper}, got {value!r}")


def _coerce_assumption(key: str, value: Any) -> Any:
    if key in ("allow_unverified_latency", "allow_prerelease"):
        if isinstance(value, bool) or str(value).strip().lower() in ("true", "false", "1", "0"):
            return value if isinstance(value, bool) else str(value).strip().lower() in ("true", "1")
        raise InputError(f"assumptions: {key} expected true or false, got {value!r}")
    if key in ("provider",):
        return None if value in (None, "") else str(value).strip().lower()
    if key in ("pricing_type", "batch_billing", "router"):
        return str(value).strip().lower()
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"assumptions: {key} expected a number, got {value!r}") from None
