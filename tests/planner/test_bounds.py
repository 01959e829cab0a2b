"""Issue 14 item 14: huge inputs are refused with the limit named, or handled in bounded time and memory."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from fleetfacts.errors import InputError
from fleetfacts.schema import MAX_BATCH_REQUESTS, MAX_RATE_RPS
from planner.cli import main
from planner.latency import Fleet, Job, predict
from planner.traffic import logs as traffic
from planner.traffic.workload import SIM_MAX_REPLICAS, Requests
from tests.planner.sim_fakes import SimCurve

HEADER = "name,model,traffic,rate_rps,num_requests,deadline_hours,input_len_mean,output_len_mean,ttft_slo_ms\n"


def _plan(tmp_path: Path, row: str, capsys) -> tuple[int, str]:
    routes = tmp_path / "routes.csv"
    routes.write_text(HEADER + row + "\n")
    out = tmp_path / "plan.csv"
    code = main(["plan", "--routes", str(routes), "--out", str(out), "--no-simulate"])
    err = capsys.readouterr().err
    assert code != 2 or not out.exists()
    return code, err


@pytest.mark.parametrize("num_requests", ["1e10", "1e20", "1e30"])
def test_a_batch_job_over_the_bound_is_refused_with_the_limit(tmp_path, capsys, num_requests):
    code, err = _plan(tmp_path, f"b,llama-3.1-8b,batch,,{num_requests},8,500,250,", capsys)
    assert code == 2 and "num_requests" in err and f"{MAX_BATCH_REQUESTS:g}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("rate", ["1e8", "1e300"])
def test_a_rate_over_the_bound_is_refused_with_the_limit(tmp_path, capsys, rate):
    code, err = _plan(tmp_path, f"r,llama-3.1-8b,online,{rate},,,500,250,500", capsys)
    assert code == 2 and "rate_rps" in err and f"{MAX_RATE_RPS:g}" in err and "line 2" in err


def test_a_batch_job_at_the_bound_simulates_in_bounded_memory():
    """10^12 requests are simulated as their sample, never materialised (the time it takes:
    benchmarks/input_bounds.py)."""
    gen = np.random.default_rng(0)
    sample = (gen.integers(100, 1000, 20_000), gen.integers(10, 300, 20_000))
    tracemalloc.start()
    makespan = predict(SimCurve(), Job(*sample, replicas=1_000_000, total_requests=int(MAX_BATCH_REQUESTS))).makespan_s
    small = predict(SimCurve(), Job(*sample, replicas=1_000, total_requests=int(MAX_BATCH_REQUESTS))).makespan_s
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 500 * 2**20
    assert 0 < makespan < small  # a thousand times the replicas finish sooner


def test_a_fleet_of_millions_of_replicas_is_simulated_on_a_subset():
    """The door's fleet tier simulates SIM_MAX_REPLICAS replicas with their share of the requests."""
    gen = np.random.default_rng(0)
    t = np.sort(gen.uniform(0, 1, 2_000_000))
    report = predict(SimCurve(), Fleet(Requests(t, gen.integers(10, 200, t.size), gen.integers(2, 20, t.size), "r"),
                                       1_000_000))
    assert report.results[0].replicas == SIM_MAX_REPLICAS and 0 < report.results[0].n < 200
    assert f"{SIM_MAX_REPLICAS} of them simulated with their share" in report.load


def test_dev_zero_is_not_read_as_a_log():
    with pytest.raises(InputError, match="not a regular file"):
        traffic.read_log("/dev/zero")


def test_a_jsonl_line_nested_100k_deep_is_skipped_with_its_line(tmp_path):
    log = tmp_path / "deep.jsonl"
    rows = [json.dumps({"timestamp": 1000 + i, "prompt_tokens": 100, "completion_tokens": 10}) for i in range(4)]
    rows.insert(2, "[" * 100_000 + "]" * 100_000)
    log.write_text("\n".join(rows) + "\n")
    read = traffic.read_log(log)
    assert read.skipped.lines == {"unreadable JSON line": (3,)} and len(read.requests) == 4


def test_a_plan_with_a_billion_replicas_is_refused_on_read(tmp_path):
    from fleetfacts.schema import MAX_REPLICAS
    from planner.planning.plan_files import read_plan
    plan = tmp_path / "plan.csv"
    plan.write_text('# fleetplan-assumptions: {}\nroute,traffic,status,replicas\nr,online,ok,1000000000\n')
    with pytest.raises(InputError, match=rf"line 3, column .replicas.: expected a value <= {MAX_REPLICAS:g}".replace("+", r"\+")):
        read_plan(plan)
