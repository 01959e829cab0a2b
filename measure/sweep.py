"""The sweep runner: start the engine once, measure each pending point, write each row at once.

A point that raises is recorded as failed (with the reason) and the sweep goes
on; an engine that died is restarted.  Before each point (and before the
engine start) the remaining --max-time is compared with the point's estimate,
rescaled by what the finished points took, so a device call with a hard limit
is never killed mid-point; the run then stops cleanly and `--resume` continues.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from fleetfacts.errors import InputError
from fleetfacts.schema import MEASURED_STATUSES
from measure.engines.base import Engine, EngineInfo
from measure.envinfo import command_line, without_secret_flags
from measure.points import Point, point_from_mapping
from measure.redact import redacted_argv, safe
from measure.stats import Measurement, metric_columns

log = logging.getLogger(__name__)

# Keep this share of the estimate (and at least this many seconds) spare before a point starts.
SAFETY_FACTOR = 1.3
SAFETY_MIN_S = 10.0
# Rescaling of estimates by measured/estimated is clamped to this range (one odd point must not stall a sweep).
CALIBRATION_RANGE = (0.25, 8.0)
# Failure reasons are cut to this many characters (one line in the CSV).
MAX_ERROR_CHARS = 400


class Progress(Protocol):
    """What the sweep asks of a progress bar (tqdm's interface)."""

    def update(self, n: int = 1) -> object: ...

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None: ...


@dataclass(frozen=True)
class Identity:
    """Columns every row of this profile shares."""

    gpu: str
    engine: str
    model: str
    precision: str
    tp: int
    source: str
    notes: str = ""
    config: str = "default"
    suspect: str = ""   # why no row of this profile is the model's steady speed (every row then status=suspect)


@dataclass
class Budget:
    """Wall-clock budget of this invocation (None = unlimited)."""

    max_time_s: float | None
    started: float = field(default_factory=time.monotonic)

    def remaining(self) -> float:
        if self.max_time_s is None:
            return math.inf
        return self.max_time_s - (time.monotonic() - self.started)

    def allows(self, estimate_s: float) -> bool:
        return self.remaining() >= max(estimate_s * SAFETY_FACTOR, estimate_s + SAFETY_MIN_S)


@dataclass
class Outcome:
    rows: list[dict] = field(default_factory=list)
    stopped_for_time: bool = False
    stopped_for_failures: int = 0           # the failed points in a row that stopped the sweep (0: did not)
    remaining_points: int = 0
    skipped: list[Point] = field(default_factory=list)
    engine_info: EngineInfo | None = None


class Calibration:
    """Median measured/estimated ratio of the points done so far."""

    def __init__(self) -> None:
        self.ratios: list[float] = []

    def add(self, measured_s: float, estimated_s: float) -> None:
        if estimated_s > 0 and measured_s > 0:
            self.ratios.append(measured_s / estimated_s)

    @classmethod
    def from_rows(cls, rows: list[dict], estimate_s: Callable[[Point], float]) -> Calibration:
        """Seeded with the ok rows a profile folder already holds (their timed duration over the estimate),
        so a resumed sweep schedules with what this engine and GPU really took, not only with the prior."""
        calibration = cls()
        for row in rows:
            try:
                duration = float(row.get("duration_s") or "nan")
                point = point_from_mapping(row, "profile row")
            except (ValueError, InputError):
                continue
            if row.get("status", "ok") in MEASURED_STATUSES and math.isfinite(duration):
                calibration.add(duration, estimate_s(point))
        return calibration

    def scale(self, estimate_s: float) -> float:
        if not self.ratios:
            return estimate_s
        low, high = CALIBRATION_RANGE
        return estimate_s * min(high, max(low, statistics.median(self.ratios)))


def one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or "(no message)"
    return safe(f"{type(error).__name__}: {text}")[:MAX_ERROR_CHARS]


def build_row(identity: Identity, engine_version: str, point: Point, info: EngineInfo | None,
              measurement: Measurement | None, error: str = "", roofline: float | None = None,
              seed: int | None = None) -> dict:
    """One PROFILE row for a point (ok, or failed with `error`)."""
    row = _point_columns(identity, engine_version, point, seed)
    if info is not None:
        row.update(kv_cache_tokens=info.kv_cache_tokens, max_num_seqs=info.max_num_seqs,
                   max_num_batched_tokens=info.max_num_batched_tokens, cuda_graph_max_batch=info.cuda_graph_max_batch)
    metrics, error, notes = _measured(measurement, error)
    row.update(metrics)
    row["roofline_frac"] = roofline if not error else None
    row["status"] = "failed" if error else "suspect" if identity.suspect else "ok"
    row["error"] = error[:MAX_ERROR_CHARS]
    row["notes"] = "; ".join(n for n in (identity.notes, notes, identity.suspect and f"suspect: {identity.suspect}")
                             if n)
    return row


def _point_columns(identity: Identity, engine_version: str, point: Point, seed: int | None) -> dict:
    """A row's identity, its point (the load columns of its mode only) and its provenance."""
    rate = point.mode == "rate"
    return {"gpu": identity.gpu, "engine": identity.engine, "engine_version": engine_version,
            "model": identity.model, "precision": identity.precision, "tp": identity.tp, "pp": 1,
            "config": identity.config,
            "mode": point.mode, "input_len": point.input_len, "output_len": point.output_len,
            "batch_size": point.batch_size if point.mode == "offline" else None,
            "concurrency": point.concurrency if point.mode == "concurrency" else None,
            "request_rate": point.request_rate if rate else None,
            "arrival": point.arrival if rate else "",
            "arrival_seed": seed if rate else None,
            "num_requests": point.requests, "provenance": "measured", "source": identity.source,
            "date": dt.date.today().isoformat()}


def _measured(measurement: Measurement | None, error: str) -> tuple[dict, str, str]:
    """(metric columns, error, notes) of a point's measurement: no metrics when nothing completed (a failed
    point), and failed requests named in the error unless it already has one."""
    if measurement is None:
        return {}, error, ""
    if measurement.num_requests == 0:  # nothing to time: a failed point
        return {}, error or _nothing_completed(measurement), measurement.notes
    if measurement.errors and not error:
        error = (f"{measurement.errors} of {measurement.num_requests + measurement.errors} requests failed: "
                 f"{measurement.first_error}")
    return metric_columns(measurement), error, measurement.notes


def _nothing_completed(m: Measurement) -> str:
    if m.errors:
        return f"all {m.errors} requests failed: {m.first_error}"
    return "no request completed" + (f" ({m.notes})" if m.notes else "")


@dataclass
class Sweep:
    """Runs `points` on `engine`, appending rows via `write_row`; see the module docstring."""

    engine: Engine
    identity: Identity
    points: list[Point]
    write_row: Callable[[dict], None]
    estimate_s: Callable[[Point], float]
    engine_start_estimate_s: float
    budget: Budget
    seed: int = 0
    roofline: Callable[[Point, Measurement, EngineInfo], float | None] | None = None
    on_engine_start: Callable[[EngineInfo], None] | None = None
    progress: Progress | None = None
    calibration: Calibration = field(default_factory=Calibration)
    # Stop (cleanly, resumable) after this many failed points in a row; None = never.
    max_consecutive_failures: int | None = None

    def run(self) -> Outcome:
        outcome = Outcome()
        supported = [p for p in self.points if p.mode in self.engine.modes]
        outcome.skipped = [p for p in self.points if p.mode not in self.engine.modes]
        if not supported:
            return outcome
        # The first point as the completed rows calibrate it (a resumed run knows what this engine takes).
        if not self.budget.allows(self.engine_start_estimate_s + self.calibration.scale(self.estimate_s(supported[0]))):
            outcome.stopped_for_time, outcome.remaining_points = True, len(supported)
            return outcome
        info = self._start()
        outcome.engine_info = info
        try:
            self._run_points(supported, info, outcome)
        finally:
            self.engine.stop()
        return outcome

    def _start(self) -> EngineInfo:
        info = self.engine.start()
        log.info("engine ready: %s", info)
        if self.on_engine_start:
            self.on_engine_start(info)
        return info

    def _run_points(self, points: list[Point], info: EngineInfo, outcome: Outcome) -> None:
        failures = 0
        for index, point in enumerate(points):
            estimate = self.calibration.scale(self.estimate_s(point))
            if not self.budget.allows(estimate):
                outcome.stopped_for_time, outcome.remaining_points = True, len(points) - index
                log.warning("stopping: %.0f s left, next point needs ~%.0f s (%s)", self.budget.remaining(),
                            estimate, point.label())
                return
            row, died = self._measure(point, info, index)
            self.write_row(row)
            outcome.rows.append(row)
            self._tick(point, row)
            failures = failures + 1 if row["status"] == "failed" else 0
            if self.max_consecutive_failures and failures >= self.max_consecutive_failures and index + 1 < len(points):
                outcome.stopped_for_failures, outcome.remaining_points = failures, len(points) - index - 1
                log.warning("stopping: %d points failed in a row (last: %s)", failures, row["error"])
                return
            if died:
                restarted = self._restart(outcome, len(points) - index - 1)
                if restarted is None:
                    return
                info = restarted

    def _measure(self, point: Point, info: EngineInfo, index: int) -> tuple[dict, bool]:
        started = time.monotonic()
        seed = self.seed + index * 7919 + point.input_len
        try:
            m = self.engine.run_point(point, seed)
        except Exception as err:  # noqa: BLE001 - any engine error becomes a failed row
            log.error("point failed: %s: %s", point.label(), one_line(err))
            return build_row(self.identity, info.version, point, info, None, one_line(err), seed=seed), \
                bool(self.engine.needs_restart(err))
        self.calibration.add(time.monotonic() - started, self.estimate_s(point))
        roof = self.roofline(point, m, info) if self.roofline else None
        return build_row(self.identity, info.version, point, info, m, roofline=roof, seed=seed), False

    def _restart(self, outcome: Outcome, left: int) -> EngineInfo | None:
        self.engine.stop()
        if not self.budget.allows(self.engine_start_estimate_s):
            outcome.stopped_for_time, outcome.remaining_points = True, left
            return None
        log.warning("engine died; restarting it")
        return self._start()

    def _tick(self, point: Point, row: dict) -> None:
        if self.progress is not None:
            self.progress.update(1)
            tok = row.get("output_tok_per_s")
            self.progress.set_postfix_str(safe(f"{point.label()} -> {row['status']}")
                                          + (f" {tok:,.0f} tok/s" if tok else ""))


def resume_command(argv: list[str], out_dir: str, retry_failed: bool = False) -> str:
    """The command that continues this sweep (secret flags removed; --resume and --out added, and
    --retry-failed when the failed points should run again)."""
    args = redacted_argv(without_secret_flags(argv))
    if "--resume" not in args:
        args.append("--resume")
    if retry_failed and "--retry-failed" not in args:
        args.append("--retry-failed")
    if "--out" not in args and not any(a.startswith("--out=") for a in args):
        args += ["--out", out_dir]
    return command_line(args)


def stderr(text: str) -> None:
    print(safe(text), file=sys.stderr, flush=True)
