"""The simulation check of a saved plan: each planned route simulated on the fleet the plan names.

`simulate_plan(routes, plan_rows, curves)` -> one RouteSimulation per planned route
(online: the route's one load (planner.traffic.workload.route_load) on the planned fleet behind its router,
judged by the one SLO verdict (fleetfacts.slo), through the latency door's fleet tier, so it says what `plan`
said; batch: makespan against the deadline); `format_simulations` turns them into text.  The simulator itself
is planner.latency.simulate; `python -m planner simulate` is the command.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fleetfacts.errors import InputError
from fleetfacts.slo import SloCheck
from planner.engine.curves import Curve, CurveLike, GroupKey, find_curve
from planner.latency import DEFAULT_ROUTER, Job, SimResult, predict
from planner.sizing.plan_row import PlanRow
from planner.sizing.sizing import fleet_latency
from planner.traffic.routes import Route
from planner.traffic.workload import (
    SIM_BATCH_SAMPLE,
    LogRequests,
    route_load,
    route_log_load,
    synthetic_requests,
)

# What `planner simulate` prints of each simulated route.
SHOWN_METRICS = ("ttft", "tpot", "e2e")
SHOWN_PERCENTILES = (50, 95, 99)


@dataclass(frozen=True, eq=False)
class RouteSimulation:
    """One planned route simulated on its fleet: online -> SimResult; batch -> makespan vs deadline."""

    route: str
    traffic: str
    option: str
    replicas: int
    source: str
    result: SimResult | None = None
    makespan_s: float = math.nan
    deadline_s: float = math.nan
    note: str = ""
    check: SloCheck | None = None

    def record(self) -> dict[str, Any]:
        """A flat, JSON-safe dict (NaN -> None)."""
        out: dict[str, Any] = {"route": self.route, "traffic": self.traffic, "option": self.option,
                               "replicas": self.replicas, "source": self.source, "note": self.note}
        if self.result is not None:
            out.update(self.result.summary())
        if self.check is not None:
            c = self.check
            out.update(slo_holds=c.ok, attainment=c.attainment, slo_attainment=c.attainment, windows=c.windows,
                       windows_in_breach=c.windows_in_breach, ttft_worst_window_ms=c.worst_ttft_ms,
                       tpot_worst_window_ms=c.worst_tpot_ms, busiest_window_start_s=c.busiest_window_start_s,
                       verdict=c.describe())
        if self.traffic == "batch":
            out.update(makespan_s=self.makespan_s, deadline_s=self.deadline_s)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def simulate_plan(routes: pd.DataFrame, plan: Sequence[PlanRow], curves: dict[GroupKey, Curve],
                  logs_by_route: Mapping[str, LogRequests] | None = None,
                  seed: int = 0, n_requests: int | None = None, router: str = DEFAULT_ROUTER,
                  attainment: float = 0.99) -> list[RouteSimulation]:
    """Simulate every planned (status ok) route of `plan` on the fleet it names.

    routes: the ROUTES frame the plan was made from; plan: its rows (PlanResult.rows, or
    planner.sizing.plan_row.plan_rows of a plan read from a file); curves: fitted curves
    (planner.planning.catalog.load_inputs().curves).  Raises
    InputError for a plan route missing from `routes`, NoCurveError when its
    curve is not fitted.  logs_by_route: a log to replay instead of a route's own (as route_load replays
    one); n_requests: that many synthetic requests instead of the route's load; router and attainment: the plan's
    assumptions.
    """
    if seed < 0:
        raise InputError(f"--seed: expected a whole number >= 0, got {seed}")
    by_name = {str(r["name"]): r for r in routes.to_dict("records")}
    out = []
    for p in plan:
        if not p.ok:
            continue
        row = by_name.get(p.route)
        if row is None:
            raise InputError(f"plan route {p.route!r} is not in the routes file")
        replicas, tp = _sizes(p)
        # A plan written before engine_config existed has none: find_curve then prefers the default config.
        curve = find_curve(curves, p.engine, p.gpu, row["model"], p.precision, tp, p.engine_version,
                           p.engine_config or None)
        route = Route.from_row(row)
        log = (logs_by_route or {}).get(p.route)
        sim = _simulate_route(route, curve, replicas, p.option, log, seed, n_requests, p.router or router, attainment)
        out.append(sim)
    return out


def _sizes(plan_row: PlanRow) -> tuple[int, int]:
    """(replicas, tp) of a planned row; InputError when it has no replica or no GPU per replica to simulate."""
    for column in ("replicas", "tp"):
        value = getattr(plan_row, column)
        if value is None or value < 1:
            raise InputError(f"plan route {plan_row.route!r}, column {column!r}: expected a whole number >= 1 "
                             f"for a planned (status ok) route, got {'<NA>' if value is None else value}")
    assert plan_row.replicas is not None and plan_row.tp is not None
    return plan_row.replicas, plan_row.tp


def _simulate_route(route: Route, curve: CurveLike, replicas: int, option: str, log: LogRequests | None, seed: int,
                    n_requests: int | None, router: str, attainment: float) -> RouteSimulation:
    if route.traffic == "batch":
        n = min(route.num_requests, SIM_BATCH_SAMPLE)
        inp = route.input.sample(n, seed)
        out = route.output.sample(n, seed + 1)
        makespan = predict(curve, Job(inp, out, replicas, route.num_requests)).makespan_s
        deadline = route.deadline_hours * 3600.0
        note = "meets the deadline" if makespan <= deadline else "MISSES the deadline"
        return RouteSimulation(route.name, "batch", option, replicas, "lengths sampled from the route's quantiles",
                               makespan_s=makespan, deadline_s=deadline, note=note)
    if n_requests is not None:
        requests = synthetic_requests(route, n_requests, seed)
    else:
        own, blocks = (log, None) if log is not None else route_log_load(route)  # a given log: no prefixes read
        requests = route_load(route, own, blocks)
    report = fleet_latency(curve, route, replicas, requests, router)
    check = report.check(route.targets(attainment)) if not route.slo.empty else None
    return RouteSimulation(route.name, "online", option, replicas, report.load, report.results[0], check=check)


# Columns of one replica's requests (replica_requests): a request log measure verify --assigned replays as is.
REPLICA_COLUMNS = ("timestamp", "input_len", "output_len", "predicted_ttft_ms", "predicted_tpot_ms", "replica")


REPLICA_WINDOWS = ("busiest", "worst")


def fleet_window(sim: RouteSimulation, window: str = "busiest") -> tuple[float, float] | None:
    """(start, end) s of the route's busiest SLO window ("busiest": the most arrivals) or the one furthest over (or
    closest to) its targets ("worst": the plan's worst-window columns), pooled over the fleet; None without a
    verdict (a batch route, or no window judged)."""
    if window not in REPLICA_WINDOWS:
        raise InputError(f"replica window: expected one of {', '.join(REPLICA_WINDOWS)}, got {window!r}")
    if sim.result is None or sim.check is None or not sim.check.windows:
        return None
    w = sim.check.worst_window if window == "worst" else sim.check.busiest_window
    return float(sim.check.start_s[w]), float(sim.check.end_s[w])


def replica_requests(sim: RouteSimulation, window: str = "busiest", replica: int | None = None) -> pd.DataFrame:
    """The requests the router sent to one replica of an online route's simulated fleet, at the planned load's
    times, with the fleet simulation's prediction per request: what a one-GPU check of the planned fleet replays.
    window "busiest": the replica that took the most requests in the busiest SLO window; "worst": in the window
    furthest over (or closest to) its targets (the plan's worst-window columns), the replica whose requests there
    fare worst (highest TTFT at the route's percentile).  Without a verdict: the replica that took the most.
    replica: that replica's requests instead (every replica's share of one window, replayed one after another and
    pooled, is the fleet's window)."""
    r = sim.result
    if r is None:
        raise InputError(f"route {sim.route!r} is a batch route: no requests to assign")
    bounds = fleet_window(sim, window)
    inside = np.ones(r.n, dtype=bool) if bounds is None else (r.arrival_s >= bounds[0]) & (r.arrival_s <= bounds[1])
    if replica is not None:
        if not 0 <= replica < r.replicas:
            raise InputError(f"replica {replica}: the route's fleet has replicas 0 to {r.replicas - 1}")
    elif window == "worst" and bounds is not None and sim.check is not None:
        pct = sim.check.targets.percentile
        scores = [float(np.nanpercentile(r.ttft_s[inside & (r.replica == k)], pct))
                  if np.isfinite(r.ttft_s[inside & (r.replica == k)]).any() else -np.inf for k in range(r.replicas)]
        replica = int(np.argmax(scores))
    else:
        replica = int(np.bincount(r.replica[inside], minlength=r.replicas).argmax())
    mine = r.replica == replica
    return pd.DataFrame({"timestamp": r.arrival_s[mine], "input_len": r.input_len[mine],
                         "output_len": r.output_len[mine], "predicted_ttft_ms": r.ttft_s[mine] * 1000,
                         "predicted_tpot_ms": r.tpot_s[mine] * 1000, "replica": replica})[list(REPLICA_COLUMNS)]


def format_simulations(sims: Sequence[RouteSimulation]) -> list[str]:
    """One block of text lines per route: attainment and p50/p95/p99 of TTFT, TPOT and e2e (ms)."""
    lines = []
    for s in sims:
        head = f"{s.route} ({s.traffic}, {s.option} x{s.replicas}): {s.source}"
        if s.result is None:
            lines += [head, f"  makespan {s.makespan_s / 3600:.2f} h vs deadline {s.deadline_s / 3600:.2f} h: {s.note}"]
            continue
        r = s.result
        slo = s.check.targets.describe() if s.check is not None else "no SLO"
        lines += [head, f"  {r.n} requests, SLO: {slo}"
                  + (f", {r.rejected} rejected (longer than the KV cache)" if r.rejected else "")]
        for metric in SHOWN_METRICS:
            values = "  ".join(f"p{p} {r.percentile_ms(metric, p):9.1f}" for p in SHOWN_PERCENTILES)
            lines.append(f"  {metric.upper():5s} ms  {values}")
        if s.check is not None:
            lines.append(f"  SLO verdict: {s.check.describe()}")
            lines += [f"    {line}" for line in s.check.window_lines()]
    return lines
