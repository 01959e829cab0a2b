"""Options: one fitted curve (engine, version, GPU, precision, TP, config) sized and priced for one route.

- naming: `option_name` (engine/version/gpu/precision/tpN[/config]), `option_label`
  (of a curve's GroupKey) and `plan_option` (of a PLAN row);
- construction: `evaluate_option` sizes a curve for a route (planner.sizing.sizing),
  prices it (planner.sizing.costs) and says why it is infeasible, if it is;
  `Option.resized` re-prices it for a fleet found by simulation;
- `Option.to_row()`: the option as a row of the options table (OPTION_COLUMNS).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fleetfacts.schema import DEFAULT_CONFIG
from fleetfacts.slo import SloCheck
from fleetfacts.specs import context_window
from planner.engine.curves import Curve, CurveLike, GroupKey, NoCurveError, is_custom_config, longest_held_context
from planner.latency import TIER_ANALYTIC, latency_basis
from planner.sizing import costs, sizing
from planner.sizing.assumptions import Assumptions
from planner.sizing.queueing import QueueingError
from planner.traffic.routes import Route

SECONDS_PER_HOUR = 3600.0

LATENCY_INTERVAL_COLUMNS = tuple(f"{m}_pred_ms_{end}" for m in ("ttft", "tpot", "e2e") for end in ("low", "high"))
OPTION_COLUMNS = (
    "route", "option", "engine", "engine_version", "engine_config", "gpu", "precision", "tp", "replicas", "gpus",
    "in_flight_p99", "replica_output_tok_per_s", "replica_output_tok_per_s_low",
    "replica_output_tok_per_s_high", "ttft_pred_ms", "tpot_pred_ms", "e2e_pred_ms", *LATENCY_INTERVAL_COLUMNS,
    "latency_tier", "utilisation",
    "peak_utilisation", "job_hours", "usd_per_gpu_hour", "gpu_usd_per_month", "usd_per_update",
    "update_usd_per_month", "adoption_usd_per_month", "eng_usd_per_month", "fixed_usd_per_month", "latency_basis",
    "total_usd_per_month", "usd_per_1m_output_tok", "feasible", "priced", "reason", "miss_ratio", "provenance",
    "data_source", "price_source", "notes", "sized_replicas", "sim_replicas", "sim_attainment",
)
# Columns of an option's simulation check: absent from its row until it has been simulated.
SIMULATION_COLUMNS = ("sized_replicas", "sim_replicas", "sim_attainment")


# ---------------------------------------------------------------- naming

def option_name(engine: str, engine_version: str, gpu: str, precision: str, tp: int,
                config: object = DEFAULT_CONFIG) -> str:
    """engine/version/gpu/precision/tpN[/config]: how an option is named in plans.

    The config is appended only when it is not the default (blank counts as default), so
    a tuned and a default profile of the same engine are two options with two names.
    """
    name = f"{engine}/{engine_version}/{gpu}/{precision}/tp{int(tp)}"
    return f"{name}/{config}" if is_custom_config(config) else name


def option_label(key: GroupKey) -> str:
    """The option name of a curve's GroupKey."""
    return option_name(key.engine, key.engine_version, key.gpu, key.precision, key.tp, key.config)


def plan_option(row: Mapping[str, Any]) -> str:
    """The option name of a PLAN row's recommendation (a plan without engine_config: the default)."""
    return option_name(row["engine"], row["engine_version"], row["gpu"], row["precision"], row["tp"],
                       row.get("engine_config", DEFAULT_CONFIG))


# ---------------------------------------------------------------- the option record

@dataclass(frozen=True)
class OptionCost:
    """What an option costs per month (USD), and the price it was computed from."""

    usd_per_gpu_hour: float
    gpu_usd_per_month: float
    usd_per_update: float
    update_usd_per_month: float
    adoption_usd_per_month: float
    eng_usd_per_month: float
    fixed_usd_per_month: float
    total_usd_per_month: float
    usd_per_1m_output_tok: float
    price_source: str


NO_COST = OptionCost(*(math.nan,) * 9, price_source="")


@dataclass(frozen=True)
class WholeLog:
    """The option sized as other planners size: the fewest replicas whose whole-run percentile meets the SLO
    (a window as long as the load), its $/month, and how many SLO windows that fleet breaks."""

    replicas: int
    usd_per_month: float
    windows_in_breach: int
    windows: int


@dataclass(frozen=True, eq=False)
class Option:
    """One curve sized (and, when it has a price and engine-ops row, priced) for one route.

    curve/price/ops: what it was built from (price/ops None when missing); cost: NO_COST
    when not priced.  utilisation and notes start as the sizing's and change when
    a simulation re-sizes the fleet; sized_replicas / sim_replicas /
    sim_attainment are set by that check (`simulated`).
    """

    route: Route
    key: GroupKey
    curve: CurveLike
    sizing: sizing.Sizing
    feasible: bool
    reason: str
    utilisation: float
    notes: str
    cost: OptionCost = NO_COST
    price: costs.Price | None = None
    ops: costs.EngineOps | None = None
    simulated: bool = False
    sized_replicas: float = math.nan
    sim_replicas: float = math.nan
    sim_attainment: float = math.nan
    whole_log: WholeLog | None = None
    # (replicas, verdict) of the fleets simulated around the chosen count: what the app's minute-by-minute shows.
    window_checks: tuple[tuple[int, SloCheck], ...] = ()
    # The router its fleet simulation sized it behind ('' until simulated: the plan's assumed router).
    router: str = ""

    @property
    def name(self) -> str:
        return option_label(self.key)

    @property
    def tp(self) -> int:
        return self.key.tp

    @property
    def data_source(self) -> str:
        """What the option's curve was fitted on: measured (by this project), published (vendor tables) or
        transferred (predicted from other models and GPUs)."""
        return str(getattr(self.curve, "source_provenance", "") or "")

    @property
    def latency_basis(self) -> str:
        """measured, transferred or unverified (planner.engine.curves.Curve.latency_basis)."""
        return latency_basis(self.curve)

    @property
    def replicas(self) -> int:
        return self.sizing.replicas

    @property
    def prefix_hit_rate(self) -> float:
        """Share of prompt tokens its simulated fleet found in the replicas' prefix caches (NaN: not simulated on
        its fleet, or a load without prefix structure)."""
        report = self.sizing.latency
        return report.prefix_hit_rate if self.simulated and report is not None else math.nan

    @property
    def total_usd_per_month(self) -> float:
        return self.cost.total_usd_per_month

    def resized(self, replicas: int, assumptions: Assumptions, notes: str, utilisation: float | None = None,
                job_hours: float | None = None) -> Option:
        """The option on `replicas` replicas (from a simulation), re-priced; utilisation / job hours if given."""
        changes: dict[str, Any] = {"replicas": replicas, "gpus": replicas * self.tp}
        if job_hours is not None:
            changes["job_hours"] = job_hours
        if utilisation is not None and self.utilisation > 0:
            changes["peak_utilisation"] = self.sizing.peak_utilisation * utilisation / self.utilisation
        sized = replace(self.sizing, **changes)
        assert self.price is not None and self.ops is not None  # only priced (feasible) options are simulated
        return replace(self, sizing=sized, notes=notes,
                       utilisation=self.utilisation if utilisation is None else utilisation,
                       cost=option_cost(self.route, sized, self.tp, self.price, self.ops, assumptions))

    def shared_columns(self) -> dict[str, Any]:
        """The columns an options row and a plan row recommending this option both carry (one field map): engine
        build, size, throughput, latency, utilisation, cost, basis and notes."""
        key, s, c = self.key, self.sizing, self.cost
        return {
            "engine": key.engine, "engine_version": key.engine_version, "engine_config": key.config, "gpu": key.gpu,
            "precision": key.precision, "tp": key.tp, "replicas": s.replicas, "gpus": s.gpus,
            "in_flight_p99": s.concurrency, "replica_output_tok_per_s": s.replica_tok_s,
            "replica_output_tok_per_s_low": s.replica_tok_s_low, "replica_output_tok_per_s_high": s.replica_tok_s_high,
            "ttft_pred_ms": s.ttft_ms, "tpot_pred_ms": s.tpot_ms, "e2e_pred_ms": s.e2e_ms,
            **latency_columns(self.route, s), "utilisation": self.utilisation,
            "gpu_usd_per_month": c.gpu_usd_per_month, "eng_usd_per_month": c.eng_usd_per_month,
            "total_usd_per_month": c.total_usd_per_month, "usd_per_1m_output_tok": c.usd_per_1m_output_tok,
            "provenance": s.provenance, "latency_basis": self.latency_basis, "price_source": c.price_source,
            "notes": self.notes,
        }

    def to_row(self) -> dict[str, Any]:
        """The option as a row of the options table (OPTION_COLUMNS; the simulation columns only once simulated)."""
        s, c = self.sizing, self.cost
        row: dict[str, Any] = {
            "route": self.route.name, "option": self.name, **self.shared_columns(),
            "peak_utilisation": s.peak_utilisation, "job_hours": s.job_hours, "miss_ratio": s.miss_ratio,
            "data_source": self.data_source, "usd_per_gpu_hour": c.usd_per_gpu_hour,
            "usd_per_update": c.usd_per_update, "update_usd_per_month": c.update_usd_per_month,
            "adoption_usd_per_month": c.adoption_usd_per_month, "fixed_usd_per_month": c.fixed_usd_per_month,
            "feasible": self.feasible, "priced": self.price is not None, "reason": self.reason,
        }
        if self.simulated:
            row.update(sized_replicas=self.sized_replicas, sim_replicas=self.sim_replicas,
                       sim_attainment=self.sim_attainment)
        return row


def latency_columns(route: Route, s: sizing.Sizing) -> dict[str, Any]:
    """The latency intervals and tier of a sizing (online: its latency report at the route's percentile;
    batch: the analytic offline means, whose interval is the throughput interval's)."""
    out: dict[str, Any] = dict.fromkeys(LATENCY_INTERVAL_COLUMNS, math.nan)
    if s.latency is not None:
        for metric in ("ttft", "tpot", "e2e"):
            low, high = s.latency.interval(metric, route.slo_percentile)
            out[f"{metric}_pred_ms_low"], out[f"{metric}_pred_ms_high"] = low, high
        out["latency_tier"] = s.latency.tier
        return out
    out["latency_tier"] = TIER_ANALYTIC if s.feasible and route.traffic == "batch" else ""
    if s.feasible and s.replica_tok_s > 0:
        slow, fast = s.replica_tok_s / s.replica_tok_s_low, s.replica_tok_s / s.replica_tok_s_high
        for metric, value in (("ttft", s.ttft_ms), ("tpot", s.tpot_ms), ("e2e", s.e2e_ms)):
            out[f"{metric}_pred_ms_low"], out[f"{metric}_pred_ms_high"] = value * fast, value * slow
    return out


# ---------------------------------------------------------------- construction

def context_reason(route: Route) -> str:
    """Why the route's requests cannot fit the model's context window ('' when they fit or it is unknown)."""
    known = context_window(route.model)
    if known is None:
        return ""
    window, source = known
    tokens = route.input_len_pct + route.output_len_pct
    if tokens <= window:
        return ""
    return (f"prompt + output at the route's p{route.slo_percentile:g} ({tokens:,.0f} tokens) exceed "
            f"{route.model}'s context window of {window:,} tokens (max_position_embeddings, {source})")


# The context a deployment must hold is taken at this percentile of prompt and output lengths.
CONTEXT_PERCENTILE = 99.0


def max_model_len(route: Route, log: sizing.LogRequests | None = None) -> int:
    """The route's p99 prompt + p99 output tokens (the longest given quantile, never below the mean), or the
    longest request of its log when that is longer: a server rejects every request past its context."""
    quantiles = math.ceil(route.input.at_percentile(CONTEXT_PERCENTILE) + route.output.at_percentile(CONTEXT_PERCENTILE))
    if log is None:
        return quantiles
    _, (inputs, outputs) = log
    return max(quantiles, int(np.max(inputs + outputs)))


def kv_reason(route: Route, curve: CurveLike, log: sizing.LogRequests | None = None) -> str:
    """Why one replica cannot serve the route's longest request ('' when its KV cache holds it): vLLM refuses to
    start when max_model_len exceeds the KV cache, and a request longer than the cache is never admitted."""
    needed, held = max_model_len(route, log), longest_held_context(curve)
    if needed <= held:
        return ""
    return (f"the route's longest request ({needed:,} tokens: max_model_len) does not fit one replica's KV cache "
            f"({held:,} tokens): a larger GPU, more TP or a smaller model")


def evaluate_option(route: Route, curve: Curve, price_book: costs.PriceBook, ops_book: costs.OpsBook,
                    assumptions: Assumptions, log: sizing.LogRequests | None = None,
                    uncached: float = 1.0) -> Option:
    """Size `curve` for `route` (replaying its request `log` where given; uncached: the share of prompt tokens a
    replica prefills, sizing.size_online), price it, and say why it is infeasible (reason '' when feasible)."""
    key = curve.key
    price = price_book.find(key.gpu, assumptions.provider, assumptions.pricing_type)
    try:
        too_long = context_reason(route) or kv_reason(route, curve, log)
        if too_long:
            raise NoCurveError(too_long)
        sized = sizing.size_route(curve, route, key.tp, assumptions.policy, log, uncached)
    except (NoCurveError, QueueingError) as err:
        unsized = sizing.unsized(str(err))
        return Option(route, key, curve, unsized, False, str(err), unsized.utilisation, unsized.note, price=price)
    reason = sized.reason
    ops = None
    try:
        ops = ops_book.find(key.engine, key.engine_version)
    except costs.CostLookupError as err:
        reason = reason or str(err)
    if price is None:
        reason = reason or costs.no_price_reason(key.gpu, assumptions.provider, assumptions.pricing_type)
    cost = NO_COST
    if price is not None and ops is not None and sized.feasible:
        cost = option_cost(route, sized, key.tp, price, ops, assumptions)
    return Option(route, key, curve, sized, not reason, reason, sized.utilisation, sized.note, cost, price, ops)


def option_cost(route: Route, s: sizing.Sizing, tp: int, price: costs.Price, ops: costs.EngineOps,
                a: Assumptions) -> OptionCost:
    """GPU and engineering cost per month of a sized option (see planner.sizing.costs)."""
    gpu_usd = _gpu_cost(route, s, tp, price.usd_per_gpu_hour, a)
    eng = costs.engineering_cost(route.updates_per_month, ops, a.engineer_usd_per_hour, price.usd_per_gpu_hour,
                                 a.adoption_amortise_months)
    total = gpu_usd + eng.total
    tokens = _output_tokens_per_month(route, a)
    return OptionCost(
        usd_per_gpu_hour=price.usd_per_gpu_hour, gpu_usd_per_month=gpu_usd, usd_per_update=eng.usd_per_update,
        update_usd_per_month=eng.update_usd_per_month, adoption_usd_per_month=eng.adoption_usd_per_month,
        eng_usd_per_month=eng.total, fixed_usd_per_month=gpu_usd + eng.adoption_usd_per_month,
        total_usd_per_month=total, usd_per_1m_output_tok=total / tokens * 1e6 if tokens > 0 else math.nan,
        price_source=price.label())


def _gpu_cost(route: Route, s: sizing.Sizing, tp: int, usd_per_gpu_hour: float, a: Assumptions) -> float:
    if route.traffic == "batch" and a.batch_billing == "per-use":
        hours = costs.batch_gpu_hours_per_month(s.replicas, tp, s.job_hours, route.jobs_per_month,
                                                a.batch_billing_granularity_hours)
        return hours * usd_per_gpu_hour
    return costs.gpu_usd_per_month(s.gpus, usd_per_gpu_hour, a.hours_per_month)


def _output_tokens_per_month(route: Route, a: Assumptions) -> float:
    if route.traffic == "batch":
        return route.num_requests * route.output_len * route.jobs_per_month
    return route.rate_rps * route.output_len * a.hours_per_month * SECONDS_PER_HOUR
