"""The simulation check of a saved plan: each planned route simulated on the fleet the plan names.

`simulate_plan(routes, plan_rows, curves)` -> one RouteSimulation per planned route
(online: SLO attainment and latency percentiles; batch: makespan against the
deadline); `format_simulations` turns them into text.  The simulator itself
is planner.latency.simulate; `python -m planner simulate` is the command.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fleetfacts.errors import InputError
from planner.engine.curves import Curve, CurveLike, GroupKey, find_curve
from planner.latency.simulate import METRICS, PERCENTILES, SimResult, batch_makespan, check_fleet, simulate_requests
from planner.sizing.plan_row import PlanRow
from planner.traffic.routes import Route
from planner.traffic.workload import (
    DEFAULT_SIM_REQUESTS,
    SIM_BATCH_SAMPLE,
    SIM_MAX_REPLICAS,
    Requests,
    synthetic_requests,
    thin_requests,
)

MAX_FULL_REPLAY_REPLICAS = 1024


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

    def record(self) -> dict[str, Any]:
        """A flat, JSON-safe dict (NaN -> None)."""
        out: dict[str, Any] = {"route": self.route, "traffic": self.traffic, "option": self.option,
                               "replicas": self.replicas, "source": self.source, "note": self.note}
        if self.result is not None:
            out.update(self.result.summary())
        if self.traffic == "batch":
            out.update(makespan_s=self.makespan_s, deadline_s=self.deadline_s)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def simulate_plan(routes: pd.DataFrame, plan: Sequence[PlanRow], curves: dict[GroupKey, Curve],
                  requests_by_route: Mapping[str, Requests] | None = None,
                  seed: int = 0, n_requests: int | None = None, router: str = "jsq"
                  ) -> list[RouteSimulation]:
    """Simulate every planned (status ok) route of `plan` on the fleet it names.

    routes: the ROUTES frame the plan was made from; plan: its rows (PlanResult.rows, or
    planner.sizing.plan_row.plan_rows of a plan read from a file); curves: fitted curves
    (planner.planning.plan.load_inputs().curves); requests_by_route: replayed requests
    per route name (planner.traffic.logs), others get synthetic ones: n_requests of
    them, or (None) a steady-state horizon on at most SIM_MAX_REPLICAS replicas
    with their share of the traffic (planner.traffic.workload.SteadyTraffic).  Raises
    InputError for a plan route missing from `routes`, NoCurveError when its
    curve is not fitted.
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
        given = (requests_by_route or {}).get(p.route)
        out.append(_simulate_route(Route.from_row(row), curve, replicas, p.option, given, seed, n_requests, router))
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


def _simulate_route(route: Route, curve: CurveLike, replicas: int, option: str, given: Requests | None, seed: int,
                    n_requests: int | None, router: str) -> RouteSimulation:
    if route.traffic == "batch":
        n = min(route.num_requests, SIM_BATCH_SAMPLE)
        inp = route.input.sample(n, seed)
        out = route.output.sample(n, seed + 1)
        makespan = batch_makespan(curve, (inp, out), replicas, route.num_requests)
        deadline = route.deadline_hours * 3600.0
        note = "meets the deadline" if makespan <= deadline else "MISSES the deadline"
        return RouteSimulation(route.name, "batch", option, replicas, "lengths sampled from the route's quantiles",
                               makespan_s=makespan, deadline_s=deadline, note=note)
    if given is None and n_requests is None:
        result, source = check_fleet(route, curve, replicas, router=router, seed=seed)
        return RouteSimulation(route.name, "online", option, replicas, source, result)
    requests = given or synthetic_requests(route, n_requests or DEFAULT_SIM_REQUESTS, seed)
    # A replayed log runs on the whole fleet up to this many replicas (exact, and bounded by the log);
    # a larger fleet (memory per replica) is simulated as a subset with its share of the requests.
    simulated = replicas if replicas <= MAX_FULL_REPLAY_REPLICAS else SIM_MAX_REPLICAS
    source = requests.source
    if simulated < replicas:  # a representative subset, with its share of the requests (bounded memory)
        requests = thin_requests(requests, simulated / replicas, seed)
        source = f"{simulated} of {replicas} replicas with their share of the requests; {requests.source}"
    result = simulate_requests(curve, requests, simulated, router, route.slo)
    return RouteSimulation(route.name, "online", option, replicas, source, result)


def format_simulations(sims: Sequence[RouteSimulation]) -> list[str]:
    """One block of text lines per route: attainment and p50/p95/p99 of TTFT, TPOT and e2e (ms)."""
    lines = []
    for s in sims:
        head = f"{s.route} ({s.traffic}, {s.option} x{s.replicas}): {s.source}"
        if s.result is None:
            lines += [head, f"  makespan {s.makespan_s / 3600:.2f} h vs deadline {s.deadline_s / 3600:.2f} h: {s.note}"]
            continue
        r = s.result
        att = "n/a (no SLO)" if math.isnan(r.attainment) else f"{r.attainment * 100:.2f}%"
        lines += [head, f"  {r.n} requests, SLO ({r.slo.describe()}) attainment {att}"
                  + (f", {r.rejected} rejected (longer than the KV cache)" if r.rejected else "")]
        for metric in METRICS:
            values = "  ".join(f"p{p} {r.percentile_ms(metric, p):9.1f}" for p in PERCENTILES)
            lines.append(f"  {metric.upper():5s} ms  {values}")
    return lines
