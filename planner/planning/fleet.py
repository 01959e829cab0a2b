"""The cheapest fleet for all routes together: shared deployments, GPU mix, hourly scaling, pricing mix.

`make_fleet(routes, catalog, assumptions, levers)` solves one mixed-integer program over every route
(scipy.optimize.milp, HiGHS), checks the fleet it chose by simulation (planner.planning.fleet_check), and sets
it beside the route-by-route plan (planner.planning.plan) on the same inputs.  That plan is one of the
program's solutions (every route kept on its own checked option), so the fleet is never dearer.

The program (docs/fleet.md):
- units k: a route's traffic, or with the GPU mix one length bucket of it;
- candidates j: a fitted curve serving one model at one SLO tier (the strictest SLO it holds for all
  it serves); with sharing off, one per route, at its own SLO;
- x[k,j] in {0,1}: unit k served by j;  y[r] in {0,1}: route r kept on its route-by-route option;
- n[j,h] = res[j] + od[j,h]: replicas in period h (24 hours with autoscaling, else one), reserved + on-demand;
- capacity: sum_k load[k,j,h] x[k,j] <= n[j,h], load = the unit's rate in h / (one replica's request rate
  at the tier's operating point x utilisation cap);
- cold starts (autoscaling): up[j,h] >= od[j,h] - od[j,h-1], each started replica billed its engine's
  cold start ahead of the hour, every day;
- quotas: GPUs of one type in every period <= quota (batch and kept routes counted in every period);
- engineering: e[o,m] >= every choice using engine-ops row o for model m, billed once per update of m;
  adoption once per engine-ops row.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from fleetfacts.errors import FleetplanError, InputError
from fleetfacts.schema import FLEET, csv_cell, validate_frame
from planner.engine.curves import CurveLike
from planner.engine.transfer_physics import host_tier_gib, with_host_tier
from planner.planning import fleet_check
from planner.planning.catalog import Catalog
from planner.planning.fleet_check import Stream
from planner.planning.fleet_program import Choice, Prices, ProgramVars, build_program, choice_price, per_update_usd
from planner.planning.fleet_size import check_fleet_size
from planner.planning.fleet_units import (
    DEFAULT_LEVERS,
    NO_LEVERS,
    Candidate,
    Levers,
    Tier,
    Unit,
    candidate_loads,
    own_tier,
    period_rates,
    route_units,
)
from planner.planning.plan import PlanResult, make_plan
from planner.planning.route_table import validate_routes
from planner.planning.sim_check import other_router
from planner.sizing import costs
from planner.sizing.assumptions import Assumptions
from planner.sizing.options import option_name
from planner.sizing.plan_row import PlanRow
from planner.traffic.routes import HOURS_PER_DAY, Route

log = logging.getLogger(__name__)

SOLVE_TIME_LIMIT_S = 60.0
SHARED, KEPT, BATCH = "shared", "route-by-route", "batch"
# A deployment the optimiser built (as a shared one) that ended up serving one route: labelled so, not "shared".
ONE_ROUTE = "one route"


class FleetInfeasibleError(FleetplanError):
    """No fleet meets every route within the quotas; the message says which quota binds."""


# ---------------------------------------------------------------- SLO tiers


# ---------------------------------------------------------------- units: what is assigned


# ---------------------------------------------------------------- candidates: what serves


# ---------------------------------------------------------------- the kept options (route-by-route)


def _kept_choices(baseline: PlanResult, catalog: Catalog) -> list[Choice]:
    return [Choice(row.route, row.model, KEPT, _planned_row(baseline, row),
                   catalog.ops_book.find(row.engine, row.engine_version))
            for row in baseline.rows if row.ok and row.traffic == "online"]


def _batch_choices(routes: pd.DataFrame, baseline: PlanResult, catalog: Catalog, a: Assumptions,
                   levers: Levers) -> list[Choice]:
    """Per planned batch route: its checked options (on-demand; and spot with the pricing lever)."""
    ok = {row.route for row in baseline.rows if row.ok and row.traffic == "batch"}
    if not ok:
        return []
    tables = [baseline.options]
    if levers.pricing and a.pricing_type != "spot":
        batch = routes[routes["name"].isin(ok)]
        tables.append(make_plan(batch, catalog, replace(a, pricing_type="spot"), check_by_simulation=True).options)
    model = dict(zip(routes["name"], routes["model"], strict=True))
    out = []
    for table in tables:
        rows = table[table["route"].isin(ok) & table["feasible"].astype(bool)]
        for row in rows.to_dict("records"):
            if row.get("sized_replicas") is None or pd.isna(row.get("sized_replicas")):
                continue  # only options the simulation checked
            out.append(Choice(row["route"], model[row["route"]], BATCH, row,
                              catalog.ops_book.find(row["engine"], row["engine_version"])))
    return out


# ---------------------------------------------------------------- the program


# ---------------------------------------------------------------- the fleet chosen

@dataclass(frozen=True, eq=False)
class Deployment:
    """One deployment of the fleet: a candidate serving units (shared), or a kept / batch option."""

    kind: str
    model: str
    candidate: Candidate | None = None
    choice: Choice | None = None
    units: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()  # per period (shared)
    reserved: int = 0
    attainment: float = math.nan
    prefix_hit_rate: float = math.nan  # at its busiest level's simulation (a kept option: its plan row's)
    notes: str = ""
    router: str = ""  # the load balancer its replicas were checked behind (a kept option: its plan row's)
    host_kv_gib: float = 0.0  # host-memory KV tier per replica it was checked with (an assumption; 0: none)


@dataclass(frozen=True, eq=False)
class FleetResult:
    """The fleet: one row per deployment (schema FLEET), its engineering cost rows, GPUs by hour and type,
    per-route placement, a summary, and the route-by-route plan it is compared with."""

    deployments: pd.DataFrame
    engineering: pd.DataFrame
    hourly_gpus: pd.DataFrame
    routes: pd.DataFrame
    summary: dict[str, Any]
    baseline: PlanResult


ENGINEERING_COLUMNS = ("item", "engine", "versions", "model", "gpu", "usd_per_month", "basis")
HOURLY_COLUMNS = ("hour", "gpu", "gpus")
ROUTE_COLUMNS = ("route", "traffic", "deployments", "sim_attainment")


def _checked_quotas(quotas: Mapping[str, int], catalog: Catalog) -> dict[str, int]:
    """The quotas, each a whole number >= 0 on a GPU type the prices list (a mistyped one would bind nothing);
    InputError naming the unknown GPU and the known ones."""
    known = sorted(set(catalog.prices_df["gpu"]))
    for gpu, quota in quotas.items():
        if not (isinstance(quota, int) and quota >= 0):
            raise InputError(f"quota {gpu}={quota!r}: expected a whole number of GPUs >= 0")
        if gpu not in known:
            raise InputError(f"quota {gpu}={quota}: unknown GPU {gpu!r}; the prices list {', '.join(known)}")
    return dict(quotas)


def make_fleet(routes_df: pd.DataFrame, catalog: Catalog, assumptions: Assumptions | None = None,
               levers: Levers = DEFAULT_LEVERS, quotas: Mapping[str, int] | None = None,
               baseline: PlanResult | None = None, check: bool = True,
               time_limit_s: float = SOLVE_TIME_LIMIT_S) -> FleetResult:
    """The cheapest fleet meeting every planned route's SLOs and deadlines (see the module doc).

    baseline: the route-by-route plan on the same inputs (made, with its simulation check, when None).
    check: simulate every shared deployment on its mixed traffic and add replicas until each route's
    attainment reaches the assumptions' target.  quotas: most GPUs of a type at any hour.
    Raises InputError on bad inputs or more than MAX_FLEET_ROUTES routes, FleetInfeasibleError when the
    quotas leave no fleet.
    """
    check_fleet_size(len(routes_df))
    a = assumptions or Assumptions()
    quotas = _checked_quotas(quotas or {}, catalog)
    routes = validate_routes(routes_df)
    started = time.perf_counter()
    baseline = baseline or make_plan(routes, catalog, a, check_by_simulation=True)
    periods = HOURS_PER_DAY if levers.autoscale else 1
    kept = _kept_choices(baseline, catalog)
    online = [Route.from_row(r) for r in routes.to_dict("records") if r["name"] in {c.route for c in kept}]
    units = [u for route in online for u in route_units(route, levers.mix, periods)]
    candidates, loads = candidate_loads(units, catalog, a, levers)
    batch = _batch_choices(routes, baseline, catalog, a, levers)
    updates = _updates_per_month(routes)
    prices = Prices(a.hours_per_month, periods)
    search = _Search(units, candidates, loads, kept, batch, prices, quotas, a, updates, time_limit_s)
    fleet, solved = search.solve()
    if check:
        fleet, solved = search.checked(fleet, solved)
    elapsed_s = time.perf_counter() - started
    kept_all = _total(fleet, units, prices, a, updates) > _baseline_total(baseline) + COST_SLACK_USD
    if kept_all:
        fleet = _route_by_route(kept, baseline, catalog)
    if not within_quotas(fleet, quotas, periods):
        raise FleetInfeasibleError(_infeasible_message(solved, quotas) + " (the fleets found met the quotas only "
                                   "before their simulation check added replicas)")
    timing = {"solve_s": round(search.solver_s, 2), "elapsed_s": round(elapsed_s, 2), "program": search.size}
    return _result(fleet, units, prices, a, updates, baseline, levers, solved, timing, kept_all, check)


# Rounds of solve-then-simulate: each re-solves with what the simulations taught (module doc).
CHECK_ROUNDS = 4
# Totals within this many dollars count as equal (rounding of the solver's integers into dollars).
COST_SLACK_USD = 0.005
NO_FLEET = "simulation: no fleet"


@dataclass
class _Search:
    """The program over the units and candidates, re-solved as simulation checks correct it."""

    units: list[Unit]
    candidates: list[Candidate]
    loads: dict[tuple[int, int], np.ndarray]
    kept: list[Choice]
    batch: list[Choice]
    prices: Prices
    quotas: Mapping[str, int]
    a: Assumptions
    updates: Mapping[str, float]
    time_limit_s: float
    solver_s: float = 0.0  # solver time over every round
    size: str = ""  # the last program's size

    def solve(self) -> tuple[list[Deployment], Any]:
        program, v = build_program(self.units, self.candidates, self.loads, self.kept, self.batch, self.prices,
                            self.quotas, self.a, self.updates)
        started = time.perf_counter()
        solved = program.solve(self.time_limit_s)
        self.solver_s += time.perf_counter() - started
        self.size = (f"{len(program.cost)} variables ({sum(program.integer)} integer), "
                     f"{len(program.row_low)} constraints")
        if solved.x is None:
            raise FleetInfeasibleError(_infeasible_message(solved, self.quotas))
        return _read_solution(solved.x, v, self.units, self.candidates, self.kept, self.batch,
                              self.prices.periods), solved

    def checked(self, fleet: list[Deployment], solved: Any) -> tuple[list[Deployment], Any]:
        """Simulate the fleet; where a deployment fails outright, drop that candidate, where it needed more
        replicas, scale its loads by as much; re-solve, up to CHECK_ROUNDS times.  The cheapest fleet
        that passed its check is kept (the route-by-route one passes by construction)."""
        best: tuple[float, list[Deployment], Any] | None = None
        for _ in range(CHECK_ROUNDS):
            checked, failed, grown = self._check(fleet)
            if not failed and within_quotas(checked, self.quotas, self.prices.periods):
                best = self._cheaper(best, checked, solved)
            if not failed and not grown:
                break
            self.loads = {(k, j): load * grown.get(j, 1.0) for (k, j), load in self.loads.items() if j not in failed}
            try:
                fleet, solved = self.solve()
            except FleetInfeasibleError:
                break  # what the checks taught leaves no fleet within the quotas: keep the best checked one
        if best is None:  # every round had a failing deployment: keep each route on its own option
            return self._route_by_route(fleet), solved
        return best[1], best[2]

    def _check(self, fleet: list[Deployment]) -> tuple[list[Deployment], set[int], dict[int, float]]:
        """Each deployment after its simulation check; the candidates (indices) that failed outright, and
        how many times its replicas each shared one that needed more grew."""
        index = {id(c): j for j, c in enumerate(self.candidates)}
        checked = [_best_reserved(_checked(d, self.units, self.prices.periods, self.a), self.prices) for d in fleet]
        failed = {index[id(d.candidate)] for d in checked if d.notes.startswith(NO_FLEET)}
        grown = {index[id(d.candidate)]: max(n / max(o, 1) for n, o in zip(c.replicas, d.replicas, strict=True))
                 for d, c in zip(fleet, checked, strict=True) if d.kind == SHARED and c.replicas != d.replicas}
        return checked, failed, grown

    def _cheaper(self, best: tuple[float, list[Deployment], Any] | None, checked: list[Deployment],
                 solved: Any) -> tuple[float, list[Deployment], Any]:
        """`checked` (with its cost and solution) when it costs less than `best` by more than COST_SLACK_USD."""
        total = _total(checked, self.units, self.prices, self.a, self.updates)
        return (total, checked, solved) if best is None or total < best[0] - COST_SLACK_USD else best

    def _route_by_route(self, fleet: list[Deployment]) -> list[Deployment]:
        """Each route on its own option, and the batch deployments of `fleet`, checked."""
        kept = [Deployment(KEPT, c.model, choice=c) for c in self.kept]
        return [_checked(d, self.units, self.prices.periods, self.a) for d in kept + [
            d for d in fleet if d.kind == BATCH]]


def _updates_per_month(routes: pd.DataFrame) -> dict[str, float]:
    """Model updates per month of each route (blank: none)."""
    return {str(name): 0.0 if pd.isna(u) else float(u)
            for name, u in zip(routes["name"], routes["model_updates_per_month"], strict=True)}


def _infeasible_message(solved: Any, quotas: Mapping[str, int]) -> str:
    if quotas:
        limits = ", ".join(f"{gpu}={n}" for gpu, n in quotas.items())
        return f"no fleet meets every route within the GPU quotas ({limits}); raise a quota or allow more GPU types"
    return f"the fleet program found no solution ({solved.message})"


def _read_solution(x: np.ndarray, v: ProgramVars, units: list[Unit], candidates: list[Candidate], kept: list[Choice],
                   batch: list[Choice], periods: int) -> list[Deployment]:
    def on(col: int) -> bool:
        return x[col] > 0.5

    fleet = [Deployment(KEPT, c.model, choice=c) for i, c in enumerate(kept) if on(v.kept[i])]
    fleet += [Deployment(BATCH, c.model, choice=c) for i, c in enumerate(batch) if on(v.batch[i])]
    for j, c in enumerate(candidates):
        served = tuple(k for (k, jj), col in v.x.items() if jj == j and on(col))
        if not served:
            continue
        reserved = round(x[v.reserved[j]]) if j in v.reserved else 0
        replicas = tuple(reserved + round(x[v.on_demand[(j, h)]]) for h in range(periods))
        fleet.append(Deployment(SHARED, units[served[0]].route.model, candidate=c, units=served,
                                replicas=replicas, reserved=reserved))
    return fleet


def _streams(d: Deployment, units: list[Unit], period: int, periods: int) -> list[Stream]:
    out = []
    for k in d.units:
        unit = units[k]
        rps = float(period_rates(unit.route, periods)[period])
        if rps > 0:
            out.append(Stream(unit.route, rps, unit.bucket, unit.share))
    return out


def _checked(d: Deployment, units: list[Unit], periods: int, a: Assumptions) -> Deployment:
    """A shared deployment after its simulation check: at each replica level of its day, the busiest hour
    simulated and replicas added until every route served meets its SLOs for the target share."""
    if d.kind != SHARED:
        return replace(d, attainment=_choice_attainment(d.choice), prefix_hit_rate=_choice_hit_rate(d.choice))
    assert d.candidate is not None
    replicas = list(d.replicas)
    worst, hit_rate = 1.0, math.nan
    router, curve, setup_notes = _deployment_setup(d, units, periods, a)
    for level in sorted(set(d.replicas)):
        hours = [h for h in range(periods) if d.replicas[h] == level]
        busiest = max(hours, key=lambda h: sum(units[k].rps[h] for k in d.units))
        streams = _streams(d, units, busiest, periods)
        if not streams:
            continue
        best, reached = fleet_check.smallest_fleet(curve, streams, level, a.slo_attainment, router=router)
        if best is None:
            return replace(d, attainment=min(reached.values()), router=router, host_kv_gib=host_tier_gib(curve),
                           notes=f"simulation: no fleet up to {fleet_check.SEARCH_CEILING_FACTOR * level} replicas "
                                 f"meets every route's SLOs for {a.slo_attainment:.0%} of requests")
        for h in hours:
            replicas[h] = max(replicas[h], best)
        worst = min(worst, min(reached.values()))
        hit_rate = fleet_check.prefix_hit_rate(curve, streams, best, target=a.slo_attainment, router=router)
    added = [f"{r - o:+d} at hour {h}" for h, (o, r) in enumerate(zip(d.replicas, replicas, strict=True)) if r != o]
    notes = ("simulation added replicas: " + ", ".join(added[:6]) + (" ..." if len(added) > 6 else "")) if added \
        else ""
    return replace(d, replicas=tuple(replicas), attainment=worst, prefix_hit_rate=hit_rate, router=router,
                   host_kv_gib=host_tier_gib(curve), notes="; ".join(n for n in (notes, *setup_notes) if n))


def _deployment_setup(d: Deployment, units: list[Unit], periods: int, a: Assumptions
                      ) -> tuple[str, CurveLike, tuple[str, ...]]:
    """(router, curve, notes) a shared deployment is checked with: the assumed router and its curve, or, where its
    streams carry prefix structure, the other router (planner.planning.sim_check.other_router) and then a
    host-memory KV tier of the assumptions' host_kv_gib (if any) each kept where the busiest hour needs fewer
    replicas with it (ties: the assumed setup), as the plan prices them; the setup not kept in the notes."""
    assert d.candidate is not None
    curve: CurveLike = d.candidate.curve
    busiest = max(range(periods), key=lambda h: sum(units[k].rps[h] for k in d.units))
    streams = _streams(d, units, busiest, periods)
    if not streams or not fleet_check.carries_prefixes(streams):
        return a.router, curve, ()
    top = max(d.replicas)

    def fewest(router: str, with_curve: CurveLike) -> int | None:
        return fleet_check.smallest_fleet(with_curve, streams, top, a.slo_attainment, router=router)[0]

    router, other = a.router, other_router(a.router)
    mine, theirs = fewest(router, curve), fewest(other, curve)
    if theirs is not None and (mine is None or theirs < mine):
        router, other, mine, theirs = other, router, theirs, mine
    notes = [f"behind {other}: {_fleet_text(theirs)} at the busiest hour"]
    tiered = with_host_tier(d.candidate.curve, a.host_kv_gib, a.host_gb_per_s) if a.host_kv_gib > 0 else None
    if tiered is not None:
        with_tier = fewest(router, tiered)
        if with_tier is not None and (mine is None or with_tier < mine):
            notes.append(f"without a {a.host_kv_gib:g} GiB host KV tier per replica (measured once, on an H100): "
                         f"{_fleet_text(mine)} at the busiest hour")
            return router, tiered, tuple(notes)
        notes.append(f"with a {a.host_kv_gib:g} GiB host KV tier per replica (measured once, on an H100): "
                     f"{_fleet_text(with_tier)} at the busiest hour")
    return router, curve, tuple(notes)


def _fleet_text(replicas: int | None) -> str:
    return "no fleet holds" if replicas is None else f"{replicas} replica{'s' if replicas != 1 else ''}"


def _best_reserved(d: Deployment, prices: Prices) -> Deployment:
    """The deployment with the cheapest number of reserved replicas for its (checked) day."""
    if d.kind != SHARED or d.candidate is None or d.candidate.base is None:
        return d
    options = [replace(d, reserved=r) for r in range(min(d.replicas) + 1)]
    return min(options, key=lambda option: _gpu_usd(option, prices))


def within_quotas(fleet: list[Deployment], quotas: Mapping[str, int], periods: int) -> bool:
    """Does the fleet keep every GPU type within its quota at every hour (batch jobs counted at every hour)?"""
    if not quotas:
        return True
    peak = _gpus_by_type(fleet, _hourly_gpus(fleet, periods))
    return all(peak.get(gpu, 0) <= quota for gpu, quota in quotas.items())


def _choice_attainment(choice: Choice | None) -> float:
    value = choice.row.get("sim_attainment") if choice is not None else None
    return math.nan if value is None or pd.isna(value) else float(value)


def _choice_host_gib(choice: Choice | None) -> float | None:
    """A kept option's host KV tier per replica (its plan row's; None for batch or an older plan)."""
    value = choice.row.get("host_kv_gib") if choice is not None else None
    return float(value) if isinstance(value, (int, float)) and not pd.isna(value) else None


def _choice_hit_rate(choice: Choice | None) -> float:
    value = choice.row.get("prefix_hit_rate_pred") if choice is not None else None
    return float(value) if isinstance(value, (int, float)) and not pd.isna(value) else math.nan


def _route_by_route(kept: list[Choice], baseline: PlanResult, catalog: Catalog) -> list[Deployment]:
    """Every route on its own planned option: the fleet when the program's fleet, once checked, is not cheaper."""
    fleet = [Deployment(KEPT, c.model, choice=c, attainment=_choice_attainment(c)) for c in kept]
    for row in (r for r in baseline.rows if r.ok and r.traffic == "batch"):
        choice = Choice(row.route, row.model, BATCH, _planned_row(baseline, row),
                        catalog.ops_book.find(row.engine, row.engine_version))
        fleet.append(Deployment(BATCH, choice.model, choice=choice, attainment=_choice_attainment(choice)))
    return fleet


def _planned_row(baseline: PlanResult, plan_row: PlanRow) -> dict[str, Any]:
    """The options-table row of the option a plan row recommends, with the plan row's prefix_hit_rate_pred."""
    options = baseline.options
    match = options[(options["route"] == plan_row.route) & (options["option"] == plan_row.option)]
    return {**match.iloc[0].to_dict(), "prefix_hit_rate_pred": plan_row.prefix_hit_rate_pred,
            "router": plan_row.router, "host_kv_gib": plan_row.host_kv_gib}


def _baseline_total(baseline: PlanResult) -> float:
    return float(np.nansum([row.total_usd_per_month for row in baseline.rows if row.ok]))


# ---------------------------------------------------------------- costs of the fleet chosen

def _gpu_usd(d: Deployment, prices: Prices) -> float:
    if d.kind != SHARED:
        assert d.choice is not None
        return d.choice.gpu_usd_per_month
    c = d.candidate
    assert c is not None
    on_demand = [n - d.reserved for n in d.replicas]
    usd = sum(n * prices.period_usd(c.tp, c.peak) for n in on_demand)
    if d.reserved:
        assert c.base is not None
        usd += d.reserved * prices.reserved_usd(c.tp, c.base)
    if prices.periods > 1:
        starts = sum(max(0, n - on_demand[h - 1]) for h, n in enumerate(on_demand))
        usd += starts * prices.start_usd(c.tp, c.peak, c.cold_start_min)
    return usd


def _deployment_ops(d: Deployment) -> tuple[costs.EngineOps, str, float]:
    """(engine-ops row, GPU, $/GPU-hour for builds) of a deployment."""
    if d.candidate is not None:
        return d.candidate.ops, d.candidate.curve.key.gpu, d.candidate.peak.usd_per_gpu_hour
    assert d.choice is not None
    return d.choice.ops, str(d.choice.row["gpu"]), choice_price(d.choice)


def _served_routes(d: Deployment, units: list[Unit]) -> list[str]:
    if d.kind == SHARED:
        return list(dict.fromkeys(units[k].route.name for k in d.units))
    assert d.choice is not None
    return [d.choice.route]


def engineering_rows(fleet: list[Deployment], units: list[Unit], a: Assumptions,
                     updates: Mapping[str, float]) -> list[dict]:
    """Update work once per (engine-ops row, model) at the update rate of the busiest route it serves,
    builds once per (row, model, GPU type), adoption once per engine-ops row."""
    rate: dict[tuple, float] = {}
    for d in fleet:
        ops, gpu, price = _deployment_ops(d)
        u = max(updates.get(r, 0.0) for r in _served_routes(d, units))
        for key in ((ops, d.model), (ops, d.model, gpu, price)):
            rate[key] = max(rate.get(key, 0.0), u)
    rows = []
    for key, u in rate.items():
        ops, model = key[0], key[1]
        if len(key) == 2:
            rows.append({"item": "model updates", "engine": ops.engine, "versions": ops.versions, "model": model,
                         "gpu": "", "usd_per_month": u * per_update_usd(key, a),
                         "basis": f"{u:g} updates/month x {ops.engineer_hours_per_update:g} engineer-h x "
                                  f"${a.engineer_usd_per_hour:g}/h ({ops.source})"})
        elif ops.build_gpu_hours_per_update > 0:
            rows.append({"item": "builds", "engine": ops.engine, "versions": ops.versions, "model": model,
                         "gpu": key[2], "usd_per_month": u * per_update_usd(key, a),
                         "basis": f"{u:g} updates/month x {ops.build_gpu_hours_per_update:g} GPU-h x "
                                  f"${key[3]:g}/GPU-h"})
    if a.adoption_amortise_months > 0:
        for ops in dict.fromkeys(_deployment_ops(d)[0] for d in fleet):
            rows.append({"item": "adoption", "engine": ops.engine, "versions": ops.versions, "model": "", "gpu": "",
                         "usd_per_month": ops.adoption_hours * a.engineer_usd_per_hour / a.adoption_amortise_months,
                         "basis": f"{ops.adoption_hours:g} engineer-h over {a.adoption_amortise_months:g} months"})
    return rows


def _total(fleet: list[Deployment], units: list[Unit], prices: Prices, a: Assumptions,
           updates: Mapping[str, float]) -> float:
    return (sum(_gpu_usd(d, prices) for d in fleet)
            + sum(r["usd_per_month"] for r in engineering_rows(fleet, units, a, updates)))


# ---------------------------------------------------------------- tables

def _result(fleet: list[Deployment], units: list[Unit], prices: Prices, a: Assumptions,
            updates: Mapping[str, float], baseline: PlanResult, levers: Levers, solved: Any,
            timing: dict[str, Any], kept_all: bool, checked: bool) -> FleetResult:
    rows = [_with_gpu_range(_fleet_row(f"d{i + 1}", d, units, prices), baseline.options) for i, d in enumerate(fleet)]
    table = validate_frame(pd.DataFrame(rows, columns=FLEET.names).astype(object), FLEET, "fleet") if rows \
        else pd.DataFrame(columns=FLEET.names)
    engineering = pd.DataFrame(engineering_rows(fleet, units, a, updates), columns=list(ENGINEERING_COLUMNS))
    hourly = _hourly_gpus(fleet, prices.periods)
    placed = _route_rows(fleet, units, table, baseline)
    gpu_usd = float(sum(_gpu_usd(d, prices) for d in fleet))
    eng_usd = float(engineering["usd_per_month"].sum())
    per_route = _baseline_total(baseline)
    total = gpu_usd + eng_usd
    summary = {
        "total_usd_per_month": round(total, 2), "per_route_usd_per_month": round(per_route, 2),
        "savings_usd_per_month": round(per_route - total, 2), "gpu_usd_per_month": round(gpu_usd, 2),
        "eng_usd_per_month": round(eng_usd, 2), "gpus_by_type": _gpus_by_type(fleet, hourly),
        "sim_attainment": _lowest(placed["sim_attainment"]), "simulation_checked": checked,
        "levers": levers.describe(), "deployments": len(fleet), **timing,
        "solver": f"HiGHS via scipy.optimize.milp: {solved.message}",
        "mip_gap": None if getattr(solved, "mip_gap", None) is None else float(solved.mip_gap),
        "kept_route_by_route": kept_all,
        "always_on_usd_per_month": round(_always_on_usd(fleet, units, prices, a, updates), 2),
        "unplanned_routes": sorted(row.route for row in baseline.rows if not row.ok),
    }
    return FleetResult(table, engineering, hourly, placed, summary, baseline)


def _always_on_usd(fleet: list[Deployment], units: list[Unit], prices: Prices, a: Assumptions,
                   updates: Mapping[str, float]) -> float:
    """The same fleet with every deployment at its busiest hour's replicas all day (what autoscaling saves)."""
    flat = [_best_reserved(replace(d, replicas=(max(d.replicas),) * len(d.replicas), reserved=0), prices)
            if d.kind == SHARED else d for d in fleet]
    return _total(flat, units, prices, a, updates)


def _lowest(values: pd.Series) -> float | None:
    numbers = pd.to_numeric(values, errors="coerce").dropna()
    return float(numbers.min()) if len(numbers) else None


def _fleet_row(name: str, d: Deployment, units: list[Unit], prices: Prices) -> dict[str, Any]:
    if d.kind == SHARED:
        c = d.candidate
        assert c is not None
        key = c.curve.key
        served = "; ".join(f"{units[k].label} {units[k].share:.2f}" for k in d.units)
        engine = (key.engine, key.engine_version, key.config or "default", key.gpu, key.precision, key.tp)
        kind, slo = _kind_and_slo(c.tier, [units[k].route for k in d.units])
        replicas, pricing = list(d.replicas), _shared_pricing(d)
    else:
        assert d.choice is not None
        r = d.choice.row
        engine = (r["engine"], r["engine_version"], r.get("engine_config") or "default", r["gpu"], r["precision"],
                  int(r["tp"]))
        served = f"{d.choice.route} 1.00"
        kind, slo, replicas, pricing = d.kind, "", [int(r["replicas"])], str(r.get("price_source", ""))
    tp = int(engine[5])
    return {"deployment": name, "kind": kind, "model": d.model, "engine": engine[0], "engine_version": engine[1],
            "engine_config": engine[2], "gpu": engine[3], "precision": engine[4], "tp": tp, "slo": slo,
            "routes": served, "replicas_min": min(replicas), "replicas_max": max(replicas),
            "replicas_by_hour": ";".join(str(n) for n in replicas) if len(replicas) > 1 else "",
            "reserved_replicas": d.reserved, "gpus_max": max(replicas) * tp, "pricing": pricing,
            "gpu_usd_per_month": round(_gpu_usd(d, prices), 2),
            "sim_attainment": None if math.isnan(d.attainment) else round(d.attainment, 4),
            "prefix_hit_rate_pred": None if math.isnan(d.prefix_hit_rate) else round(d.prefix_hit_rate, 4),
            "router": d.router or (str(d.choice.row.get("router") or "") if d.choice is not None else ""),
            "host_kv_gib": d.host_kv_gib if d.candidate is not None else _choice_host_gib(d.choice),
            "notes": d.notes}


def _with_gpu_range(row: dict[str, Any], options: pd.DataFrame) -> dict[str, Any]:
    """The deployment row with its GPUs if each replica delivers the high or the low end of its throughput
    interval (gpus_low, gpus_high), from the plan's option rows of the same option for the routes it serves
    (the widest of them); blank when none is found."""
    name = option_name(row["engine"], row["engine_version"], row["gpu"], row["precision"], row["tp"],
                       row["engine_config"])
    served = {part.rsplit(" ", 1)[0].split("[")[0] for part in str(row["routes"]).split("; ") if part}
    if options.empty or "option" not in options.columns:
        return row
    same = options[(options["option"] == name) & options["route"].isin(served)]
    mid, low, high = (pd.to_numeric(same[c], errors="coerce") for c in
                      ("replica_output_tok_per_s", "replica_output_tok_per_s_low", "replica_output_tok_per_s_high"))
    faster, slower = (mid / high).min(), (mid / low).max()
    if not (math.isfinite(faster) and math.isfinite(slower) and faster > 0):
        return row
    gpus, tp = int(row["gpus_max"]), int(row["tp"])
    return {**row, "gpus_low": min(gpus, max(tp, tp * math.ceil(gpus * faster / tp - 1e-9))),
            "gpus_high": max(gpus, tp * math.ceil(gpus * slower / tp - 1e-9))}


def _kind_and_slo(tier: Tier, routes: list[Route]) -> tuple[str, str]:
    """A built deployment's kind (shared only when it serves more than one route) and the SLO it holds: for one
    route, that route's own, with the stricter tier it was sized at when there is one."""
    if len({r.name for r in routes}) > 1:
        return SHARED, tier.label()
    own = own_tier(routes[0])
    stricter = "" if own == tier else f" (sized at the stricter {tier.label()})"
    return ONE_ROUTE, own.label() + stricter


def _shared_pricing(d: Deployment) -> str:
    c = d.candidate
    assert c is not None
    parts = []
    if d.reserved:
        assert c.base is not None
        parts.append(f"{d.reserved} reserved: {c.base.label()}")
    if max(d.replicas) > d.reserved:
        parts.append(f"the rest {c.peak.pricing_type}: {c.peak.label()}")
    return "; ".join(parts)


def _replicas(d: Deployment, periods: int) -> list[int]:
    if d.kind == SHARED:
        return list(d.replicas) * (HOURS_PER_DAY if periods == 1 else 1)
    assert d.choice is not None
    return [int(d.choice.row["replicas"])] * HOURS_PER_DAY


def _hourly_gpus(fleet: list[Deployment], periods: int) -> pd.DataFrame:
    """Online GPUs by type in each UTC hour (batch jobs are not on the clock: they run within their deadline)."""
    rows: dict[tuple[int, str], int] = {}
    for d in fleet:
        if d.kind == BATCH:
            continue
        gpu, tp = _gpu_tp(d)
        for h, n in enumerate(_replicas(d, periods)):
            rows[(h, gpu)] = rows.get((h, gpu), 0) + n * tp
    return pd.DataFrame([(h, g, n) for (h, g), n in sorted(rows.items())], columns=list(HOURLY_COLUMNS))


def _gpu_tp(d: Deployment) -> tuple[str, int]:
    if d.candidate is not None:
        return d.candidate.curve.key.gpu, d.candidate.tp
    assert d.choice is not None
    return str(d.choice.row["gpu"]), int(d.choice.row["tp"])


def _gpus_by_type(fleet: list[Deployment], hourly: pd.DataFrame) -> dict[str, int]:
    """Most GPUs of each type at any hour, batch jobs' GPUs added (they may run at the busiest hour)."""
    out = {str(g): int(n) for g, n in hourly.groupby("gpu")["gpus"].max().items()} if len(hourly) else {}
    for d in fleet:
        if d.kind == BATCH:
            gpu, _ = _gpu_tp(d)
            assert d.choice is not None
            out[gpu] = out.get(gpu, 0) + d.choice.gpus
    return dict(sorted(out.items()))


def _route_rows(fleet: list[Deployment], units: list[Unit], table: pd.DataFrame, baseline: PlanResult
                ) -> pd.DataFrame:
    names: dict[str, list[str]] = {}
    attained: dict[str, float] = {}
    for name, d in zip(table["deployment"] if len(table) else [], fleet, strict=True):
        routes = [units[k].route.name for k in d.units] if d.kind == SHARED else [d.choice.route if d.choice else ""]
        for route in dict.fromkeys(routes):
            names.setdefault(route, []).append(str(name))
            if not math.isnan(d.attainment):
                attained[route] = min(attained.get(route, 1.0), d.attainment)
    rows = []
    for r in baseline.rows:
        if r.ok:
            rows.append((r.route, r.traffic, ";".join(names.get(r.route, [])), attained.get(r.route)))
    return pd.DataFrame(rows, columns=list(ROUTE_COLUMNS))


# ---------------------------------------------------------------- $ by lever

# The waterfall's steps: the route-by-route total, the fleet with engineering counted once (no lever),
# then the enabled levers added one at a time in this order (cumulative).
ROUTE_BY_ROUTE_STEP = "route by route"
ENGINEERING_STEP = "engineering once"
LEVER_ORDER = ("share", "mix", "autoscale", "pricing")
WATERFALL_COLUMNS = ("step", "usd_per_month", "change_usd_per_month")


def lever_steps(levers: Levers) -> list[tuple[str, Levers]]:
    """The fleets of the waterfall after its first step: (name, levers) for no lever, then each enabled lever
    of `levers` added in LEVER_ORDER ('+ share', '+ pricing', ...); the last has exactly `levers`."""
    steps = [(ENGINEERING_STEP, NO_LEVERS)]
    on = NO_LEVERS
    for name in LEVER_ORDER:
        if getattr(levers, name):
            on = replace(on, **{name: True})
            steps.append((f"+ {name}", on))
    return steps


def waterfall_fleets(routes_df: pd.DataFrame, catalog: Catalog, assumptions: Assumptions | None, levers: Levers,
                     baseline: PlanResult | None, quotas: Mapping[str, int] | None = None,
                     check: bool = True) -> list[tuple[str, FleetResult]]:
    """make_fleet at each of lever_steps(levers), all against one route-by-route plan (`baseline`, made once
    with its simulation check when None).  The last fleet is make_fleet with `levers`.
    Raises InputError, FleetInfeasibleError as make_fleet."""
    a = assumptions or Assumptions()
    if baseline is None:
        baseline = make_plan(validate_routes(routes_df), catalog, a, check_by_simulation=True)
    return [(step, make_fleet(routes_df, catalog, a, on, quotas, baseline=baseline, check=check))
            for step, on in lever_steps(levers)]


def waterfall_table(fleets: list[tuple[str, FleetResult]]) -> pd.DataFrame:
    """$/month at each step (WATERFALL_COLUMNS): the route-by-route total of the fleets' baseline, then each
    fleet's total; change_usd_per_month is the difference from the step before (NaN on the first)."""
    if not fleets:
        raise ValueError("waterfall_table: expected at least one (step, fleet), got none")
    steps = [ROUTE_BY_ROUTE_STEP] + [step for step, _ in fleets]
    totals = pd.Series([fleets[0][1].summary["per_route_usd_per_month"]]
                       + [fleet.summary["total_usd_per_month"] for _, fleet in fleets], dtype=float)
    return pd.DataFrame({"step": steps, "usd_per_month": totals, "change_usd_per_month": totals.diff().round(2)},
                        columns=list(WATERFALL_COLUMNS))


def lever_waterfall(routes_df: pd.DataFrame, catalog: Catalog, assumptions: Assumptions | None, levers: Levers,
                    baseline: PlanResult | None, quotas: Mapping[str, int] | None = None,
                    check: bool = True) -> pd.DataFrame:
    """$/month from the route-by-route plan to the fleet with `levers`, one step per lever (WATERFALL_COLUMNS):
    route by route, engineering once (no lever), then + share, + mix, + autoscale, + pricing as enabled,
    cumulative.  Each step after the first is a make_fleet total on the same `baseline`.
    Raises InputError, FleetInfeasibleError as make_fleet."""
    return waterfall_table(waterfall_fleets(routes_df, catalog, assumptions, levers, baseline, quotas, check))


def fleet_csv_text(result: FleetResult) -> str:
    """The fleet as a plain CSV (header on line 1), formula-safe as the plan CSV (a route named '=...' gets a
    leading apostrophe; fleetfacts.schema.unescape_formula reads it back), one line per deployment."""
    return result.deployments.astype(object).map(csv_cell).to_csv(index=False, lineterminator="\n")


def format_fleet(result: FleetResult) -> list[str]:
    """The fleet for a terminal: one line per deployment, then engineering and totals."""
    s = result.summary
    lines = [f"fleet ({s['levers']}): {len(result.deployments)} deployments, "
             f"GPUs at the busiest hour: {', '.join(f'{n} {g}' for g, n in s['gpus_by_type'].items()) or 'none'}"]
    for row in result.deployments.to_dict("records"):
        replicas = (f"{row['replicas_min']}-{row['replicas_max']}" if row["replicas_min"] != row["replicas_max"]
                    else f"{row['replicas_max']}")
        reserved = f" ({row['reserved_replicas']} reserved)" if row["reserved_replicas"] else ""
        attained = "" if pd.isna(row["sim_attainment"]) else f", simulated {row['sim_attainment']:.1%} within SLO"
        lines.append(f"  {row['deployment']} {row['kind']}: {row['engine']} {row['engine_version']} {row['gpu']} "
                     f"{row['precision']} tp{row['tp']} x {replicas}{reserved} ${row['gpu_usd_per_month']:,.0f}/month"
                     f"{attained} <- {row['routes']}")
    for row in result.engineering.to_dict("records"):
        what = " ".join(str(p) for p in (row["engine"], row["model"], row["gpu"]) if p)
        lines.append(f"  engineering {row['item']} {what}: ${row['usd_per_month']:,.0f}/month")
    lines.append(f"total ${s['total_usd_per_month']:,.0f}/month (GPUs ${s['gpu_usd_per_month']:,.0f}, engineering "
                 f"${s['eng_usd_per_month']:,.0f}); route by route ${s['per_route_usd_per_month']:,.0f}/month: "
                 f"saves ${s['savings_usd_per_month']:,.0f}/month")
    if s["always_on_usd_per_month"] > s["total_usd_per_month"] + COST_SLACK_USD:
        lines.append(f"the same deployments always on at their busiest hour: ${s['always_on_usd_per_month']:,.0f}/month")
    if s["kept_route_by_route"]:
        lines.append("the program's fleet was not cheaper once simulated: every route kept on its own option")
    if s["unplanned_routes"]:
        lines.append(f"not in the fleet (no feasible option in the route-by-route plan): "
                     f"{', '.join(s['unplanned_routes'])}")
    return lines
