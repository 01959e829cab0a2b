"""Latency: the one door (`predict`, planner.latency.door), the server calibration it rests on
(planner.latency.server_fit: the front end and prefill scale fitted on open-loop server rows, and their check),
and the discrete-event simulation both run (planner.latency.simulate, imported from its module).
"""

from planner.latency.door import (
    DEFAULT_ROUTER,
    PERCENTILES,
    ROUTERS,
    TIER_ANALYTIC,
    TIER_FLEET,
    TIER_REPLAYED,
    TIER_SIMULATED,
    Closed,
    Fleet,
    LatencyReport,
    Lengths,
    Load,
    OpenLoop,
    Replay,
    latency_basis,
    predict,
)
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

__all__ = ["DEFAULT_ROUTER", "METRICS", "PERCENTILES", "ROUTERS", "TIER_FLEET", "Fleet", "TIER_ANALYTIC", "TIER_REPLAYED", "TIER_SIMULATED", "Closed", "LatencyReport",
           "Lengths", "Load", "OpenLoop", "Replay", "calibrate", "latency_basis", "latency_summary", "load_shares", "predict",
           "predict_row", "server_rows", "serving_curves", "validate_latency", "with_server_latency",
           "with_server_latency_of"]
