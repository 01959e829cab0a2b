"""The Planning API: options per route, the cheapest feasible one, its runner-up and break-even.

    inputs = load_inputs()                       # bundled profiles (fitted), prices, engine-ops costs
    result = make_plan(routes_df, inputs, Assumptions())
    result.plan      # schema PLAN, one row per route
    result.options   # every evaluated option, feasible or not, with its reason
    write_plan(result, "plan.csv"); plan_df, assumptions = read_plan("plan.csv")

Expected outcomes (no profile for a model, no price for a GPU, an SLO nothing
meets) are rows with status "infeasible" and a reason, never exceptions.  A
malformed routes table raises InputError naming the line and the column.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetfacts.errors import InputError
from fleetfacts.schema import (
    DEFAULT_CONFIG,
    ENGINE_OPS,
    PLAN,
    PRICES,
    ROUTES,
    load_table,
    read_csv_text,
    split_list,
    unescape_formula,
    validate_frame,
    write_table,
)
from planner import costs, sizing
from planner.curves import NoCurveError, is_custom_config
from planner.queueing import QueueingError

log = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "data"
BUNDLED_PRICES = DATA_DIR / "prices.csv"
BUNDLED_OPS = DATA_DIR / "engine_ops.csv"
ASSUMPTIONS_PREFIX = "fleetplan-assumptions:"
SECONDS_PER_HOUR = 3600.0
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
    "slo_attainment": "share of simulated requests that must meet every SLO (planner.simulate check)",
    "batch_billing": "per-use = batch GPUs billed only while a job runs; always-on = reserved all month",
    "batch_billing_granularity_hours": "assumption: each job run billed in whole hours (0 = billed exactly)",
    "batch_efficiency": "assumption: share of a batch job's wall time spent at predicted throughput",
    "default_service_cv2": "assumption: service-time CV^2 when a route gives no output-length p50 "
                           "(1 = as variable as an exponential)",
}


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
    default_service_cv2: float = 1.0

    def __post_init__(self) -> None:
        _check_range("hours_per_month", self.hours_per_month, 0.0, 744.0, low_open=True)
        _check_range("engineer_usd_per_hour", self.engineer_usd_per_hour, 0.0, math.inf)
        _check_range("adoption_amortise_months", self.adoption_amortise_months, 0.0, math.inf)
        _check_range("utilisation_cap", self.utilisation_cap, 0.0, 1.0, low_open=True)
        _check_range("slo_attainment", self.slo_attainment, 0.0, 1.0, low_open=True)
        _check_range("batch_billing_granularity_hours", self.batch_billing_granularity_hours, 0.0, math.inf)
        _check_range("batch_efficiency", self.batch_efficiency, 0.0, 1.0, low_open=True)
        _check_range("default_service_cv2", self.default_service_cv2, 0.0, math.inf)
        if self.pricing_type not in PRICING_TYPES:
            raise InputError(f"pricing_type: expected one of {', '.join(PRICING_TYPES)}, got {self.pricing_type!r}")
        if self.batch_billing not in BATCH_BILLING:
            raise InputError(f"batch_billing: expected one of {', '.join(BATCH_BILLING)}, got {self.batch_billing!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Assumptions:
        """Rebuild from to_dict() output; unknown keys or wrong types raise InputError."""
        names = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise InputError(f"assumptions: unknown key(s) {', '.join(unknown)}; expected {', '.join(names)}")
        values = {}
        for key, value in data.items():
            values[key] = _coerce_assumption(key, value)
        return cls(**values)

    @property
    def policy(self) -> sizing.Policy:
        return sizing.Policy(self.utilisation_cap, self.batch_efficiency, self.default_service_cv2)

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
    if key in ("provider",):
        return None if value in (None, "") else str(value).strip().lower()
    if key in ("pricing_type", "batch_billing"):
        return str(value).strip().lower()
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"assumptions: {key} expected a number, got {value!r}") from None


# ---------------------------------------------------------------- inputs

@dataclass(frozen=True, eq=False)
class Inputs:
    """Fitted curves and the tables pricing uses (load once, plan many times)."""

    curves: dict
    prices_df: pd.DataFrame
    ops_df: pd.DataFrame
    profiles_df: pd.DataFrame

    @cached_property
    def price_book(self) -> costs.PriceBook:
        return costs.PriceBook(self.prices_df)

    @cached_property
    def ops_book(self) -> costs.OpsBook:
        return costs.OpsBook(self.ops_df)


def load_inputs(profiles_dir: str | Path | None = None, prices: str | Path | pd.DataFrame | None = None,
                ops: str | Path | pd.DataFrame | None = None) -> Inputs:
    """Load and fit profiles, and load prices and engine-ops tables (None = the bundled files).

    `prices` / `ops` may be a path or an already validated DataFrame.  Raises InputError.
    """
    from planner.curves import fit_curves, load_profiles

    profiles = load_profiles(profiles_dir)
    curves = fit_curves(profiles)
    log.info("fitted %d curves from %d profile rows", len(curves), len(profiles))
    return Inputs(curves, _table(prices, BUNDLED_PRICES, PRICES), _table(ops, BUNDLED_OPS, ENGINE_OPS), profiles)


def _table(value: str | Path | pd.DataFrame | None, bundled: Path, schema) -> pd.DataFrame:
    if isinstance(value, pd.DataFrame):
        return value
    path = Path(value) if value is not None else bundled
    if value is None and not path.exists():
        raise InputError(f"{path}: bundled {schema.name} table is missing from this checkout")
    return load_table(path, schema)


# ---------------------------------------------------------------- routes

def load_routes(path: str | Path) -> pd.DataFrame:
    """Load a ROUTES file and check the columns each traffic kind needs; raises InputError.

    `log` paths are resolved against the routes file's folder.
    """
    routes = validate_routes(load_table(path, ROUTES), str(path))
    base = Path(path).resolve().parent
    routes["log"] = [str(base / p) if p and not Path(p).is_absolute() else p for p in routes["log"]]
    return routes


def validate_routes(routes: pd.DataFrame, where: str = "routes") -> pd.DataFrame:
    """Schema-check a routes frame (typed or raw) plus per-traffic rules; returns the typed frame.

    Online routes need rate_rps and at least one latency SLO; batch routes need
    num_requests and deadline_hours; route names must be unique.
    """
    present = [c for c in routes.columns if c in ROUTES.names]
    cells = routes[present].astype(object)
    typed = validate_frame(cells.where(routes[present].notna(), None), ROUTES, where)
    seen: set[str] = set()
    for index, row in enumerate(typed.to_dict("records")):
        _check_route_row(row, f"{where}, line {index + 2}", seen)
    return typed


def _check_route_row(row: dict, at: str, seen: set[str]) -> None:
    if row["name"] in seen:
        raise InputError(f"{at}, column 'name': duplicate route name {row['name']!r}")
    seen.add(row["name"])
    needs = {"online": ("rate_rps",), "batch": ("num_requests", "deadline_hours")}[row["traffic"]]
    for column in needs:
        if pd.isna(row[column]):
            raise InputError(f"{at}, column {column!r}: a value is required for a {row['traffic']} route "
                             f"({ROUTES.column(column).doc})")
    slos = ("ttft_slo_ms", "tpot_slo_ms", "e2e_slo_ms")
    if row["traffic"] == "online" and all(pd.isna(row[c]) for c in slos):
        raise InputError(f"{at}, column 'ttft_slo_ms': an online route needs at least one latency SLO "
                         f"(ttft_slo_ms, tpot_slo_ms or e2e_slo_ms)")
    if row["slo_percentile"] >= 100:
        raise InputError(f"{at}, column 'slo_percentile': expected a percentile below 100, "
                         f"got {row['slo_percentile']!r}")
    for column in ("tps",):
        for item in split_list(row[column]):
            if not item.isdigit() or int(item) < 1:
                raise InputError(f"{at}, column {column!r}: expected whole numbers >= 1 separated by ';', "
                                 f"got {row[column]!r}")


# ---------------------------------------------------------------- planning

@dataclass(frozen=True, eq=False)
class PlanResult:
    """A plan: one row per route (schema PLAN), every evaluated option, and the assumptions used."""

    plan: pd.DataFrame
    options: pd.DataFrame
    assumptions: Assumptions


OPTION_COLUMNS = (
    "route", "option", "engine", "engine_version", "engine_config", "gpu", "precision", "tp", "replicas", "gpus",
    "operating_concurrency", "replica_output_tok_per_s", "replica_output_tok_per_s_low",
    "replica_output_tok_per_s_high", "ttft_pred_ms", "tpot_pred_ms", "e2e_pred_ms", "utilisation",
    "peak_utilisation", "job_hours", "usd_per_gpu_hour", "gpu_usd_per_month", "usd_per_update",
    "update_usd_per_month", "adoption_usd_per_month", "eng_usd_per_month", "fixed_usd_per_month",
    "total_usd_per_month", "usd_per_1m_output_tok", "feasible", "reason", "miss_ratio", "provenance",
    "price_source", "notes", "analytical_replicas", "sim_replicas", "sim_attainment",
)

# Simulation check: keep simulating the cheapest unchecked option until the SIM_CHECK_TOP cheapest
# (after re-pricing) are all simulated, at most SIM_CHECK_MAX per route (each simulates a few fleets).
# Route columns that restrict which options (fitted curves) a route may use.
ALLOW_LISTS = ("engines", "gpus", "precisions", "tps", "configs")
SIM_CHECK_TOP = 2
SIM_CHECK_MAX = 8


def make_plan(routes_df: pd.DataFrame, inputs: Inputs, assumptions: Assumptions | None = None,
              simulate: bool = False) -> PlanResult:
    """Plan every route: size each allowed option, price it, pick the cheapest feasible one.

    simulate: check the analytical replica count of the cheapest online options by
    simulating continuous batching on the route's traffic (planner.simulate), and
    correct it to the smallest fleet meeting every SLO for `slo_attainment` of
    requests; False keeps the analytical sizing (the fast what-if loop).
    Raises InputError only for a malformed routes table.
    """
    assumptions = assumptions or Assumptions()
    routes = validate_routes(routes_df)
    plan_rows, option_rows = [], []
    for row in routes.to_dict("records"):
        route = sizing.route_from_row(row)
        options = [_evaluate(route, row, curve, inputs, assumptions) for curve in _candidates(row, inputs)]
        if simulate and route.traffic == "online":
            _simulation_check(route, row, options, assumptions)
        elif simulate and route.traffic == "batch":
            _batch_simulation_check(route, row, options, assumptions)
        option_rows.extend(options)
        plan_rows.append(_plan_row(route, row, options, inputs))
    options_df = pd.DataFrame(option_rows, columns=list(OPTION_COLUMNS))
    plan_df = validate_frame(pd.DataFrame(plan_rows, columns=PLAN.names), PLAN, "plan")
    return PlanResult(plan_df, options_df, assumptions)


def _candidates(row: dict, inputs: Inputs) -> list:
    allowed = {name: split_list(row[name]) for name in ALLOW_LISTS}
    out = []
    for key, curve in inputs.curves.items():
        if key.model != row["model"]:
            continue
        if ((allowed["engines"] and key.engine not in allowed["engines"])
                or (allowed["gpus"] and key.gpu not in allowed["gpus"])
                or (allowed["precisions"] and key.precision not in allowed["precisions"])
                or (allowed["tps"] and str(key.tp) not in allowed["tps"])
                or (allowed["configs"] and (key.config or DEFAULT_CONFIG).lower() not in allowed["configs"])):
            continue
        out.append(curve)
    return out


def option_name(engine: str, engine_version: str, gpu: str, precision: str, tp: int,
                config: object = DEFAULT_CONFIG) -> str:
    """engine/version/gpu/precision/tpN[/config]: how an option is named in plans.

    The config is appended only when it is not the default (blank counts as default), so
    a tuned and a default profile of the same engine are two options with two names.
    """
    name = f"{engine}/{engine_version}/{gpu}/{precision}/tp{int(tp)}"
    return f"{name}/{config}" if is_custom_config(config) else name


def option_label(key) -> str:
    """The option name of a curve's GroupKey."""
    return option_name(key.engine, key.engine_version, key.gpu, key.precision, key.tp, key.config)


def plan_option(row: Mapping[str, Any]) -> str:
    """The option name of a PLAN row's recommendation (a plan without engine_config: the default)."""
    return option_name(row["engine"], row["engine_version"], row["gpu"], row["precision"], row["tp"],
                       row.get("engine_config", DEFAULT_CONFIG))


def _evaluate(route: sizing.Route, row: dict, curve, inputs: Inputs, a: Assumptions) -> dict[str, Any]:
    key = curve.key
    try:
        sized = sizing.size_route(curve, route, key.tp, a.policy)
    except (NoCurveError, QueueingError) as err:
        return {**_sizing_columns(route, key, sizing.unsized(str(err))), "feasible": False, "reason": str(err)}
    price = inputs.price_book.find(key.gpu, a.provider, a.pricing_type)
    option = _sizing_columns(route, key, sized)
    reason = sized.reason
    ops = None
    try:
        ops = inputs.ops_book.find(key.engine, key.engine_version)
    except costs.CostLookupError as err:
        reason = reason or str(err)
    if price is None:
        reason = reason or costs.no_price_reason(key.gpu, a.provider, a.pricing_type)
    if price is not None and ops is not None and sized.feasible:
        option.update(_cost_columns(route, sized, key.tp, price, ops, a))
    option.update(feasible=not reason, reason=reason, _curve=curve, _sized=sized, _price=price, _ops=ops)
    return option


def _simulation_check(route: sizing.Route, row: dict, options: list[dict[str, Any]], a: Assumptions) -> None:
    """Re-size the cheapest feasible online options by simulation; re-price them in place."""
    from planner import simulate as sim

    if sim.Slo.from_row(row).empty:
        return
    replay = _replayed_traffic(row)
    for _ in range(SIM_CHECK_MAX):
        unchecked = [o for o in _by_cost(options)[:SIM_CHECK_TOP] if "sim_attainment" not in o]
        if not unchecked:
            return  # the cheapest options (after re-pricing) have all been simulated
        _simulate_option(route, row, unchecked[0], a, replay)


def _replayed_traffic(row: dict) -> dict[str, Any]:
    """Arrivals and lengths of the route's request log (`log` column), or {} for synthetic traffic."""
    if not isinstance(row.get("log"), str) or not row["log"]:
        return {}
    from planner import traffic

    requests = traffic.read_log(row["log"], route=row["name"]).requests
    return {"arrivals": requests["t_s"].to_numpy(float),
            "lengths": (requests["input_len"].to_numpy(), requests["output_len"].to_numpy())}


def _batch_simulation_check(route: sizing.Route, row: dict, options: list[dict[str, Any]], a: Assumptions) -> None:
    """Re-size the cheapest batch options by simulating the whole job (all requests at t = 0)."""
    for _ in range(SIM_CHECK_MAX):
        unchecked = [o for o in _by_cost(options)[:SIM_CHECK_TOP] if "sim_replicas" not in o]
        if not unchecked:
            return
        _simulate_batch_option(route, row, unchecked[0], a)


def _simulate_batch_option(route: sizing.Route, row: dict, option: dict[str, Any], a: Assumptions) -> None:
    """cheapest_batch_fleet on lengths sampled from the route's quantiles; re-price with its makespan."""
    from dataclasses import replace

    from planner import simulate as sim

    gen = np.random.default_rng(0)
    lengths = (sim.length_sampler(row, "input_len").sample(route.num_requests, gen),
               sim.length_sampler(row, "output_len").sample(route.num_requests, gen))
    fleet = sim.cheapest_batch_fleet(option["_curve"], lengths, route.deadline_hours * SECONDS_PER_HOUR,
                                     option["usd_per_gpu_hour"], option["tp"], spot=a.pricing_type == "spot")
    option.update(analytical_replicas=option["replicas"], sim_replicas=fleet.replicas if fleet.feasible else math.nan)
    if not fleet.feasible:
        option.update(feasible=False, reason=f"simulation: {fleet.reason}")
        return
    hours = fleet.wall_s / SECONDS_PER_HOUR
    sized = replace(option["_sized"], replicas=fleet.replicas, gpus=fleet.replicas * option["tp"], job_hours=hours)
    option.update(replicas=sized.replicas, gpus=sized.gpus, job_hours=hours,
                  notes=_join(option["notes"], f"simulated job: {fleet.replicas} replicas finish in {hours:.2f} h "
                              f"(deadline {route.deadline_hours:g} h; analytical {option['analytical_replicas']} "
                              "replicas)"))
    option.update(_cost_columns(route, sized, option["tp"], option["_price"], option["_ops"], a))


def _by_cost(options: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((o for o in options if o["feasible"]), key=lambda o: o["total_usd_per_month"])


def _simulate_option(route: sizing.Route, row: dict, option: dict[str, Any], a: Assumptions,
                     replay: dict[str, Any]) -> None:
    """search_replicas from the analytical count; the option takes the simulated fleet and its cost."""
    from dataclasses import replace

    from planner import simulate as sim

    search = sim.search_replicas(row, option["_curve"], option["replicas"], attainment_target=a.slo_attainment,
                                 **replay)
    option.update(analytical_replicas=option["replicas"], sim_attainment=search.attainment)
    if not search.feasible:
        option.update(feasible=False, reason=f"simulation: no fleet up to {max(r for r, _ in search.tried)} "
                      f"replicas meets the SLOs for {a.slo_attainment:.0%} of requests "
                      f"(best {search.attainment:.1%})")
        return
    option["sim_replicas"] = search.replicas
    if not search.differs:
        return
    tp = option["tp"]
    sized = replace(option["_sized"], replicas=search.replicas, gpus=search.replicas * tp)
    option.update(replicas=sized.replicas, gpus=sized.gpus,
                  utilisation=option["utilisation"] * option["analytical_replicas"] / sized.replicas,
                  notes=_join(option["notes"], f"analytical sizing {option['analytical_replicas']} replicas, "
                              f"simulation {search.replicas} ({search.source})"))
    option.update(_cost_columns(route, sized, tp, option["_price"], option["_ops"], a))


def _join(*parts: object) -> str:
    return "; ".join(str(p) for p in parts if isinstance(p, str) and p)


def _sizing_columns(route: sizing.Route, key, s: sizing.Sizing) -> dict[str, Any]:
    return {
        "route": route.name, "option": option_label(key), "engine": key.engine,
        "engine_version": key.engine_version, "engine_config": key.config, "gpu": key.gpu,
        "precision": key.precision, "tp": key.tp,
        "replicas": s.replicas, "gpus": s.gpus, "operating_concurrency": s.concurrency,
        "replica_output_tok_per_s": s.replica_tok_s, "replica_output_tok_per_s_low": s.replica_tok_s_low,
        "replica_output_tok_per_s_high": s.replica_tok_s_high, "ttft_pred_ms": s.ttft_ms,
        "tpot_pred_ms": s.tpot_ms, "e2e_pred_ms": s.e2e_ms, "utilisation": s.utilisation,
        "peak_utilisation": s.peak_utilisation, "job_hours": s.job_hours, "miss_ratio": s.miss_ratio,
        "provenance": s.provenance, "notes": s.note,
        **{c: math.nan for c in ("usd_per_gpu_hour", "gpu_usd_per_month", "usd_per_update",
                                 "update_usd_per_month", "adoption_usd_per_month", "eng_usd_per_month",
                                 "fixed_usd_per_month", "total_usd_per_month", "usd_per_1m_output_tok")},
        "price_source": "",
    }


def _cost_columns(route: sizing.Route, s: sizing.Sizing, tp: int, price: costs.Price, ops: costs.EngineOps,
                  a: Assumptions) -> dict[str, Any]:
    gpu_usd = _gpu_cost(route, s, tp, price.usd_per_gpu_hour, a)
    eng = costs.engineering_cost(route.updates_per_month, ops, a.engineer_usd_per_hour, price.usd_per_gpu_hour,
                                 a.adoption_amortise_months)
    total = gpu_usd + eng.total
    tokens = _output_tokens_per_month(route, a)
    return {
        "usd_per_gpu_hour": price.usd_per_gpu_hour, "gpu_usd_per_month": gpu_usd,
        "usd_per_update": eng.usd_per_update, "update_usd_per_month": eng.update_usd_per_month,
        "adoption_usd_per_month": eng.adoption_usd_per_month, "eng_usd_per_month": eng.total,
        "fixed_usd_per_month": gpu_usd + eng.adoption_usd_per_month, "total_usd_per_month": total,
        "usd_per_1m_output_tok": total / tokens * 1e6 if tokens > 0 else math.nan,
        "price_source": price.label(),
    }


def _gpu_cost(route: sizing.Route, s: sizing.Sizing, tp: int, usd_per_gpu_hour: float, a: Assumptions) -> float:
    if route.traffic == "batch" and a.batch_billing == "per-use":
        hours = costs.batch_gpu_hours_per_month(s.replicas, tp, s.job_hours, route.jobs_per_month,
                                                a.batch_billing_granularity_hours)
        return hours * usd_per_gpu_hour
    return costs.gpu_usd_per_month(s.gpus, usd_per_gpu_hour, a.hours_per_month)


def _output_tokens_per_month(route: sizing.Route, a: Assumptions) -> float:
    if route.traffic == "batch":
        return route.num_requests * route.output_len * route.jobs_per_month
    return route.rate_rps * route.output_len * a.hours_per_month * SECONDS_PER_HOUR


# ---------------------------------------------------------------- choosing

def _plan_row(route: sizing.Route, row: dict, options: list[dict[str, Any]], inputs: Inputs) -> dict:
    base = {"route": route.name, "traffic": route.traffic}
    feasible = sorted((o for o in options if o["feasible"]),
                      key=lambda o: (o["total_usd_per_month"], o["gpus"], o["option"]))
    if not feasible:
        return {**base, "status": "infeasible", "notes": _infeasible_reason(route, row, options, inputs)}
    best = feasible[0]
    runner = next((o for o in feasible[1:] if (o["engine"], o["gpu"]) != (best["engine"], best["gpu"])), None)
    sim = {"sim_attainment": best.get("sim_attainment", math.nan), "sim_replicas": best.get("sim_replicas", math.nan)}
    return {**base, "status": "ok", **{c: best[c] for c in _COPIED}, **_runner_up_columns(best, runner), **sim,
            "notes": best["notes"]}


_COPIED = ("engine", "engine_version", "engine_config", "gpu", "precision", "tp", "replicas", "gpus",
           "operating_concurrency", "replica_output_tok_per_s", "replica_output_tok_per_s_low",
           "replica_output_tok_per_s_high", "ttft_pred_ms", "tpot_pred_ms", "e2e_pred_ms", "utilisation",
           "gpu_usd_per_month", "eng_usd_per_month", "total_usd_per_month", "usd_per_1m_output_tok", "provenance",
           "price_source")


def _runner_up_columns(best: dict[str, Any], runner: dict[str, Any] | None) -> dict[str, Any]:
    if runner is None:
        return {"runner_up": "", "runner_up_total_usd_per_month": math.nan, "savings_usd_per_month": math.nan,
                "breakeven_updates_per_month": math.nan}
    u = costs.breakeven_updates(best["fixed_usd_per_month"], best["usd_per_update"],
                                runner["fixed_usd_per_month"], runner["usd_per_update"])
    return {"runner_up": runner["option"], "runner_up_total_usd_per_month": runner["total_usd_per_month"],
            "savings_usd_per_month": runner["total_usd_per_month"] - best["total_usd_per_month"],
            "breakeven_updates_per_month": math.nan if u is None else u}


def _infeasible_reason(route: sizing.Route, row: dict, options: list[dict[str, Any]], inputs: Inputs) -> str:
    if not options:
        return _no_profile_reason(route, row, inputs)
    misses = [o for o in options if o["miss_ratio"] > 0]
    if misses:
        closest = min(misses, key=lambda o: o["miss_ratio"])
        return f"no option meets the SLOs; closest: {closest['option']} {closest['reason']}"
    reasons = sorted({o["reason"] for o in options})
    return "no feasible option: " + "; ".join(reasons)


def _no_profile_reason(route: sizing.Route, row: dict, inputs: Inputs) -> str:
    profiled = sorted({f"{k.engine}/{k.gpu}/{k.precision}/tp{k.tp}" for k in inputs.curves if k.model == route.model})
    if not profiled:
        return f"no profile for model {route.model} on any GPU"
    limits = ", ".join(f"{c}={row[c]}" for c in ALLOW_LISTS if split_list(row[c]))
    return (f"no profile for model {route.model} on any allowed GPU/engine ({limits}); "
            f"profiled: {', '.join(profiled)}")


# ---------------------------------------------------------------- plan files

def write_plan(result: PlanResult, path: str | Path) -> None:
    """Write the plan (schema PLAN), formula-safe, with the assumptions as the first line."""
    header = f"{ASSUMPTIONS_PREFIX} {json.dumps(result.assumptions.to_dict(), sort_keys=True)}"
    write_table(result.plan, path, PLAN, comments=[header])


def read_plan(path: str | Path) -> tuple[pd.DataFrame, Assumptions]:
    """Read a plan written by write_plan: (plan frame, assumptions).  Raises InputError."""
    path = Path(path)
    assumptions = _read_assumptions(path)
    frame = validate_frame(read_csv_text(path), PLAN, str(path))
    for column in PLAN.columns:
        if column.kind == "str":
            frame[column.name] = frame[column.name].map(unescape_formula)
    return frame, assumptions


def read_assumptions(path: str | Path) -> Assumptions:
    """Only the assumptions of a saved plan (to re-run it)."""
    return _read_assumptions(Path(path))


def _read_assumptions(path: Path) -> Assumptions:
    try:
        with open(path, encoding="utf-8") as handle:
            first = handle.readline().rstrip("\r\n")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (IsADirectoryError, UnicodeDecodeError):
        raise InputError(f"{path}: not a readable plan file") from None
    marker = f"# {ASSUMPTIONS_PREFIX}"
    if not first.startswith(marker):
        raise InputError(f"{path}, line 1: not a Fleetplan plan (expected '{marker} {{...}}')")
    try:
        data = json.loads(first[len(marker):])
    except json.JSONDecodeError as err:
        raise InputError(f"{path}, line 1: assumptions are not valid JSON ({err.msg})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}, line 1: assumptions must be a JSON object")
    return Assumptions.from_dict(data)
