"""The fleet optimiser's mixed-integer program: variables per candidate, kept route-by-route choice and period; rows
for assignment, capacity, quotas and engineering counted once; the prices it reads (scipy.optimize.milp on HiGHS).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from planner.planning.fleet_units import Candidate, Unit
from planner.sizing import costs
from planner.sizing.assumptions import Assumptions
from planner.traffic.routes import HOURS_PER_DAY

# HiGHS stops at this relative gap or time; the gap reached is reported with the fleet.
MIP_REL_GAP = 0.002
# Rounding slack when reading binary / integer values back from the solver.
INTEGRALITY_SLACK = 1e-6


@dataclass(frozen=True)
class Choice:
    """A whole-route option from the route-by-route plan (online: kept as planned; batch: a checked option)."""

    route: str
    model: str
    kind: str
    row: Mapping[str, Any]
    ops: costs.EngineOps

    @property
    def gpu_usd_per_month(self) -> float:
        return float(self.row["gpu_usd_per_month"])

    @property
    def gpus(self) -> int:
        return int(self.row["gpus"])


class _Program:
    """Variables (cost, bounds, integrality) and sparse constraint rows for scipy.optimize.milp."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.low: list[float] = []
        self.high: list[float] = []
        self.integer: list[int] = []
        self.entries: list[tuple[int, int, float]] = []
        self.row_low: list[float] = []
        self.row_high: list[float] = []

    def var(self, cost: float, high: float = math.inf, integer: bool = True) -> int:
        self.cost.append(cost)
        self.low.append(0.0)
        self.high.append(high)
        self.integer.append(1 if integer else 0)
        return len(self.cost) - 1

    def binary(self, cost: float) -> int:
        return self.var(cost, 1.0)

    def row(self, terms: Iterable[tuple[int, float]], low: float, high: float) -> None:
        r = len(self.row_low)
        self.entries += [(r, col, coef) for col, coef in terms]
        self.row_low.append(low)
        self.row_high.append(high)

    def solve(self, time_limit_s: float) -> Any:
        rows, cols, vals = zip(*self.entries, strict=True) if self.entries else ((), (), ())
        matrix = coo_matrix((vals, (rows, cols)), shape=(len(self.row_low), len(self.cost))).tocsr()
        return milp(np.array(self.cost), integrality=np.array(self.integer),
                    bounds=Bounds(np.array(self.low), np.array(self.high)),
                    constraints=[LinearConstraint(matrix, np.array(self.row_low), np.array(self.row_high))],
                    options={"time_limit": time_limit_s, "mip_rel_gap": MIP_REL_GAP, "disp": False})


@dataclass(frozen=True)
class Prices:
    """How a month is billed: hours in it, and the periods replicas may change in."""

    hours_per_month: float
    periods: int

    def reserved_usd(self, tp: int, price: costs.Price) -> float:
        """One reserved replica for the month."""
        return tp * price.usd_per_gpu_hour * self.hours_per_month

    def period_usd(self, tp: int, price: costs.Price) -> float:
        """One on-demand replica for one period every day of the month (always-on: the month)."""
        return tp * price.usd_per_gpu_hour * self.hours_per_month / self.periods

    def start_usd(self, tp: int, price: costs.Price, cold_start_min: float) -> float:
        """Starting one replica ahead of its hour every day: its cold start, billed."""
        return tp * price.usd_per_gpu_hour * cold_start_min / 60.0 * self.hours_per_month / HOURS_PER_DAY


@dataclass
class ProgramVars:
    x: dict[tuple[int, int], int] = field(default_factory=dict)
    kept: dict[int, int] = field(default_factory=dict)
    batch: dict[int, int] = field(default_factory=dict)
    reserved: dict[int, int] = field(default_factory=dict)
    on_demand: dict[tuple[int, int], int] = field(default_factory=dict)
    starts: dict[tuple[int, int], int] = field(default_factory=dict)


def build_program(units: list[Unit], candidates: list[Candidate], loads: dict[tuple[int, int], np.ndarray],
           kept: list[Choice], batch: list[Choice], prices: Prices, quotas: Mapping[str, int],
           a: Assumptions, updates: Mapping[str, float]) -> tuple[_Program, ProgramVars]:
    p, v = _Program(), ProgramVars()
    for k_j in loads:
        v.x[k_j] = p.binary(0.0)
    for i, choice in enumerate(kept):
        v.kept[i] = p.binary(choice.gpu_usd_per_month)
    for i, choice in enumerate(batch):
        v.batch[i] = p.binary(choice.gpu_usd_per_month)
    for j, c in enumerate(candidates):
        if c.base is not None:
            v.reserved[j] = p.var(prices.reserved_usd(c.tp, c.base))
        for h in range(prices.periods):
            v.on_demand[(j, h)] = p.var(prices.period_usd(c.tp, c.peak))
            if prices.periods > 1:
                v.starts[(j, h)] = p.var(prices.start_usd(c.tp, c.peak, c.cold_start_min), integer=False)
    _assignment_rows(p, v, units, kept, batch)
    _capacity_rows(p, v, candidates, loads, prices.periods)
    _quota_rows(p, v, candidates, kept, batch, prices.periods, quotas)
    _engineering(p, v, units, candidates, kept, batch, a, updates)
    return p, v


def _assignment_rows(p: _Program, v: ProgramVars, units: list[Unit], kept: list[Choice], batch: list[Choice]) -> None:
    """Each route served once: kept on its own option, whole by a candidate, or (mix) split, every bucket
    then served by a candidate."""
    kept_of = {c.route: v.kept[i] for i, c in enumerate(kept)}
    split = {u.route.name: p.binary(0.0) for u in units if not u.bucket.whole}
    columns: dict[int, list[int]] = {}
    for (k, _), col in v.x.items():
        columns.setdefault(k, []).append(col)
    for k, unit in enumerate(units):
        terms = [(col, 1.0) for col in columns.get(k, [])]
        name = unit.route.name
        if unit.bucket.whole:
            terms.append((kept_of[name], 1.0))
            if name in split:
                terms.append((split[name], 1.0))
            p.row(terms, 1.0, 1.0)
        else:
            p.row([*terms, (split[name], -1.0)], 0.0, 0.0)
    for route in {c.route for c in batch}:
        p.row([(v.batch[i], 1.0) for i, c in enumerate(batch) if c.route == route], 1.0, 1.0)


def _capacity_rows(p: _Program, v: ProgramVars, candidates: list[Candidate], loads: dict[tuple[int, int], np.ndarray],
                   periods: int) -> None:
    by_candidate: dict[int, list[tuple[int, np.ndarray]]] = {}
    for (k, j), load in loads.items():
        by_candidate.setdefault(j, []).append((v.x[(k, j)], load))
    for j in range(len(candidates)):
        for h in range(periods):
            terms = [(col, float(load[h])) for col, load in by_candidate.get(j, [])]
            terms.append((v.on_demand[(j, h)], -1.0))
            if j in v.reserved:
                terms.append((v.reserved[j], -1.0))
            p.row(terms, -math.inf, 0.0)
            if periods > 1:  # a replica started this hour was started ahead, for its cold start
                before = v.on_demand[(j, (h - 1) % periods)]
                p.row([(v.on_demand[(j, h)], 1.0), (before, -1.0), (v.starts[(j, h)], -1.0)], -math.inf, 0.0)


def _quota_rows(p: _Program, v: ProgramVars, candidates: list[Candidate], kept: list[Choice], batch: list[Choice],
                periods: int, quotas: Mapping[str, int]) -> None:
    for gpu, quota in quotas.items():
        fixed = [(v.kept[i], float(c.gpus)) for i, c in enumerate(kept) if c.row["gpu"] == gpu]
        fixed += [(v.batch[i], float(c.gpus)) for i, c in enumerate(batch) if c.row["gpu"] == gpu]
        for h in range(periods):
            terms = list(fixed)
            for j, c in enumerate(candidates):
                if c.curve.key.gpu == gpu:
                    terms.append((v.on_demand[(j, h)], float(c.tp)))
                    if j in v.reserved:
                        terms.append((v.reserved[j], float(c.tp)))
            p.row(terms, -math.inf, float(quota))


def _engineering(p: _Program, v: ProgramVars, units: list[Unit], candidates: list[Candidate], kept: list[Choice],
                 batch: list[Choice], a: Assumptions, updates: Mapping[str, float]) -> None:
    """Engineering in the objective: update work once per (engine-ops row, model) at the update rate of the
    busiest route it serves, builds once per GPU type too, adoption once per engine-ops row."""
    work: dict[tuple, dict[str, list[int]]] = {}  # (ops, model[, gpu]) -> route -> choice columns
    for (k, j), col in v.x.items():
        c = candidates[j]
        _use(work, c.ops, units[k].route.model, units[k].route.name, c.curve.key.gpu, c.peak.usd_per_gpu_hour, col)
    for i, choice in enumerate(kept):
        _use(work, choice.ops, choice.model, choice.route, choice.row["gpu"], choice_price(choice), v.kept[i])
    for i, choice in enumerate(batch):
        _use(work, choice.ops, choice.model, choice.route, choice.row["gpu"], choice_price(choice), v.batch[i])
    adoption: dict[costs.EngineOps, int] = {}
    for key, by_route in work.items():
        ops, per_update = key[0], per_update_usd(key, a)
        cost = p.var(1.0, integer=False)
        for route, cols in by_route.items():
            used = p.binary(0.0)
            p.row([(col, 1.0) for col in cols] + [(used, -float(len(cols)))], -math.inf, 0.0)
            p.row([(used, updates[route] * per_update), (cost, -1.0)], -math.inf, 0.0)
            if len(key) == 2 and a.adoption_amortise_months > 0:
                if ops not in adoption:
                    adoption[ops] = p.binary(ops.adoption_hours * a.engineer_usd_per_hour
                                             / a.adoption_amortise_months)
                p.row([(used, 1.0), (adoption[ops], -1.0)], -math.inf, 0.0)


def per_update_usd(key: tuple, a: Assumptions) -> float:
    """(ops, model): engineer work per update; (ops, model, gpu, price): build GPU-hours per update."""
    ops = key[0]
    if len(key) == 2:
        return ops.engineer_hours_per_update * a.engineer_usd_per_hour
    return ops.build_gpu_hours_per_update * key[3]


def _use(work: dict, ops: costs.EngineOps, model: str, route: str, gpu: str, price: float, col: int) -> None:
    work.setdefault((ops, model), {}).setdefault(route, []).append(col)
    if ops.build_gpu_hours_per_update > 0:
        work.setdefault((ops, model, gpu, price), {}).setdefault(route, []).append(col)


def choice_price(choice: Choice) -> float:
    return float(choice.row["usd_per_gpu_hour"])
