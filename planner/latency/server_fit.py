"""Latency under load: the OpenAI server fitted on open-loop rows, and its check (predictions: planner.latency.door).

A curve (planner.engine.curves) models the engine; the simulator (planner.latency.simulate)
replays arrivals through it, with async scheduling where the engine does it.
What a client of an OpenAI-compatible server sees on top is the server
(planner.engine.frontend): its front end's delay, and its engine's prefill speed under
serving loads.  This module:

- fits a group's server on its open-loop server rows (`mode` rate), each row's
  arrivals replayed exactly (`arrival_seed`, fleetfacts.arrivals) through the
  engine model with the row's caps.  First the prefill scale, from TPOT alone
  (the front end delays a request's first token and so its end alike: TPOT is
  the engine's); then the front end's delay parameters, so that the simulated
  TTFT p50 and p99 match the measured ones (least squares on log ratios; the
  engine is simulated once per row, the front end is added to it);
- lends a fitted front end to options without server rows, labelled
  `transferred` (same engine, preferring the same GPU and model; the prefill
  scale only to the same GPU);
- checks it all leave-one-row-out (`validate_latency`): each server row is
  predicted by a curve and server fitted without it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from fleetfacts.arrivals import arrival_times
from fleetfacts.schema import PROFILE_GROUP
from planner.engine.curves import Curve, GroupKey, fit_group, row_caps
from planner.engine.fitcache import memo
from planner.engine.frontend import FrontEnd, StreamLoad, stream_load
from planner.engine.physics_prior import fit_with_physics
from planner.latency.door import pct_ms, pcts_ms
from planner.latency.simulate import SimResult, simulate

log = logging.getLogger(__name__)

# Bounds of the front-end delay parameters (seconds): physical (non-negative), and wide enough that no fit
# of the H200 rows sits on them.  Order as planner.engine.frontend.PARAMS.
LOWER = (0.0, 0.0, 0.0, 0.0, 1e-4)
UPPER = (0.2, 1e-4, 0.05, 1e-3, 1.0)
START = (0.005, 1e-6, 0.001, 5e-5, 0.02)
# Typical size of each parameter (they span four orders of magnitude), and a cap on the fit's evaluations.
X_SCALE = (0.005, 1e-6, 0.001, 2e-5, 0.02)
MAX_EVALUATIONS = 200
# Repeats of one point spread 5-15% on the shared H200, and a few rows further (the chat pair 2x): residuals
# (log ratios) beyond this scale count linearly, not quadratically (soft-L1 loss), so no row dominates a fit.
ROBUST_SCALE = 0.15
# p99 of a 20-300-request point is its one to three slowest requests: it weighs half of p50 in the fits.
P99_WEIGHT = 0.5
# The prefill scale is simulated at these values and interpolated in between (a quadratic per row and
# percentile of log TPOT), searched on [first, last]: prefill 30% faster to 10% slower than the curve's.
PREFILL_SCALE_GRID = (0.7, 0.9, 1.1)
PREFILL_SCALE_STEPS = 81
# A weak prior on log(prefill scale) centred on the curve (1), a tie-breaker: where the rows' TPOT barely
# depends on the prefill speed (light loads, decode-heavy shapes) the scale stays near 1.  Weak, because the
# rows that do depend on it say so loudly (TPOT 28 vs 47 ms at code 1500/30 22 req/s for scales 0.9 and 1).
PREFILL_SCALE_PRIOR_SD = 1.0
# Rows without a recorded arrival seed are simulated with this many draws of their arrival process.
UNSEEDED_DRAWS = 3


# ---------------------------------------------------------------- rows

def server_rows(group: pd.DataFrame) -> pd.DataFrame:
    """A group's open-loop rows with measured TTFT percentiles (the rows a server is fitted on)."""
    ok = group["status"].fillna("ok").eq("ok") if "status" in group else True
    rows = group[(group["mode"] == "rate") & ok & (group["ttft_p50_ms"] > 0) & (group["ttft_p99_ms"] > 0)]
    return rows[rows["request_rate"] > 0]


def row_arrivals(row: pd.Series) -> list[np.ndarray]:
    """The arrivals a row was measured under: its own draw when it records the seed, else a few draws."""
    n, rate, arrival = int(row["num_requests"]), float(row["request_rate"]), str(row["arrival"] or "poisson")
    seed = row.get("arrival_seed")
    if seed is not None and not pd.isna(seed):
        return [np.asarray(arrival_times(n, rate, arrival, int(seed)))]
    return [np.asarray(arrival_times(n, rate, arrival, s)) for s in range(UNSEEDED_DRAWS)]


def realized_rate(row: pd.Series) -> float:
    """Requests/s the row's arrivals really drew ((N - 1) / span; short points land 0.74-1.32x nominal)."""
    rates = [(t.size - 1) / float(t[-1] - t[0]) for t in row_arrivals(row) if t.size > 1 and t[-1] > t[0]]
    return float(np.mean(rates)) if rates else float(row["request_rate"])


@dataclasses.dataclass(frozen=True)
class EngineRun:
    """One server row replayed through the engine model alone (no front-end delay)."""

    row: pd.Series
    runs: tuple[SimResult, ...]

    def ttft_s(self) -> np.ndarray:
        return np.concatenate([r.ttft_s for r in self.runs])

    def tpot_ms(self, pct: float) -> float:
        return pct_ms(np.concatenate([r.tpot_s for r in self.runs]), pct)

    def loads(self) -> list[StreamLoad]:
        """What the front end met in each run (planner.engine.frontend.stream_load)."""
        return [stream_load(r.arrival_s, r.arrival_s + r.ttft_s, r.arrival_s + r.e2e_s, r.output_len) for r in self.runs]


def replay_row(curve: Curve, row: pd.Series, prefill_scale: float = 1.0) -> EngineRun:
    """Simulate `row`'s arrivals and fixed lengths on `curve` with the caps the row reports, engine only."""
    engine = dataclasses.replace(curve, caps=row_caps(row, curve.caps), front_end=FrontEnd.engine_only(prefill_scale))
    i, o = int(row["input_len"]), int(row["output_len"])
    runs = tuple(simulate(engine, t, [i] * t.size, [o] * t.size) for t in row_arrivals(row))
    return EngineRun(row, runs)


# ---------------------------------------------------------------- fitting: prefill scale

def _tpot_residuals(run: EngineRun) -> tuple[float, float]:
    """Weighted log(simulated / measured) TPOT p50 and p99 of one replayed row (0 where not measured)."""
    out = []
    for pct, weight in ((50, 1.0), (99, P99_WEIGHT)):
        measured = run.row.get(f"tpot_p{pct}_ms")
        simulated = run.tpot_ms(pct)
        ok = measured is not None and not pd.isna(measured) and float(measured) > 0 and math.isfinite(simulated) \
            and simulated > 0
        out.append(weight * math.log(simulated / float(measured)) if ok else 0.0)
    return out[0], out[1]


def fit_prefill_scale(curve: Curve, rows: pd.DataFrame) -> float:
    """The prefill scale (planner.engine.frontend) whose replayed TPOT p50/p99 best match `rows`', with a prior at 1.

    Each row is simulated at PREFILL_SCALE_GRID; its residuals are interpolated quadratically in between.
    """
    grid = np.array(PREFILL_SCALE_GRID)
    resid = np.array([[_tpot_residuals(replay_row(curve, row, s)) for s in grid] for _, row in rows.iterrows()])
    series = resid.transpose(1, 0, 2).reshape(len(grid), -1)       # grid point x (row, percentile)
    coefficients = np.polyfit(grid, series, 2)
    scales = np.linspace(grid[0], grid[-1], PREFILL_SCALE_STEPS)
    fitted = np.vander(scales, 3) @ coefficients                   # scale x (row, percentile)
    objective = np.sum(_soft_l1(fitted), axis=1) + (np.log(scales) / PREFILL_SCALE_PRIOR_SD) ** 2
    return float(scales[int(np.argmin(objective))])


def _soft_l1(residuals: np.ndarray) -> np.ndarray:
    """scipy's soft-L1 loss of residuals at ROBUST_SCALE: r^2 for small r, 2*scale*|r| for large."""
    z = (residuals / ROBUST_SCALE) ** 2
    return 2.0 * ROBUST_SCALE**2 * (np.sqrt(1.0 + z) - 1.0)


# ---------------------------------------------------------------- fitting: front-end delays

@dataclasses.dataclass(frozen=True)
class _FitRow:
    """What the fit evaluates per row, computed once: per run, engine TTFTs and the load its front end met."""

    runs: tuple[tuple[np.ndarray, StreamLoad], ...]
    input_len: float
    measured_ms: tuple[float, float]   # TTFT p50, p99

    @classmethod
    def of(cls, run: EngineRun) -> _FitRow:
        parts = tuple(zip((r.ttft_s for r in run.runs), run.loads(), strict=True))
        return cls(parts, float(run.row["input_len"]), (float(run.row["ttft_p50_ms"]), float(run.row["ttft_p99_ms"])))

    def ttft_s(self, front_end: FrontEnd) -> np.ndarray:
        return np.concatenate([engine + front_end.delays_s(np.full(engine.size, self.input_len), load)
                               for engine, load in self.runs])


def _residuals(params: np.ndarray, rows: list[_FitRow]) -> np.ndarray:
    front_end = _front_end(params)
    out = []
    for r in rows:
        p50, p99 = pcts_ms(r.ttft_s(front_end), (50, 99))
        for predicted, weight, measured in ((p50, 1.0, r.measured_ms[0]), (p99, P99_WEIGHT, r.measured_ms[1])):
            out.append(weight * math.log(max(predicted, 1e-6) / measured) if math.isfinite(predicted) else 10.0)
    return np.array(out)


def fit_front_end(runs: list[EngineRun], basis: str, prefill_scale: float = 1.0) -> FrontEnd | None:
    """The front end that makes the replayed rows' TTFT p50/p99 match the measured ones; None without rows."""
    if not runs:
        return None
    from scipy.optimize import least_squares  # here, not at the top: a warm start reads fits back without scipy

    rows = [_FitRow.of(run) for run in runs]
    fit = least_squares(_residuals, START, bounds=(LOWER, UPPER), args=(rows,), x_scale=X_SCALE,
                        max_nfev=MAX_EVALUATIONS, loss="soft_l1", f_scale=ROBUST_SCALE)
    return _front_end(fit.x, basis, float(np.sqrt(np.mean(fit.fun**2))), prefill_scale)


def _front_end(params: np.ndarray, basis: str = "", rel_error: float = 0.0, prefill_scale: float = 1.0) -> FrontEnd:
    """A FrontEnd from fitted delay parameters in planner.engine.frontend.PARAMS order."""
    fixed, per_prompt_token, per_request, per_output_token, service = (float(x) for x in params)
    return FrontEnd(fixed, per_prompt_token, per_request, per_output_token, service, prefill_scale, basis, rel_error)


def calibrate(curve: Curve, group: pd.DataFrame) -> Curve:
    """`curve` with the server (prefill scale, front end) fitted on `group`'s server rows (unchanged without)."""
    rows = server_rows(group)
    if rows.empty:
        return curve
    scale = fit_prefill_scale(curve, rows)
    runs = [replay_row(curve, row, scale) for _, row in rows.iterrows()]
    basis = f"measured: {len(runs)} open-loop server rows of {curve.key.label()}"
    return dataclasses.replace(curve, front_end=fit_front_end(runs, basis, scale))


def _calibrated(curve: Curve, group: pd.DataFrame) -> Curve:
    """calibrate(), memoised on disk by the group's rows (planner.engine.fitcache: the fit takes ~1 s a group)."""
    if server_rows(group).empty:
        return curve
    content = group.drop(columns=["file"], errors="ignore").to_csv(index=False).encode()
    def fit() -> dict:
        front_end = calibrate(curve, group).front_end
        assert front_end is not None  # the group has server rows
        return dataclasses.asdict(front_end)

    return dataclasses.replace(curve, front_end=FrontEnd(**memo("server-fit", content, fit)))


def with_server_latency(curves: dict[GroupKey, Curve], profiles: pd.DataFrame) -> dict[GroupKey, Curve]:
    """Every curve with its server model: fitted where its group has server rows, else borrowed (labelled)."""
    groups = {GroupKey.from_values(v): g for v, g in profiles.groupby(list(PROFILE_GROUP), sort=True)}
    fitted = {key: _calibrated(curve, groups[key]) if key in groups else curve for key, curve in curves.items()}
    donors = [c for c in fitted.values() if c.front_end is not None]
    return {key: curve if curve.front_end is not None else _borrow(curve, donors) for key, curve in fitted.items()}


def serving_curves(profiles: pd.DataFrame, models: Iterable[str] | None = None) -> dict[GroupKey, Curve]:
    """The fitted curves of `models` (None: every model) with their server models, each the same as
    with_server_latency(fit_with_physics(profiles), profiles) gives it: the other models' groups are left alone,
    except those with server rows (the front ends a group without its own borrows from)."""
    if models is None:
        return with_server_latency(fit_with_physics(profiles), profiles)
    wanted = set(models)
    needed = profiles[profiles["model"].isin(wanted).to_numpy() | _server_group_rows(profiles)]
    curves = with_server_latency(fit_with_physics(profiles, needed), needed)
    return {key: curve for key, curve in curves.items() if key.model in wanted}


def with_server_latency_of(curve: Curve, profiles: pd.DataFrame) -> Curve:
    """`curve` (fitted on its group of `profiles`) with its server model, the same as with_server_latency over
    every group gives it, fitting only what it needs: its own group's server rows, else the closest donor
    group that fits (predict asks for one curve: the other groups are left alone)."""
    servers = _server_groups(profiles)
    if curve.key in servers:
        return _calibrated(curve, servers[curve.key])
    if not curve.fit.is_full:
        return curve  # _borrow lends nothing to it: no donor is fitted
    same_engine = [key for key in servers if key.engine == curve.key.engine]
    # Closest first; a stable sort keeps with_server_latency's order among equals, as its max() picks the first.
    for key in sorted(same_engine, key=_closeness(curve.key), reverse=True):
        donor = fit_group(key, servers[key])
        if donor is not None:
            return _borrow(curve, [_calibrated(donor, servers[key])])
    return curve


def _server_group_rows(profiles: pd.DataFrame) -> np.ndarray:
    """A mask of `profiles`' rows that belong to a group with server rows (server_rows)."""
    keys = server_rows(profiles)[list(PROFILE_GROUP)].drop_duplicates()
    merged = profiles[list(PROFILE_GROUP)].merge(keys, on=list(PROFILE_GROUP), how="left", indicator=True)
    return (merged["_merge"] == "both").to_numpy()


def _server_groups(profiles: pd.DataFrame) -> dict[GroupKey, pd.DataFrame]:
    """Every group of `profiles` with server rows, in with_server_latency's (groupby) order."""
    rows = profiles[_server_group_rows(profiles)]
    return {GroupKey.from_values(v): g for v, g in rows.groupby(list(PROFILE_GROUP), sort=True)}


def _closeness(target: GroupKey) -> Callable[[GroupKey], tuple[bool, bool, bool]]:
    """How close a donor's group is to `target`'s (same GPU, then model, then precision): the larger the closer."""
    return lambda key: (key.gpu == target.gpu, key.model == target.model, key.precision == target.precision)


def _borrow(curve: Curve, donors: Iterable[Curve]) -> Curve:
    """Lend `curve` the front end of the closest measured server of the same engine (GPU, then model).

    Only a fully fitted curve borrows: one fitted to saturated throughputs alone (published tables) has
    no engine latency worth adding a front end to, and stays unverified.  The prefill scale (a clock
    effect of one GPU) goes only to the same GPU; another GPU keeps its curve's prefill cost.
    """
    same_engine = [d for d in donors if d.key.engine == curve.key.engine]
    if not same_engine or not curve.fit.is_full:
        return curve
    closer = _closeness(curve.key)
    closest = max(same_engine, key=lambda d: closer(d.key))
    assert closest.front_end is not None
    lent = closest.front_end.transferred(closest.key.label())
    if closest.key.gpu != curve.key.gpu:
        lent = dataclasses.replace(lent, prefill_scale=1.0)
    return dataclasses.replace(curve, front_end=lent)


# ---------------------------------------------------------------- validation

METRICS = (("ttft_p50", "ttft_p50_ms"), ("ttft_p99", "ttft_p99_ms"), ("tpot_p50", "tpot_p50_ms"),
           ("tpot_p99", "tpot_p99_ms"), ("throughput", "output_tok_per_s"))


def predict_row(curve: Curve, row: pd.Series) -> dict[str, float]:
    """A server row predicted by `curve` (with its front end): the row's own arrivals, its caps."""
    served = dataclasses.replace(curve, caps=row_caps(row, curve.caps))
    i, o = int(row["input_len"]), int(row["output_len"])
    runs = [simulate(served, t, [i] * t.size, [o] * t.size) for t in row_arrivals(row)]
    ttft = np.concatenate([r.ttft_s for r in runs])
    tpot = np.concatenate([r.tpot_s for r in runs])
    return {"ttft_p50": pct_ms(ttft, 50), "ttft_p99": pct_ms(ttft, 99), "tpot_p50": pct_ms(tpot, 50),
            "tpot_p99": pct_ms(tpot, 99), "throughput": float(np.mean([r.n * o / r.makespan_s for r in runs]))}


def validate_latency(profiles: pd.DataFrame, progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Leave-one-row-out errors on every server row: curve and front end refitted without the row.

    One row per server row: group, shape, load, measured and predicted TTFT p50/p99, TPOT p50/p99 and
    throughput, and their relative errors (predicted / measured - 1).
    """
    out = []
    for values, group in profiles.groupby(list(PROFILE_GROUP), sort=True):
        key = GroupKey.from_values(values)
        group = group.reset_index(drop=True)
        rows = server_rows(group)
        for index, row in rows.iterrows():
            if progress:
                progress(f"{key.label()}: row {index}")
            record = _held_out(key, group, index, row)
            if record is not None:
                out.append(record)
    return pd.DataFrame(out)


def _held_out(key: GroupKey, group: pd.DataFrame, index: object, row: pd.Series) -> dict[str, object] | None:
    rest = group.drop(index=index)
    curve = fit_group(key, rest)
    if curve is None:
        return None
    curve = calibrate(curve, rest)
    predicted = predict_row(curve, row)
    record: dict[str, object] = {"group": key.label(), "shape": f"{int(row['input_len'])}/{int(row['output_len'])}",
                                 "load": f"{float(row['request_rate']):g}/s {row['arrival']}",
                                 "requests": int(row["num_requests"]), **load_shares(curve, row)}
    for name, column in METRICS:
        measured = float(row[column])
        record[f"{name}_measured"] = measured
        record[f"{name}_predicted"] = predicted[name]
        record[f"{name}_error"] = predicted[name] / measured - 1.0 if measured > 0 else math.nan
    return record


def load_shares(curve: Curve, row: pd.Series) -> dict[str, float]:
    """How close a row ran to saturation: its realized rate, the output tokens/s it offered over the
    engine's saturated throughput at its shape and caps (`engine_load`), and the front end's steady-state
    utilisation at that rate (`front_end_load`; NaN without a front end)."""
    rate, i, o = realized_rate(row), float(row["input_len"]), float(row["output_len"])
    capacity = dataclasses.replace(curve, caps=row_caps(row, curve.caps)).saturated(i, o).output_tok_per_s
    front = curve.front_end.utilisation(rate, o) if curve.front_end is not None else math.nan
    return {"realized_rps": rate, "engine_load": rate * o / capacity, "front_end_load": front}


def latency_summary(table: pd.DataFrame, by: tuple[str, ...] = ("group",)) -> pd.DataFrame:
    """Median and max absolute relative error per group (or per `by` columns, e.g. group and shape)."""
    rows = []
    for values, part in table.groupby(list(by), sort=True):
        keys = values if isinstance(values, tuple) else (values,)
        rec: dict[str, object] = {**dict(zip(by, keys, strict=True)), "rows": len(part)}
        for name, _ in METRICS:
            err = part[f"{name}_error"].abs()
            rec[f"{name}_median"], rec[f"{name}_max"] = float(err.median()), float(err.max())
        rows.append(rec)
    return pd.DataFrame(rows)
