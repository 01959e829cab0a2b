"""Plan files across versions: a plan written by an earlier Fleetplan reads (renamed columns included)."""

from __future__ import annotations

import csv
from pathlib import Path

from planner.planning.plan_files import read_plan


def test_a_plan_written_before_the_renames_still_reads():
    """Issue 36, item 5: `operating_concurrency` became `in_flight_p99` (it is the 99th percentile of requests in
    flight); a plan written before (the busiest-minute benchmark's, with its assumptions beside it) reads, its
    values under the new name."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "busiest-minute" / "plan.csv"
    with path.open(encoding="utf-8") as handle:
        old = list(csv.DictReader(handle))
    assert "operating_concurrency" in old[0] and "in_flight_p99" not in old[0]
    frame, assumptions = read_plan(path)
    assert assumptions is not None
    for row, before in zip(frame.to_dict("records"), old, strict=True):
        if before["operating_concurrency"]:
            assert row["in_flight_p99"] == float(before["operating_concurrency"])
