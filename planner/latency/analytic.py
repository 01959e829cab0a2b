"""The analytic tier of the latency door: a fitted curve's closed-form answer for a load, no simulation.

Loads, typed: `Offline` (a batch of n requests submitted at once), `Steady` (a closed loop keeping c requests in
flight) and `Rounds` (a benchmark's c clients in step, sending n requests in all).  `analytic(curve, load)` answers
with the curve's Prediction (throughput with its interval; TTFT, TPOT and end-to-end latency) as **means**, never
percentiles: the answer says so (`statistic`) and which tier spoke (`tier`, TIER_ANALYTIC).  Percentiles under
arrivals come from the simulated tiers of planner.latency.door.predict.

Every caller outside planner/engine and planner/latency takes a curve's closed-form numbers here;
tests/planner/test_one_door.py fails on a call around it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fleetfacts.errors import InputError
from planner.engine.curves import CurveLike, Prediction

TIER_ANALYTIC = "analytic"
# What the analytic tier's latencies are: the mean over the load's requests.
STATISTIC = "mean"


@dataclass(frozen=True)
class Offline:
    """`batch` requests of input_len / output_len tokens submitted at once (an offline batch)."""

    input_len: float
    output_len: float
    batch: int


@dataclass(frozen=True)
class Steady:
    """A closed loop keeping `concurrency` requests of input_len / output_len tokens in flight, steady state."""

    input_len: float
    output_len: float
    concurrency: float


@dataclass(frozen=True)
class Rounds:
    """A benchmark's closed loop: `concurrency` clients start together and send `requests` in all, in step."""

    input_len: float
    output_len: float
    concurrency: float
    requests: int


AnalyticLoad = Offline | Steady | Rounds


@dataclass(frozen=True)
class AnalyticAnswer:
    """The curve's closed-form prediction for `load`; its latencies are `statistic` (means)."""

    prediction: Prediction
    load: AnalyticLoad
    tier: str = TIER_ANALYTIC
    statistic: str = STATISTIC


def analytic(curve: CurveLike, load: AnalyticLoad) -> AnalyticAnswer:
    """The analytic tier's answer for `load` on `curve`."""
    if isinstance(load, Offline):
        prediction = curve.predict_offline(load.input_len, load.output_len, load.batch)
    elif isinstance(load, Rounds):
        rounds = getattr(curve, "predict_rounds", None)
        if rounds is None:
            raise InputError("this curve has no model of a benchmark's rounds (a fitted profile's curve has): "
                             "use the steady closed loop instead")
        prediction = rounds(load.input_len, load.output_len, load.concurrency, load.requests)
    else:
        prediction = curve.predict_concurrency(load.input_len, load.output_len, load.concurrency)
    return AnalyticAnswer(prediction, load)


def service_time_s(curve: CurveLike, input_len: float, output_len: float) -> float:
    """One request's end-to-end seconds on a full replica (the horizon unit of a fleet check): its prefill alone,
    then output_len decode steps in a batch of the curve's max_batch at the mean context.  InputError when the
    curve gives no finite positive time."""
    batch = max(1, int(curve.max_batch(input_len, output_len)))
    seconds = curve.step_time_s(1, 0.0, input_len, 0.0) + output_len * curve.step_time_s(batch,
                                                                                       input_len + output_len / 2.0)
    if not (math.isfinite(seconds) and seconds > 0):
        raise InputError(f"no finite service time predicted for {input_len:g} / {output_len:g} tokens")
    return float(seconds)
