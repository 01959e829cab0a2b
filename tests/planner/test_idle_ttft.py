"""Issue 48, item 3: requests whose prompt alone misses the TTFT target on an idle replica are counted apart and do
not size the route (planner.latency.idle, fleetfacts.slo `judge`'s ttft_exempt)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetfacts.slo import Targets, judge
from planner.engine.curves import find_curve
from planner.latency import idle_ttft_infeasible
from planner.latency.idle import idle_prompt_limit
from planner.planning.plan import make_plan
from planner.planning.route_table import load_routes
from planner.sizing.assumptions import Assumptions
from planner.sizing.sizing import fleet_latency, size_online
from planner.traffic.routes import LengthDistribution, Route, Slo
from planner.traffic.workload import route_log_requests, route_requests
from tests.conftest import bundled_catalog

ROOT = Path(__file__).resolve().parents[2]
TIGHT_TTFT_MS = 2000.0  # the long example's p95 TTFT of 5 s tightened until some of its prompts cannot make it
LONG_LOG = ROOT / "examples" / "traces" / "synthetic_long_prompts.csv"


@pytest.fixture(scope="module")
def h100():
    return find_curve(bundled_catalog().curves, "vllm", "h100", "llama-3.1-8b", "bf16", 1)


def idle_ttft_by_hand_s(curve, prompt: int) -> float:
    """A lone prompt's TTFT from the curve as the simulator's module doc states it: chunks of the token budget,
    each a prefill step (its prefill part times the server's prefill_scale), the per-request overhead, the front
    end's delay with nothing else in flight."""
    budget = int(curve.max_num_batched_tokens)
    chunks = [budget] * (prompt // budget) + ([prompt % budget] if prompt % budget else [])
    fe = curve.front_end
    base = curve.step_time_s(0, 0.0)
    steps = sum(base + fe.prefill_scale * (curve.step_time_s(0, 0.0, p, prompt) - base) for p in chunks)
    return steps + curve.request_overhead_s + fe.fixed_s + fe.per_prompt_token_s * prompt


def test_the_idle_infeasible_prompts_are_those_whose_lone_prefill_exceeds_the_target(h100):
    prompts = pd.read_csv(LONG_LOG)["input_len"].to_numpy()
    by_hand = np.array([idle_ttft_by_hand_s(h100, int(p)) * 1000.0 for p in np.unique(prompts)])
    over = dict(zip(np.unique(prompts), by_hand > TIGHT_TTFT_MS, strict=True))
    assert not np.any(np.isclose(by_hand, TIGHT_TTFT_MS, rtol=1e-4))  # no prompt on the edge of rounding
    flagged = idle_ttft_infeasible(h100, prompts, TIGHT_TTFT_MS)
    assert flagged.tolist() == [bool(over[p]) for p in prompts]
    assert 0 < flagged.sum() < 0.05 * prompts.size
    assert not idle_ttft_infeasible(h100, prompts, None).any()


def test_a_target_every_admitted_prompt_meets_flags_none(h100):
    assert idle_prompt_limit(h100, 1e9) is None
    assert not idle_ttft_infeasible(h100, np.array([1, 100_000]), 1e9).any()


def test_an_exempt_request_counts_for_tpot_and_attainment_but_not_for_the_ttft_percentile():
    t = np.arange(40.0)
    ttft = np.full(40, 0.1)
    ttft[:5] = 9.0  # 5 of 40 over a 1 s target: p95 breaks
    tpot = np.full(40, 0.01)
    e2e = ttft + 0.5
    targets = Targets(ttft_ms=1000.0, tpot_ms=50.0, window_s=0.0)
    assert not judge(t, ttft, tpot, e2e, targets).ok
    exempt = np.zeros(40, dtype=bool)
    exempt[:5] = True
    check = judge(t, ttft, tpot, e2e, targets, ttft_exempt=exempt)
    assert check.ok and check.attainment == 1.0 and check.ttft_ms[0] == pytest.approx(100.0)
    tpot[:5] = 1.0  # an exempt request still counts for TPOT
    assert judge(t, ttft, tpot, e2e, targets, ttft_exempt=exempt).attainment == pytest.approx(35 / 40)
    assert judge(t, ttft, tpot, e2e, targets, ttft_exempt=np.ones(40, dtype=bool)).holds_every_window is False
    never_served = e2e.copy()
    never_served[:5] = math.nan  # an exempt request never served still counts as unbounded
    assert not judge(t, ttft, tpot, never_served, targets, ttft_exempt=exempt).holds_every_window


def long_routes(tmp_path, log: pd.DataFrame, name: str) -> pd.DataFrame:
    """The bundled H100 long-prompt route at a 2 s TTFT target, replaying `log`."""
    routes = pd.read_csv(ROOT / "examples" / "routes-long-h100.csv")
    log_path = tmp_path / f"{name}.csv"
    log.to_csv(log_path, index=False)
    routes["ttft_slo_ms"] = TIGHT_TTFT_MS
    routes["log"] = str(log_path)
    path = tmp_path / f"{name}-routes.csv"
    routes.to_csv(path, index=False)
    return load_routes(path)


@pytest.mark.slow
def test_a_route_with_idle_infeasible_prompts_plans_and_their_own_ttft_does_not_size_it(tmp_path, h100):
    """Before, no fleet up to 64 replicas held the 2 s route (its 120k prompts take 9 s alone).  Now it plans,
    counts them, and holds every window only because their own TTFT is not judged.  Their prefill still occupies
    a replica (requests behind a 120k prompt wait for its chunks), so the log without them may need fewer."""
    log = pd.read_csv(LONG_LOG)
    flagged = idle_ttft_infeasible(h100, log["input_len"].to_numpy(), TIGHT_TTFT_MS)
    routes = long_routes(tmp_path, log, "whole")
    whole = make_plan(routes, bundled_catalog(), Assumptions(), check_by_simulation=True).rows[0]
    assert whole.ok and whole.windows_in_breach == 0, whole.notes
    assert whole.ttft_idle_infeasible == int(flagged.sum())
    assert whole.ttft_idle_infeasible_share == pytest.approx(flagged.mean())
    assert whole.ttft_idle_infeasible_longest_prompt == int(log["input_len"][flagged].max())
    assert f"{int(flagged.sum())} requests (" in whole.window_verdict()
    route = Route.from_row(routes.iloc[0].to_dict())
    report = fleet_latency(h100, route, whole.replicas, route_requests(route, route_log_requests(route)))
    targets = route.targets(Assumptions().slo_attainment)
    assert report.check(targets).ok
    r = report.results[0]
    assert not judge(r.arrival_s, r.ttft_s, r.tpot_s, r.e2e_s, targets).holds_every_window  # judged, they break it
    kept = make_plan(long_routes(tmp_path, log[~flagged], "kept"), bundled_catalog(), Assumptions(),
                     check_by_simulation=True).rows[0]
    assert kept.ok and kept.ttft_idle_infeasible == 0 and kept.idle_infeasible_sentence() == ""
    assert kept.replicas <= whole.replicas


def test_a_route_whose_percentile_prompt_cannot_meet_the_ttft_target_alone_stays_infeasible(h100):
    """Exempting a few outliers must not wave through a target the route's percentile request cannot meet: when
    every request of 60k prompt tokens misses a 2 s TTFT even alone, no fleet holds the route's p95."""
    route = Route(name="r", model="llama-3.1-8b", traffic="online", rate_rps=0.1, peak_to_mean=1.0, arrival_cv=1.0,
                  num_requests=0, jobs_per_month=30.0, deadline_hours=math.nan, slo_percentile=95.0,
                  updates_per_month=0.0, input=LengthDistribution(60_000.0), output=LengthDistribution(200.0),
                  slo=Slo(TIGHT_TTFT_MS, 100.0, None))
    assert idle_ttft_infeasible(h100, np.array([60_000]), TIGHT_TTFT_MS).all()
    sized = size_online(h100, route, 1)
    assert not sized.feasible and "TTFT" in sized.reason
