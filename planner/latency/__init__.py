"""Latency: the one door (`predict`, planner.latency.door), the server calibration it rests on
(planner.latency.server_fit: the front end and prefill scale fitted on open-loop server rows, and their check),
and the discrete-event simulation both run (planner.latency.simulate: only the door and the calibration call it;
its per-request result type, SimResult, is what a simulated report carries).
"""

from planner.latency.analytic import service_time_s
from planner.latency.closed_loop import TIER_CLOSED_LOOP, rounds_answer
from planner.latency.door import (
    DEFAULT_ROUTER,
    PERCENTILES,
    ROUTERS,
    TIER_ANALYTIC,
    TIER_FLEET,
    TIER_JOB,
    TIER_REPLAYED,
    TIER_SIMULATED,
    Closed,
    Fleet,
    Job,
    LatencyReport,
    Lengths,
    Load,
    OpenLoop,
    Replay,
    latency_basis,
    predict,
)
from planner.latency.idle import idle_prompt_limit, idle_ttft_infeasible
from planner.latency.server_fit import (
    METRICS,
    calibrate,
    latency_summary,
    load_shares,
    predict_row,
    server_rows,
    serving_curves,
    validate_latency,
    with_server_latency,
    with_server_latency_of,
)
from planner.latency.simulate import HostTier, SimResult

__all__ = ["DEFAULT_ROUTER", "METRICS", "PERCENTILES", "ROUTERS", "TIER_ANALYTIC", "TIER_CLOSED_LOOP", "TIER_FLEET", "TIER_JOB",
           "TIER_REPLAYED", "TIER_SIMULATED", "Closed", "Fleet", "HostTier", "Job", "LatencyReport", "Lengths", "Load",
           "OpenLoop", "Replay", "SimResult", "calibrate", "idle_prompt_limit", "idle_ttft_infeasible", "latency_basis", "latency_summary", "load_shares",
           "predict", "predict_row", "rounds_answer", "server_rows", "serving_curves", "service_time_s", "validate_latency",
           "with_server_latency", "with_server_latency_of"]
