"""The Planning API: options per route, the cheapest feasible one, its runner-up and break-even.

    catalog = load_inputs()                      # bundled profiles (fitted), prices, engine-ops costs
    result = make_plan(routes_df, catalog, Assumptions())
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
    Schema,
    load_table,
    read_csv_text,
    split_list,
    unescape_formula,
    validate_frame,
    write_table,
)
from planner import costs, simulate
from planner.assumptions import Assumptions
from planner.curves import BUNDLED_PROFILES_DIR, Curve, GroupKey, fit_curves, load_profiles
from planner.latency import with_server_latency
from planner.options import OPTION_COLUMNS, Option, evaluate_option
from planner.routes import ALLOW_LISTS, Route
from planner.workload import route_log_requests

log = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "data"
BUNDLED_PRICES = DATA_DIR / "prices.csv"
BUNDLED_OPS = DATA_DIR / "engine_ops.csv"
ASSUMPTIONS_PREFIX = "fleetplan-assumptions:"
SECONDS_PER_HOUR = 3600.0
__all__ = ["Catalog", "PlanResult", "load_inputs", "load_routes", "make_plan", "read_assumptions", "read_plan",
           "validate_routes", "write_plan"]

# ---------------------------------------------------------------- catalog

@dataclass(frozen=True, eq=False)
class Catalog:
    """What the planner chooses from and prices with: fitted curves, prices, engine-ops costs (load once).

    profiles_df: the profile rows the curves were fitted to.
    """

    curves: dict[GroupKey, Curve]
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
                ops: str | Path | pd.DataFrame | None = None) -> Catalog:
    """Load and fit profiles, and load prices and engine-ops tables (None = the bundled files).

    `prices` / `ops` may be a path or an already validated DataFrame.  Raises InputError.
    """
    profiles = load_profiles(profiles_dir)
    curves = with_server_latency(fit_curves(profiles), profiles)
    log.info("fitted %d curves from %d profile rows", len(curves), len(profiles))
    return Catalog(curves, _table(prices, BUNDLED_PRICES, PRICES), _table(ops, BUNDLED_OPS, ENGINE_OPS), profiles)


def _table(value: str | Path | pd.DataFrame | None, bundled: Path, schema: Schema) -> pd.DataFrame:
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


# Simulation check: keep simulating the cheapest unchecked option until the SIM_CHECK_TOP cheapest
# (after re-pricing) are all simulated, at most SIM_CHECK_MAX per route (each simulates a few fleets).
SIM_CHECK_TOP = 2
SIM_CHECK_MAX = 8


def make_plan(routes_df: pd.DataFrame, catalog: Catalog, assumptions: Assumptions | None = None,
              check_by_simulation: bool = False) -> PlanResult:
    """Plan every route: size each allowed option, price it, pick the cheapest feasible one.

    check_by_simulation: check the analytical replica count of the cheapest options by
    simulating continuous batching on the route's traffic (planner.simulate), and
    correct it to the smallest fleet meeting every SLO for `slo_attainment` of
    requests (batch: the deadline); False keeps the analytical sizing (the fast what-if loop).
    Raises InputError only for a malformed routes table.
    """
    assumptions = assumptions or Assumptions()
    routes = validate_routes(routes_df)
    plan_rows, option_rows = [], []
    for row in routes.to_dict("records"):
        route = Route.from_row(row)
        options = [evaluate_option(route, curve, catalog.price_book, catalog.ops_book, assumptions)
                   for curve in _candidates(route, catalog)]
        if check_by_simulation and route.traffic == "online":
            options = _online_simulation_check(route, options, assumptions)
        elif check_by_simulation and route.traffic == "batch":
            options = _batch_simulation_check(route, options, assumptions)
        rows = [option.to_row() for option in options]
        option_rows.extend(rows)
        plan_rows.append(_plan_row(route, rows, catalog, assumptions))
    options_df = pd.DataFrame(option_rows, columns=list(OPTION_COLUMNS))
    plan_df = validate_frame(pd.DataFrame(plan_rows, columns=PLAN.names), PLAN, "plan")
    return PlanResult(plan_df, options_df, assumptions)


def _candidates(route: Route, catalog: Catalog) -> list[Curve]:
    """The fitted curves of the route's model that its allow-lists admit."""
    allowed = {name: route.allowed(name) for name in ALLOW_LISTS}
    out = []
    for key, curve in catalog.curves.items():
        if key.model != route.model:
            continue
        if ((allowed["engines"] and key.engine not in allowed["engines"])
                or (allowed["gpus"] and key.gpu not in allowed["gpus"])
                or (allowed["precisions"] and key.precision not in allowed["precisions"])
                or (allowed["tps"] and str(key.tp) not in allowed["tps"])
                or (allowed["configs"] and (key.config or DEFAULT_CONFIG).lower() not in allowed["configs"])):
            continue
        out.append(curve)
    return out


def _cheapest_unsimulated(options: list[Option], a: Assumptions) -> Option | None:
    """The best-ranked feasible option not yet simulated, if it is among the SIM_CHECK_TOP best; else None."""
    return next((o for o in _ranked(options, a)[:SIM_CHECK_TOP] if not o.simulated), None)


def _ranked(options: list[Option], a: Assumptions) -> list[Option]:
    """Feasible options in the order the plan prefers them (_rank_key)."""
    return sorted((o for o in options if o.feasible), key=lambda o: _rank_key(o.to_row(), o.route.traffic, a))


def _rank_key(row: Mapping[str, Any], traffic: str, a: Assumptions) -> tuple:
    """Cheapest first; for an online route, options whose latency rests on no measurement go last
    unless the assumptions allow them (their TTFT is the engine model's alone, and optimistic)."""
    unverified = traffic == "online" and not a.allow_unverified_latency and row["latency_basis"] == "unverified"
    return (unverified, row["total_usd_per_month"], row["gpus"], row["option"])


def _online_simulation_check(route: Route, options: list[Option], a: Assumptions) -> list[Option]:
    """Re-size the cheapest feasible online options by simulation, re-priced (the others unchanged)."""
    if route.slo.empty:
        return options
    replay = route_log_requests(route)
    options = list(options)
    for _ in range(SIM_CHECK_MAX):
        option = _cheapest_unsimulated(options, a)
        if option is None:
            break  # the cheapest options (after re-pricing) have all been simulated
        options[options.index(option)] = _simulate_online_option(option, a, replay)
    return options


def _simulate_online_option(option: Option, a: Assumptions,
                            replay: tuple[np.ndarray, tuple[np.ndarray, np.ndarray]] | None) -> Option:
    """search_replicas from the analytical count; the option takes the simulated fleet and its cost."""
    arrivals, lengths = replay if replay is not None else (None, None)
    analytical = option.replicas
    search = simulate.search_replicas(option.route, option.curve, analytical, arrivals, lengths,
                                      attainment_target=a.slo_attainment)
    option = dataclasses.replace(option, simulated=True, analytical_replicas=analytical,
                                 sim_attainment=search.attainment)
    if search.replicas is None:
        return dataclasses.replace(
            option, feasible=False, reason=f"simulation: no fleet up to {max(r for r, _ in search.tried)} "
            f"replicas meets the SLOs for {a.slo_attainment:.0%} of requests (best {search.attainment:.1%})")
    option = dataclasses.replace(option, sim_replicas=search.replicas)
    if not search.differs:
        return option
    notes = _join(option.notes, f"analytical sizing {analytical} replicas, simulation {search.replicas} "
                                f"({search.source})")
    return option.resized(search.replicas, a, notes, utilisation=option.utilisation * analytical / search.replicas)


def _batch_simulation_check(route: Route, options: list[Option], a: Assumptions) -> list[Option]:
    """Re-size the cheapest batch options by simulating the whole job (all requests at t = 0)."""
    options = list(options)
    for _ in range(SIM_CHECK_MAX):
        option = _cheapest_unsimulated(options, a)
        if option is None:
            break
        options[options.index(option)] = _simulate_batch_option(option, a)
    return options


def _simulate_batch_option(option: Option, a: Assumptions) -> Option:
    """cheapest_batch_fleet on lengths sampled from the route's distributions; re-price with its makespan."""
    route = option.route
    gen = np.random.default_rng(0)
    lengths = (route.input.sample(route.num_requests, gen), route.output.sample(route.num_requests, gen))
    fleet = simulate.cheapest_batch_fleet(option.curve, lengths, route.deadline_hours * SECONDS_PER_HOUR,
                                          option.cost.usd_per_gpu_hour, option.tp, spot=a.pricing_type == "spot")
    analytical = option.replicas
    option = dataclasses.replace(option, simulated=True, analytical_replicas=analytical,
                                 sim_replicas=fleet.replicas if fleet.feasible else math.nan)
    if not fleet.feasible:
        return dataclasses.replace(option, feasible=False, reason=f"simulation: {fleet.reason}")
    hours = fleet.wall_s / SECONDS_PER_HOUR
    notes = _join(option.notes, f"simulated job: {fleet.replicas} replicas finish in {hours:.2f} h "
                                f"(deadline {route.deadline_hours:g} h; analytical {analytical} replicas)")
    return option.resized(fleet.replicas, a, notes, job_hours=hours)


def _join(*parts: object) -> str:
    return "; ".join(str(p) for p in parts if isinstance(p, str) and p)


# ---------------------------------------------------------------- choosing

def _plan_row(route: Route, options: list[dict[str, Any]], catalog: Catalog, a: Assumptions) -> dict[str, Any]:
    """The PLAN row of a route from its option rows: the best-ranked feasible one (_rank_key) and its runner-up."""
    base = {"route": route.name, "traffic": route.traffic, "model": route.model}
    feasible = sorted((o for o in options if o["feasible"]), key=lambda o: _rank_key(o, route.traffic, a))
    if not feasible:
        return {**base, "status": "infeasible", "notes": _infeasible_reason(route, options, catalog)}
    best = feasible[0]
    runner = next((o for o in feasible[1:] if (o["engine"], o["gpu"]) != (best["engine"], best["gpu"])), None)
    sim = {"sim_attainment": best.get("sim_attainment", math.nan), "sim_replicas": best.get("sim_replicas", math.nan)}
    deployment = {"max_model_len": _max_model_len(route), "profile": _profile_files(route, best, catalog)}
    return {**base, "status": "ok", **{c: best[c] for c in _COPIED}, **_runner_up_columns(best, runner), **sim,
            **deployment, "notes": best["notes"]}


# The context a deployment must hold is taken at this percentile of prompt and output lengths.
CONTEXT_PERCENTILE = 99.0


def _max_model_len(route: Route) -> int:
    """The route's p99 prompt + p99 output tokens (the longest given quantile, never below the mean)."""
    return math.ceil(route.input.at_percentile(CONTEXT_PERCENTILE) + route.output.at_percentile(CONTEXT_PERCENTILE))


def _profile_files(route: Route, best: dict[str, Any], catalog: Catalog) -> str:
    """The profile files of the chosen curve's group, ';'-separated, relative to the project root if bundled."""
    frame = catalog.profiles_df
    if "file" not in frame.columns:
        return ""
    key = {"engine": best["engine"], "engine_version": best["engine_version"], "gpu": best["gpu"],
           "model": route.model, "precision": best["precision"], "tp": best["tp"],
           "config": best["engine_config"] or DEFAULT_CONFIG}
    mask = np.ones(len(frame), dtype=bool)
    for column, value in key.items():
        mask &= (frame[column] == value).to_numpy()
    return ";".join(_relative(Path(f)) for f in sorted(set(frame.loc[mask, "file"])))


def _relative(path: Path) -> str:
    root = BUNDLED_PROFILES_DIR.parent
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


_COPIED = ("engine", "engine_version", "engine_config", "gpu", "precision", "tp", "replicas", "gpus",
           "operating_concurrency", "replica_output_tok_per_s", "replica_output_tok_per_s_low",
           "replica_output_tok_per_s_high", "ttft_pred_ms", "tpot_pred_ms", "e2e_pred_ms", "utilisation",
           "gpu_usd_per_month", "eng_usd_per_month", "total_usd_per_month", "usd_per_1m_output_tok", "provenance",
           "latency_basis", "price_source")


def _runner_up_columns(best: dict[str, Any], runner: dict[str, Any] | None) -> dict[str, Any]:
    if runner is None:
        return {"runner_up": "", "runner_up_total_usd_per_month": math.nan, "savings_usd_per_month": math.nan,
                "breakeven_updates_per_month": math.nan}
    u = costs.breakeven_updates(best["fixed_usd_per_month"], best["usd_per_update"],
                                runner["fixed_usd_per_month"], runner["usd_per_update"])
    return {"runner_up": runner["option"], "runner_up_total_usd_per_month": runner["total_usd_per_month"],
            "savings_usd_per_month": runner["total_usd_per_month"] - best["total_usd_per_month"],
            "breakeven_updates_per_month": math.nan if u is None else u}


def _infeasible_reason(route: Route, options: list[dict[str, Any]], catalog: Catalog) -> str:
    if not options:
        return _no_profile_reason(route, catalog)
    misses = [o for o in options if o["miss_ratio"] > 0]
    if misses:
        closest = min(misses, key=lambda o: o["miss_ratio"])
        return f"no option meets the SLOs; closest: {closest['option']} {closest['reason']}"
    reasons = sorted({o["reason"] for o in options})
    return "no feasible option: " + "; ".join(reasons)


def _no_profile_reason(route: Route, catalog: Catalog) -> str:
    profiled = sorted({f"{k.engine}/{k.gpu}/{k.precision}/tp{k.tp}" for k in catalog.curves if k.model == route.model})
    if not profiled:
        return f"no profile for model {route.model} on any GPU"
    limits = ", ".join(f"{c}={route.allow_list_text(c)}" for c in ALLOW_LISTS if route.allowed(c))
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
