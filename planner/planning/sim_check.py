"""The plan's simulation check of a route's cheapest options: an online option sized on the latency door's fleet tier
(the route's one load, every SLO window), a batch option on the Job tier; and the option ranking it re-ranks with.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

import numpy as np

from planner.engine.transfer_physics import host_tier_gib, with_host_tier
from planner.latency import DEFAULT_ROUTER, ROUTERS
from planner.sizing import sizing
from planner.sizing.assumptions import Assumptions
from planner.sizing.batch import cheapest_batch_fleet
from planner.sizing.options import Option, WholeLog
from planner.traffic.prefixes import percent_text
from planner.traffic.routes import Route
from planner.traffic.workload import SECONDS_PER_HOUR, SIM_BATCH_SAMPLE, Requests

# The router a route with prefix structure is also priced behind (the lever against the assumed one): it sends a
# request to the replica caching its longest prefix, so a fleet may need fewer replicas for the same load.
PREFIX_ROUTER = "prefix-affinity"

# Simulation check: keep simulating the cheapest unchecked option until the SIM_CHECK_TOP cheapest
# (after re-pricing) are all simulated, at most SIM_CHECK_MAX per route (each simulates a few fleets).
SIM_CHECK_TOP = 2
SIM_CHECK_MAX = 8
# Rounding slack when turning a utilisation back into a replica count.
CAP_TOLERANCE = 1e-9


def _cheapest_unsimulated(options: list[Option], a: Assumptions) -> Option | None:
    """The best-ranked feasible option not yet simulated, if it is among the SIM_CHECK_TOP best; else None."""
    return next((o for o in ranked(options, a)[:SIM_CHECK_TOP] if not o.simulated), None)


def ranked(options: list[Option], a: Assumptions) -> list[Option]:
    """Feasible options in the order the plan prefers them (rank_key)."""
    return sorted((o for o in options if o.feasible), key=lambda o: rank_key(o, a))


def rank_key(option: Option, a: Assumptions) -> tuple:
    """Cheapest first; for an online route, options whose latency rests on no measurement go last
    unless the assumptions allow them (their TTFT is the engine model's alone, and optimistic)."""
    unverified = (option.route.traffic == "online" and not a.allow_unverified_latency
                  and option.latency_basis == "unverified")
    return (unverified, option.total_usd_per_month, option.sizing.gpus, option.name)


def online_simulation_check(route: Route, options: list[Option], a: Assumptions, requests: Requests) -> list[Option]:
    """Check the cheapest feasible online options by simulating their whole fleet serving `requests` (the route's
    one load, planner.traffic.workload.route_load) behind the assumed router (SLO attainment); an option it adds
    replicas to is re-priced and its latency re-predicted there (the others unchanged).  A load with prefix
    structure: the best option is also priced behind the other router (cheaper_router)."""
    if route.slo.empty:
        return options
    screened, options = list(options), list(options)
    for _ in range(SIM_CHECK_MAX):
        option = _cheapest_unsimulated(options, a)
        if option is None:
            break  # the cheapest options (after re-pricing) have all been simulated
        options[options.index(option)] = _simulate_online_option(option, a, requests, a.router)
    best = next(iter(ranked(options, a)), None)
    if best is not None and best.simulated and requests.blocks is not None:
        at = options.index(best)
        options[at] = cheaper_memory(cheaper_router(best, screened[at], a, requests), screened[at], a, requests)
    return options


def other_router(router: str) -> str:
    """The router a route with prefix structure is also priced behind: prefix-affinity, or the default
    (least-outstanding) when prefix-affinity is the assumption."""
    return PREFIX_ROUTER if router != PREFIX_ROUTER else DEFAULT_ROUTER


def cheaper_router(option: Option, screened: Option, a: Assumptions, requests: Requests) -> Option:
    """The simulated `option` and its `screened` self (before the simulation) sized behind the other router
    (other_router): the cheaper of the two fleets that hold every window (ties: the assumed router's), the other's
    replicas, $/month and prefix hit rate in its notes."""
    other = _simulate_online_option(screened, a, requests, other_router(option.router))
    keep, lose = (other, option) if other.feasible and (
        not option.feasible or other.total_usd_per_month < option.total_usd_per_month) else (option, other)
    return dataclasses.replace(keep, notes=join_notes(keep.notes, _router_note(lose)))


def cheaper_memory(option: Option, screened: Option, a: Assumptions, requests: Requests) -> Option:
    """Where the assumptions allow a host-memory KV tier (host_kv_gib > 0): the simulated `option` against its
    `screened` self with that tier behind each replica's prefix cache, behind the same router; the cheaper of the
    two fleets that hold every window (ties: without the tier), the other's replicas, $/month and prefix hit rate
    in its notes.  The tier (planner.engine.transfer_physics.with_host_tier) was measured once, on an H100."""
    if a.host_kv_gib <= 0:
        return option
    curve = with_host_tier(option.curve, a.host_kv_gib, a.host_gb_per_s)
    if curve is None:
        return dataclasses.replace(option, notes=join_notes(
            option.notes, f"no host KV tier priced: no model facts for {option.key.model} (its KV bytes per token)"))
    tiered = _simulate_online_option(dataclasses.replace(screened, curve=curve), a, requests, fleet_router(option, a))
    keep, lose = (tiered, option) if tiered.feasible and (
        not option.feasible or tiered.total_usd_per_month < option.total_usd_per_month) else (option, tiered)
    return dataclasses.replace(keep, notes=join_notes(keep.notes, _memory_note(lose, a.host_kv_gib)))


def _memory_note(option: Option, gib: float) -> str:
    """The fleet not kept: 'with a G GiB host KV tier (...): N replicas, $X/month, prefix hit rate H' or 'without
    the G GiB host KV tier (...): ...' (or why no fleet holds there); read back by memory_in_notes."""
    which = "with" if host_tier_gib(option.curve) > 0 else "without"
    return f"{which} a {gib:g} GiB host KV tier per replica (measured once, on an H100): {_priced_text(option)}"


_MEMORY_NOTE = re.compile(r"(with|without) a ([\d.]+) GiB host KV tier per replica \(measured once, on an H100\): "
                          r"([^;]*)")


@dataclass(frozen=True)
class OtherMemory:
    """The fleet the plan priced with the host KV tier setting it did not pick (`with_tier`: that fleet had the
    tier): its replicas, $/month and prefix hit rate, or why no fleet holds there (`reason`)."""

    with_tier: bool
    gib: float
    replicas: int | None = None
    usd_per_month: float | None = None
    hit_rate: float | None = None
    reason: str = ""


def memory_in_notes(notes: str) -> OtherMemory | None:
    """The other host-tier setting's fleet from a plan row's notes (_memory_note's text); None when none priced."""
    found = _MEMORY_NOTE.search(notes)
    if found is None:
        return None
    return OtherMemory(found.group(1) == "with", float(found.group(2)), *_read_priced(found.group(3)))


def _router_note(option: Option) -> str:
    """'behind prefix-affinity: N replicas, $X/month, prefix hit rate H' (or why no fleet holds there); read back
    by router_in_notes."""
    return f"behind {option.router}: {_priced_text(option)}"


def _priced_text(option: Option) -> str:
    """'N replicas, $X/month, prefix hit rate H' of a fleet a note sets beside the plan's, or why none holds."""
    if not option.feasible:
        return option.reason
    return (f"{option.replicas} replicas, ${option.total_usd_per_month:,.0f}/month, "
            f"prefix hit rate {percent_text(option.prefix_hit_rate)}")


def _read_priced(text: str) -> tuple[int | None, float | None, float | None, str]:
    """_priced_text read back: (replicas, $/month, hit rate (None where n/a), "") or (None, None, None, reason)."""
    priced = _PRICED.fullmatch(text.strip())
    if priced is None:
        return None, None, None, text.strip()
    hit = None if priced.group(3) == "n/a" else float(priced.group(3).rstrip("%")) / 100
    return int(priced.group(1)), float(priced.group(2).replace(",", "")), hit, ""


# _router_note's two forms, read back from a plan row's notes (the plan file has no columns for the other router).
_ROUTER_NOTE = re.compile(rf"behind ({'|'.join(map(re.escape, ROUTERS))}): ([^;]*)")
_PRICED = re.compile(r"(\d+) replicas, \$([\d,.]+)/month, prefix hit rate ([\d.]+%|n/a)")


@dataclass(frozen=True)
class OtherRouter:
    """The fleet the plan priced behind the router it did not pick: its replicas, $/month and prefix hit rate
    (None when its note gives none), or why no fleet holds behind it (`reason`)."""

    router: str
    replicas: int | None = None
    usd_per_month: float | None = None
    hit_rate: float | None = None
    reason: str = ""


def router_in_notes(notes: str) -> OtherRouter | None:
    """The other router's fleet from a plan row's notes (_router_note's text); None when they price none."""
    found = _ROUTER_NOTE.search(notes)
    if found is None:
        return None
    return OtherRouter(found.group(1), *_read_priced(found.group(2)))



def _simulate_online_option(option: Option, a: Assumptions, requests: Requests, router: str) -> Option:
    """The option's replica count from the fleet simulation of the route's one load behind `router`, judged by the
    one SLO verdict (fleetfacts.slo: every window and the attainment target), searched from its latency sizing and
    never below the utilisation cap's floor; the option is re-priced at that count and reports that fleet's
    latency and verdict."""
    screened = option.replicas
    search = sizing.search_fleet(option.curve, option.route, requests, screened, a.slo_attainment, router,
                                 floor=_cap_floor(option, a))
    option = dataclasses.replace(option, simulated=True, sized_replicas=screened, router=router,
                                 sim_attainment=search.check.attainment)
    if search.replicas is None:
        tried = max(r for r, _ in search.tried)
        return dataclasses.replace(
            option, feasible=False, sizing=sizing.with_latency(option.sizing, search.report, option.route, search.check),
            reason=f"simulation: no fleet up to {tried} replicas meets the SLO ({search.check.describe()})")
    option = dataclasses.replace(option, sim_replicas=search.replicas)
    notes = option.notes
    if search.replicas != screened:
        notes = join_notes(notes, f"one replica's share needs {screened} replicas; the fleet simulation "
                             f"({router}) needs {search.replicas} to hold the SLO in every "
                             f"{option.route.slo_window_s:g} s window ({requests.source})")
        option = option.resized(search.replicas, a, notes,
                                utilisation=option.utilisation * screened / search.replicas)
    option = dataclasses.replace(option, sizing=sizing.with_latency(option.sizing, search.report, option.route,
                                                                    search.check))
    around = tuple((n, c) for n, c in search.tried if n in (search.replicas, search.replicas - 1))
    return dataclasses.replace(option, window_checks=around)


def whole_log_alternative(option: Option, a: Assumptions, requests: Requests) -> WholeLog:
    """The option sized on the whole run's percentile alone (one window as long as the load, no attainment
    target), as other planners size, priced, with the SLO windows that fleet breaks (on the same simulations: a whole-run count is at most the
    per-window one)."""
    route, router = option.route, fleet_router(option, a)
    whole = sizing.search_fleet(option.curve, dataclasses.replace(route, slo_window_s=0.0), requests,
                                option.replicas, 0.0, router, floor=1, ceiling=option.replicas)
    count = whole.replicas or option.replicas
    check = sizing.fleet_latency(option.curve, route, count, requests, router).check(route.targets(a.slo_attainment))
    cost = option.resized(count, a, option.notes).cost.total_usd_per_month if count != option.replicas \
        else option.cost.total_usd_per_month
    return WholeLog(count, cost, check.windows_in_breach, check.windows)


def fleet_router(option: Option, a: Assumptions) -> str:
    """The router the option's fleet was sized behind: its simulation's, else the assumed one."""
    return option.router or a.router


def _cap_floor(option: Option, a: Assumptions) -> int:
    """The fewest replicas keeping the option's peak utilisation within the cap (a simulation never goes below)."""
    peak = option.sizing.peak_utilisation
    if not (math.isfinite(peak) and peak > 0):
        return 1
    # The tolerance keeps the screened count itself when its utilisation sits exactly on the cap.
    return max(1, math.ceil(option.replicas * peak / a.utilisation_cap - CAP_TOLERANCE))


def batch_simulation_check(route: Route, options: list[Option], a: Assumptions) -> list[Option]:
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
    sample = min(route.num_requests, SIM_BATCH_SAMPLE)
    lengths = (route.input.sample(sample, gen), route.output.sample(sample, gen))
    fleet = cheapest_batch_fleet(option.curve, lengths, route.deadline_hours * SECONDS_PER_HOUR,
                                          option.cost.usd_per_gpu_hour, option.tp, spot=a.pricing_type == "spot",
                                          total_requests=route.num_requests)
    screened = option.replicas
    option = dataclasses.replace(option, simulated=True, sized_replicas=screened,
                                 sim_replicas=fleet.replicas if fleet.feasible else math.nan)
    if not fleet.feasible:
        return dataclasses.replace(option, feasible=False, reason=f"simulation: {fleet.reason}")
    hours = fleet.wall_s / SECONDS_PER_HOUR
    notes = join_notes(option.notes, f"simulated job: {fleet.replicas} replicas finish in {hours:.2f} h "
                                f"(deadline {route.deadline_hours:g} h; the screen sized {screened})")
    return option.resized(fleet.replicas, a, notes, job_hours=hours)


def join_notes(*parts: object) -> str:
    return "; ".join(str(p) for p in parts if isinstance(p, str) and p)
