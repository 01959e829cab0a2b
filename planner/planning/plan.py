"""The Planning API: options per route, the cheapest feasible one, its runner-up and break-even.

    catalog = load_inputs()                      # bundled profiles (fitted), prices, engine-ops costs
    result = make_plan(routes_df, catalog, Assumptions())
    result.rows      # one PlanRow per route (schema PLAN); result.plan: the same as a DataFrame
    result.options   # every evaluated option, feasible or not, with its reason

The catalog (load_inputs, candidate_curves) is planner.planning.catalog, the routes table (load_routes,
validate_routes) planner.planning.route_table, the plan files (write_plan, read_plan) planner.planning.plan_files.

Expected outcomes (no profile for a model, no price for a GPU, an SLO nothing
meets) are rows with status "infeasible" and a reason, never exceptions.  A
malformed routes table raises InputError naming the line and the column.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetfacts.schema import (
    DEFAULT_CONFIG,
)
from fleetfacts.slo import SloCheck
from fleetfacts.specs import bundled_gpu_specs
from planner.engine.curves import BUNDLED_PROFILES_DIR, GroupKey
from planner.engine.transfer_physics import host_tier_gib
from planner.planning.catalog import (
    Catalog,
    candidate_curves,
    group_loo_error,
)
from planner.planning.route_table import validate_routes
from planner.planning.sim_check import (
    batch_simulation_check,
    fleet_router,
    join_notes,
    online_simulation_check,
    ranked,
    whole_log_alternative,
)
from planner.sizing import costs, sizing
from planner.sizing.assumptions import Assumptions
from planner.sizing.autoscaled import autoscaled
from planner.sizing.options import OPTION_COLUMNS, Option, evaluate_option, max_model_len, option_label
from planner.sizing.plan_row import PlanRow, idle_infeasible_columns, plan_frame, whole_log_columns
from planner.sizing.resampled import resampled_hours
from planner.sizing.sizing import LogRequests
from planner.traffic.logs import burst_descriptors, burst_text
from planner.traffic.prefixes import unbounded_share
from planner.traffic.routes import ALLOW_LISTS, Route
from planner.traffic.workload import Requests, RouteLog, route_load, route_log_load

__all__ = ["PlanResult", "RouteMap", "make_plan", "plan_coverage", "plan_sources"]

# ---------------------------------------------------------------- catalog


# ---------------------------------------------------------------- routes


# ---------------------------------------------------------------- planning

SOURCE_COLUMNS = ("route", "kind", "what", "source", "date")  # PlanResult.sources (plan_sources)


@dataclass(frozen=True, eq=False)
class PlanResult:
    """A plan: one PlanRow per route (schema PLAN), every evaluated option, the assumptions used, and per
    planned route the sources of its price and profile (SOURCE_COLUMNS)."""

    rows: tuple[PlanRow, ...]
    options: pd.DataFrame
    assumptions: Assumptions
    sources: pd.DataFrame = dataclasses.field(default_factory=lambda: pd.DataFrame(columns=list(SOURCE_COLUMNS)))
    # Per online route judged on its fleet: its SLO windows for the recommended count and one replica fewer
    # (window_timeline's columns).
    timelines: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)

    @cached_property
    def plan(self) -> pd.DataFrame:
        """The rows as a PLAN DataFrame (planner.sizing.plan_row.plan_frame), for the app's tables."""
        return plan_frame(self.rows)


# map(fn, routes) -> results in the same order: the builtin map, or a pool's map chosen at the CLI edge.
RouteMap = Callable[[Callable[[dict], Any], Iterable[dict]], Iterable[Any]]


def make_plan(routes_df: pd.DataFrame, catalog: Catalog, assumptions: Assumptions | None = None,
              check_by_simulation: bool = False, map_routes: RouteMap = map) -> PlanResult:
    """Plan every route: size each allowed option, price it, pick the cheapest feasible one.

    check_by_simulation: check the one-replica screen's replica count of the cheapest options by
    simulating continuous batching on the route's traffic (planner.latency.simulate), and
    correct it to the smallest fleet meeting every SLO for `slo_attainment` of
    requests (batch: the deadline); False keeps the screen's sizing (the fast what-if loop).
    map_routes: applies the per-route planning to every route, in order (routes are independent); a process
    or Ray pool's map spreads the simulation checks over cores or nodes.  Raises InputError only for a
    malformed routes table.
    """
    assumptions = assumptions or Assumptions()
    routes = validate_routes(routes_df)
    plan_rows: list[PlanRow] = []
    option_rows: list[dict[str, Any]] = []
    timelines: dict[str, pd.DataFrame] = {}
    plan_route = functools.partial(_plan_route, catalog=catalog, assumptions=assumptions,
                                   check_by_simulation=check_by_simulation)
    for plan_row, rows, timeline in map_routes(plan_route, routes.to_dict("records")):
        option_rows.extend(rows)
        plan_rows.append(plan_row)
        if timeline is not None:
            timelines[plan_row.route] = timeline
    options_df = pd.DataFrame(option_rows, columns=list(OPTION_COLUMNS))
    return PlanResult(tuple(plan_rows), options_df, assumptions, plan_sources(plan_rows, catalog), timelines)


def _plan_route(row: dict, catalog: Catalog, assumptions: Assumptions,
                check_by_simulation: bool) -> tuple[PlanRow, list[dict[str, Any]], pd.DataFrame | None]:
    """One route's plan row, option rows and SLO-window timeline (a module-level function, so process pools can
    pickle it)."""
    route = Route.from_row(row)
    curves, held_back = candidate_curves(route, catalog, assumptions.allow_prerelease)
    log, blocks = _route_log(route)
    # The one load every view of the chosen fleet replays (route_load), and the share of its prompt tokens a replica
    # prefills (1: cold; a load with prefix structure is sized first at what an unbounded cache leaves, then judged
    # by the simulation of its prefix caches).
    load = route_load(route, log, blocks) if check_by_simulation and route.traffic == "online" else None
    uncached = uncached_share(load)
    options = [evaluate_option(route, curve, catalog.price_book, catalog.ops_book, assumptions, log, uncached)
               for curve in curves]
    if load is not None:
        options = online_simulation_check(route, options, assumptions, load)
    elif check_by_simulation and route.traffic == "batch":
        options = batch_simulation_check(route, options, assumptions)
    plan_row = _plan_row(route, options, catalog, assumptions, held_back, log)
    if route.traffic == "online" and route.slo.tpot_ms is not None and route.output_len <= 1:
        plan_row = dataclasses.replace(plan_row, notes=join_notes(NO_TPOT_NOTE, plan_row.notes))
    chosen = next((o for o in options if plan_row.ok and o.name == plan_row.option and o.window_checks), None)
    if chosen is None or load is None:
        return plan_row, [option.to_row() for option in options], None
    requests = load
    chosen = dataclasses.replace(chosen, whole_log=whole_log_alternative(chosen, assumptions, requests))
    plan_row = dataclasses.replace(plan_row, **whole_log_columns(chosen),
                                   **idle_infeasible_columns(chosen.curve, requests.input_len, route.slo.ttft_ms))
    timeline = _timeline(chosen, assumptions, requests)
    plan_row = _with_resampled_hours(plan_row, chosen, assumptions, requests)
    plan_row = _with_autoscaled(plan_row, chosen, assumptions, requests)
    return plan_row, [option.to_row() for option in options], timeline


def uncached_share(load: Requests | None) -> float:
    """The share of the load's prompt tokens left to prefill behind an unbounded prefix cache (prefixes.
    unbounded_share); 1 without prefix structure or prompt tokens."""
    if load is None or load.blocks is None:
        return 1.0
    reused = unbounded_share(load.blocks, load.input_len)
    return 1.0 - reused if math.isfinite(reused) and reused > 0 else 1.0


def _timeline(option: Option, a: Assumptions, requests: Requests) -> pd.DataFrame:
    """The chosen option's SLO windows at replica counts from the whole-log one (or one fewer) up to its own
    (timeline_counts), each fleet priced: the minute-by-minute view and the cost-vs-breach trade-off (simulated
    here where the search did not)."""
    fewest = max(1, min(option.replicas - 1, option.whole_log.replicas if option.whole_log else option.replicas))
    counts = timeline_counts(fewest, option.replicas)
    checks = {n: c for n, c in option.window_checks if n in counts}
    for count in counts:
        if count not in checks:
            report = sizing.fleet_latency(option.curve, option.route, count, requests, fleet_router(option, a))
            checks[count] = report.check(option.route.targets(a.slo_attainment))
    costs = {n: option.resized(n, a, option.notes).cost.total_usd_per_month if n != option.replicas
             else option.cost.total_usd_per_month for n in checks}
    return window_timeline(sorted(checks.items()), option.replicas, costs)


# Fleet sizes a timeline holds at most: a fleet of thousands of replicas whose whole-log count is far below would
# otherwise simulate every count between (a 1e5 req/s route: 5,590 fleet simulations, a minute).
TIMELINE_FLEETS = 8


def timeline_counts(fewest: int, replicas: int) -> list[int]:
    """Every count from `fewest` to `replicas`, or TIMELINE_FLEETS of them: both ends, one fewer than `replicas`
    (the minute-by-minute view's N - 1) and the rest spread evenly between."""
    if replicas - fewest + 1 <= TIMELINE_FLEETS:
        return list(range(fewest, replicas + 1))
    spread = np.linspace(fewest, replicas - 1, TIMELINE_FLEETS - 1).round().astype(int).tolist()
    return sorted({*spread, replicas})


def _with_resampled_hours(row: PlanRow, option: Option, a: Assumptions, requests: Requests) -> PlanRow:
    """The plan row with how many hours drawn from the load's windows the recommended fleet holds, and the
    load's burst descriptors."""
    if requests.arrival_s.size >= 2 and requests.arrival_s[-1] > requests.arrival_s[0]:
        row = dataclasses.replace(row, load_bursts=burst_text(burst_descriptors(requests.arrival_s)))
    router = fleet_router(option, a)
    own = sizing.fleet_latency(option.curve, option.route, option.replicas, requests, router)  # the search's
    found = resampled_hours(option.curve, requests, option.replicas, option.route.targets(a.slo_attainment),
                            router, own=own)
    if found is None:
        return row
    return dataclasses.replace(row, resampled_hours=found.hours, holds_in_resampled_hours=found.holding)


def _with_autoscaled(row: PlanRow, option: Option, a: Assumptions, requests: Requests) -> PlanRow:
    """The plan row with the autoscaled option (planner.sizing.autoscaled); steady's figures, and a note saying
    so, when autoscaling cannot beat steady."""
    found = autoscaled(option.curve, requests, option.replicas,
                       option.route.targets(a.slo_attainment), a.scale_up_s, fleet_router(option, a))
    if found is None or row.windows_in_breach is None:
        return row
    if not found.beats_steady:
        return dataclasses.replace(row, autoscaled_floor=row.replicas, autoscaled_usd_per_month=row.total_usd_per_month,
                                   autoscaled_windows_in_breach=row.windows_in_breach,
                                   notes=join_notes(row.notes, found.describe()))
    assert found.check is not None
    c = option.cost
    usd = c.total_usd_per_month - c.gpu_usd_per_month * (1.0 - found.cost_ratio)  # only GPU-hours change
    return dataclasses.replace(row, autoscaled_floor=found.floor, autoscaled_usd_per_month=usd,
                               autoscaled_windows_in_breach=found.check.windows_in_breach,
                               notes=join_notes(row.notes, found.describe()))


def window_timeline(checks: Sequence[tuple[int, SloCheck]], recommended: int,
                    costs: Mapping[int, float] | None = None) -> pd.DataFrame:
    """One row per SLO window per fleet: fleet ("N replicas"), replicas, recommended (bool), the fleet's $/month
    (NaN when not given), window start (minutes), arrivals per minute, TTFT and TPOT at the SLO percentile (ms),
    breach (bool)."""
    frames = []
    for replicas, c in checks:
        minutes = np.maximum((c.end_s - c.start_s) / 60.0, 1e-9)
        frames.append(pd.DataFrame({
            "fleet": f"{replicas} replicas", "replicas": replicas, "recommended": replicas == recommended,
            "usd_per_month": (costs or {}).get(replicas, math.nan), "start_min": c.start_s / 60.0,
            "requests_per_min": c.requests / minutes, "ttft_ms": c.ttft_ms, "tpot_ms": c.tpot_ms,
            "breach": c.breach}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def fleet_tradeoff(timeline: pd.DataFrame) -> pd.DataFrame:
    """Per fleet size of a route's timeline: replicas, $/month, windows, windows in breach, worst TTFT and TPOT
    at the SLO percentile (ms), recommended: what buying fewer replicas costs in breach minutes."""
    if timeline.empty:
        return pd.DataFrame(columns=["replicas", "usd_per_month", "windows", "windows_in_breach",
                                     "worst_ttft_ms", "worst_tpot_ms", "recommended"])
    grouped = timeline.groupby("replicas", sort=True)
    return pd.DataFrame({
        "usd_per_month": grouped["usd_per_month"].first(), "windows": grouped.size(),
        "windows_in_breach": grouped["breach"].sum().astype(int), "worst_ttft_ms": grouped["ttft_ms"].max(),
        "worst_tpot_ms": grouped["tpot_ms"].max(), "recommended": grouped["recommended"].first(),
    }).reset_index()


# An online route whose requests have no second token (a log of 0- or 1-token outputs): its TPOT target is not judged.
NO_TPOT_NOTE = ("TPOT not judged: its requests have no second token (0 or 1 output tokens; a 0-token request is "
                "simulated as its prefill and first token), so TTFT and end-to-end latency decide")


def _route_log(route: Route) -> RouteLog:
    """The online route's request log (only its rows) and its prefix structure (route_log_load), (None, None)
    without one.  A log that cannot be read, or holds no rows of the route, raises InputError: never arrivals made
    up in its place, nor another route's traffic (the app lets a route name only a log bundled or uploaded in the
    session)."""
    return route_log_load(route)


# ---------------------------------------------------------------- choosing

def _plan_row(route: Route, options: list[Option], catalog: Catalog, a: Assumptions,
              held_back: list[str] | None = None, log: LogRequests | None = None) -> PlanRow:
    """The plan row of a route from its options: the best-ranked feasible one (rank_key), its runner-up,
    its ranges."""
    feasible = ranked(options, a)
    if not feasible:
        return PlanRow.infeasible(route.name, route.traffic, route.model,
                                  _infeasible_reason(route, options, catalog, a, held_back))
    best = feasible[0]
    runner = next((o for o in feasible[1:] if (o.key.engine, o.key.gpu) != (best.key.engine, best.key.gpu)), None)
    row = _widened(PlanRow.recommending(best), _option_loo_error(catalog, route, best.name))
    row = dataclasses.replace(row, **_runner_up_columns(best, runner),
                              **plan_ranges(row, best.sizing.peak_utilisation, a),
                              max_model_len=max_model_len(route, log), profile=_profile_files(route, best.key, catalog),
                              router=fleet_router(best, a) if route.traffic == "online" else "",
                              host_kv_gib=host_tier_gib(best.curve) if route.traffic == "online"
                              else math.nan)
    held = (f"{len(held_back)} pre-release engine build(s) not considered ({', '.join(held_back)}; allow_prerelease)"
            if held_back else "")
    return dataclasses.replace(row, notes=join_notes(row.notes, held, runner_up_caveat(row)))


def runner_up_caveat(row: PlanRow) -> str:
    """For a plan row whose runner-up costs less than the recommendation (negative savings_usd_per_month):
    'runner-up X is $Y/month cheaper but its latency is unverified (...)'; '' otherwise.

    rank_key puts a cheaper feasible option behind for that one reason: an online route's option with no
    latency measurement behind it, while allow_unverified_latency is off.
    """
    savings = row.savings_usd_per_month
    if not savings < 0:
        return ""
    return (f"runner-up {row.runner_up} is ${-savings:,.0f}/month cheaper but its latency is unverified (no "
            f"latency measurement behind it; allow_unverified_latency ranks it by cost)")


def _profile_files(route: Route, key: GroupKey, catalog: Catalog) -> str:
    """The profile files of the chosen curve's group, ';'-separated, relative to the project root if bundled;
    those with engine settings beside them (env.json: what `deploy` runs) first."""
    frame = catalog.profiles_df
    if "file" not in frame.columns:
        return ""
    group = {"engine": key.engine, "engine_version": key.engine_version, "gpu": key.gpu, "model": route.model,
             "precision": key.precision, "tp": key.tp, "config": key.config or DEFAULT_CONFIG}
    mask = np.ones(len(frame), dtype=bool)
    for column, value in group.items():
        mask &= (frame[column] == value).to_numpy()
    files = sorted(set(frame.loc[mask, "file"]), key=lambda f: (*_engine_settings_rank(Path(f)), f))
    return ";".join(_relative(Path(f)) for f in files)


def _engine_settings_rank(profile: Path) -> tuple[bool, bool]:
    """Sort key of a profile file for `deploy`: those with engine settings beside them (env.json) first, and of
    those the in-process engine's (its env.json records every scheduler limit; a server run's may not)."""
    env = profile.parent / "env.json"
    if not env.is_file():
        return True, True
    try:
        server = bool(json.loads(env.read_text(encoding="utf-8")).get("profile", {}).get("server"))
    except (OSError, ValueError, AttributeError):
        server = True
    return False, server


def _relative(path: Path) -> str:
    root = BUNDLED_PROFILES_DIR.parent
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


# A throughput interval never reaches below this share of its middle (keeps GPU ranges finite).
MIN_LOW_SHARE = 0.05


def _option_loo_error(catalog: Catalog, route: Route, name: str) -> float:
    key = next((k for k in catalog.curves if k.model == route.model and option_label(k) == name), None)
    return 0.0 if key is None else group_loo_error(catalog, key)


def _widened(row: PlanRow, loo_error: float) -> PlanRow:
    """The row with its throughput interval at least +-loo_error (the group's worst leave-one-out
    error, as `validate` reports it): a curve is never shown tighter than it predicts its own points."""
    mid = row.replica_output_tok_per_s
    if not loo_error or not math.isfinite(mid):
        return row
    low = min(row.replica_output_tok_per_s_low, mid * max(MIN_LOW_SHARE, 1.0 - loo_error))
    high = max(row.replica_output_tok_per_s_high, mid * (1.0 + loo_error))
    return dataclasses.replace(row, replica_output_tok_per_s_low=low, replica_output_tok_per_s_high=high)


def plan_ranges(row: PlanRow, peak_utilisation: float, a: Assumptions) -> dict[str, Any]:
    """GPUs and total $/month (as PlanRow fields) if a replica delivers the low or the high end of its
    throughput interval; {} when the row has no size or throughput to scale.

    The load a fleet carries is utilisation x replicas x throughput (online: the peak utilisation, as
    the option's sizing has it); at another throughput it needs that load over (cap x throughput) replicas
    (cap: utilisation_cap online, 1 for a batch deadline).  A fleet sized by latency or by the simulation
    check above its load is never shown smaller: its low end is its own size.  GPU dollars scale with GPUs
    (batch per-use: with the job's hours).
    """
    replicas, tp, mid = row.replicas, row.tp, row.replica_output_tok_per_s
    online = row.traffic == "online"
    load = peak_utilisation if online else row.utilisation
    cap = a.utilisation_cap if online else 1.0
    if replicas is None or tp is None or not all(math.isfinite(float(v)) for v in (mid, load)) or mid <= 0:
        return {}

    def needed(tok_s: float) -> int:
        return max(1, math.ceil(load * replicas * mid / (cap * tok_s) - 1e-9))

    load_bound = needed(mid) >= replicas
    low = min(replicas, needed(row.replica_output_tok_per_s_high)) if load_bound else replicas
    high = max(replicas, needed(row.replica_output_tok_per_s_low))
    per_use = row.traffic == "batch" and a.batch_billing == "per-use"
    return {"gpus_low": low * tp, "gpus_high": high * tp,
            "total_usd_per_month_low": _total_at(row, low / replicas, mid / row.replica_output_tok_per_s_high,
                                                 per_use),
            "total_usd_per_month_high": _total_at(row, high / replicas, mid / row.replica_output_tok_per_s_low,
                                                  per_use)}


def _total_at(row: PlanRow, fleet_ratio: float, hours_ratio: float, per_use: bool) -> float:
    gpu = row.gpu_usd_per_month * (hours_ratio if per_use else fleet_ratio)
    return row.total_usd_per_month - row.gpu_usd_per_month + gpu


def _runner_up_columns(best: Option, runner: Option | None) -> dict[str, Any]:
    """The runner-up's PlanRow fields: its name, total, what the pick saves and the break-even."""
    if runner is None:
        return {}
    u, note = breakeven(best, runner)
    return {"runner_up": runner.name, "runner_up_total_usd_per_month": runner.total_usd_per_month,
            "savings_usd_per_month": runner.total_usd_per_month - best.total_usd_per_month,
            "breakeven_updates_per_month": u, "breakeven_note": note}


def breakeven(best: Option, runner: Option) -> tuple[float, str]:
    """(updates/month at which the runner-up costs the same, '') or (NaN, why there is none).

    Only between different engine builds (engine or version): the same build on another GPU costs
    the same engineer hours per update and differs only in its build GPU-hour price, a crossing of
    price lines that says nothing about adopting an engine.
    """
    if (best.key.engine, best.key.engine_version) == (runner.key.engine, runner.key.engine_version):
        return math.nan, "same engine build as the runner-up: updates cost the same engineering work"
    u = costs.breakeven_updates(best.cost.fixed_usd_per_month, best.cost.usd_per_update,
                                runner.cost.fixed_usd_per_month, runner.cost.usd_per_update)
    if u is None:
        return math.nan, "never: the recommendation stays cheaper at any update rate"
    return u, ""


def _infeasible_reason(route: Route, options: list[Option], catalog: Catalog, a: Assumptions,
                       held_back: list[str] | None = None) -> str:
    if not options:
        reason = _no_profile_reason(route, catalog)
        if held_back:
            reason += (f"; pre-release engine builds not considered: {', '.join(held_back)} "
                       f"(allow them with --allow-prerelease)")
        return reason
    priced = [o for o in options if o.price is not None]
    where = f"provider {a.provider}" if a.provider else "any provider"
    if not priced:
        gpus = sorted({o.key.gpu for o in options})
        return (f"missing price: no {a.pricing_type} price from {where} for {', '.join(gpus)} "
                f"(add one to the prices table, or choose another provider or pricing type)")
    if unpriced := _unpriced_reason(route, options, priced, a, where):
        return unpriced
    misses = [o for o in priced if o.sizing.miss_ratio > 0]
    if misses:
        closest = min(misses, key=lambda o: o.sizing.miss_ratio)
        return f"no option meets the SLOs; closest: {closest.name} {closest.reason}"
    reasons = sorted({o.reason for o in options})
    return "no feasible option: " + "; ".join(reasons)


def _unpriced_reason(route: Route, options: list[Option], priced: list[Option], a: Assumptions, where: str) -> str:
    """The cause when the only options that meet the route's SLOs (or deadline) have no price: their only
    fault is the price, while the priced ones miss; '' otherwise."""
    fits = sorted({o.key.gpu for o in options if o.price is None and o.reason.startswith("no price")})
    if not fits:
        return ""
    gpus, goal = ", ".join(fits), "deadline" if route.traffic == "batch" else "SLOs"
    return (f"missing price: only options on {gpus} meet the {goal}, and there is no {a.pricing_type} price "
            f"from {where} for {gpus} (the priced GPUs, {', '.join(sorted({o.key.gpu for o in priced}))}, miss "
            f"it): choose another provider, or add a {gpus} price (a prices file: --prices, or the app's "
            f"prices table)")


def _no_profile_reason(route: Route, catalog: Catalog) -> str:
    profiled = sorted({f"{k.engine}/{k.gpu}/{k.precision}/tp{k.tp}" for k in catalog.curves if k.model == route.model})
    if not profiled:
        return f"no profile for model {route.model} on any GPU"
    known = sorted(set(bundled_gpu_specs()) | {k.gpu for k in catalog.curves})
    unknown = [gpu for gpu in route.allowed("gpus") if gpu not in known]
    if unknown:
        return f"unknown GPU {unknown[0]!r} in gpus (known: {', '.join(known)})"
    limits = ", ".join(f"{c}={route.allow_list_text(c)}" for c in ALLOW_LISTS if route.allowed(c))
    return (f"no profile for model {route.model} on any allowed GPU/engine ({limits}); "
            f"profiled: {', '.join(profiled)}")


# ---------------------------------------------------------------- totals, sources

def plan_coverage(rows: Sequence[PlanRow]) -> str:
    """What a plan's totals cover: '4 of 4 routes', or '3 of 4 routes; chat infeasible'."""
    bad = [r.route for r in rows if not r.ok]
    text = f"{len(rows) - len(bad)} of {len(rows)} routes"
    return f"{text}; {', '.join(bad)} infeasible" if bad else text


def plan_sources(plan: Sequence[PlanRow], catalog: Catalog) -> pd.DataFrame:
    """Per planned route: its GPU price's source and the sources of the profile rows its curve was fitted to."""
    rows = []
    for r in plan:
        if not r.ok:
            continue
        rows.append({"route": r.route, "kind": "price", "what": f"{r.gpu} GPU-hour", "source": r.price_source,
                     "date": ""})
        rows.extend({"route": r.route, "kind": "profile", "what": p["what"], "source": p["source"],
                     "date": p["date"]} for p in _profile_sources(r, catalog.profiles_df))
    return pd.DataFrame(rows, columns=list(SOURCE_COLUMNS))


def _profile_sources(row: PlanRow, profiles: pd.DataFrame) -> list[dict[str, str]]:
    if profiles.empty:
        return []
    match = profiles[(profiles["engine"] == row.engine) & (profiles["engine_version"] == row.engine_version)
                     & (profiles["gpu"] == row.gpu) & (profiles["precision"] == row.precision)
                     & (profiles["tp"] == row.tp)
                     & (profiles["config"].replace("", DEFAULT_CONFIG).fillna(DEFAULT_CONFIG) == row.engine_config)]
    counts = match.groupby(["provenance", "source", "date"]).size()
    return [{"what": f"{n} {prov} profile point(s)", "source": src, "date": str(date)}
            for (prov, src, date), n in counts.items()]


# ---------------------------------------------------------------- plan files


