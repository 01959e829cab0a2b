"""The continuous-batching simulator: conservation, single-request latency, monotonicity, routers, search."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fleetfacts.errors import InputError
from planner.latency import Job, predict
from planner.latency import simulate as sim
from planner.sizing.batch import cheapest_batch_fleet
from planner.sizing.search import bisect_replicas
from planner.traffic.prefixes import BlockIds
from planner.traffic.routes import Slo
from planner.traffic.workload import gamma, poisson
from tests.planner.sim_fakes import CurvedStepCurve, MoeCurve, SimCurve

ROUTE = {"name": "chat", "rate_rps": 20.0, "peak_to_mean": 1.0, "arrival_cv": 1.0, "input_len_mean": 800.0,
         "input_len_p50": 600.0, "input_len_p95": 2000.0, "input_len_p99": 3000.0, "output_len_mean": 150.0,
         "output_len_p50": 120.0, "output_len_p95": 400.0, "output_len_p99": 600.0, "ttft_slo_ms": 500.0,
         "tpot_slo_ms": 40.0, "e2e_slo_ms": float("nan")}


def workload(n: int = 3000, rate: float = 40.0, seed: int = 0, cv: float = 1.0):
    gen = np.random.default_rng(seed)
    t = gamma(rate, cv, n, gen)
    return t, gen.integers(1, 4000, n), gen.integers(1, 500, n)


def alone_e2e(curve, i: int, o: int, overhead: float = 0.0) -> tuple[float, float]:
    """TTFT and e2e of one request alone, from the curve's step times (chunked prefill, then o-1 decode steps)."""
    budget = curve.max_num_batched_tokens
    ttft, left = 0.0, i
    while left > 0:
        chunk = min(left, budget)
        ttft += curve.step_time_s(0, 0.0, chunk, i)
        left -= chunk
    ttft += overhead
    return ttft, ttft + sum(curve.step_time_s(1, i + j) for j in range(1, o))


@pytest.mark.parametrize("curve", [SimCurve(), CurvedStepCurve(), MoeCurve()], ids=["affine", "not-affine", "moe"])
@pytest.mark.parametrize("i, o", [(1000, 50), (1, 1), (20_000, 7), (300, 1), (5, 2000)])
def test_one_request_alone_has_the_curves_latency(curve, i, o):
    result = sim.simulate(curve, [3.0], [i], [o])
    ttft, e2e = alone_e2e(curve, i, o)
    # Jumps use the mean context over the jump: exact for affine step times, close otherwise.
    rel = 1e-9 if sim.step_model(curve).affine else 1e-3
    assert result.ttft_s[0] == pytest.approx(ttft, rel=1e-9)
    assert result.e2e_s[0] == pytest.approx(e2e, rel=rel)
    if o > 1:
        assert result.tpot_s[0] == pytest.approx((e2e - ttft) / (o - 1), rel=rel)


def test_request_overhead_is_paid_once_at_the_first_token():
    curve = SimCurve(request_overhead_s=2e-3)
    result = sim.simulate(curve, [0.0], [500], [20])
    ttft, e2e = alone_e2e(curve, 500, 20, overhead=2e-3)
    assert (result.ttft_s[0], result.e2e_s[0]) == (pytest.approx(ttft), pytest.approx(e2e))


@pytest.mark.parametrize("curve", [SimCurve(), SimCurve(kv_cache_tokens=20_000, max_num_seqs=8),
                                   SimCurve(max_num_seqs=1), CurvedStepCurve(max_num_seqs=32)],
                         ids=["roomy", "kv-bound", "serial", "not-affine"])
@pytest.mark.parametrize("router, replicas", [("jsq", 1), ("jsq", 3), ("round-robin", 4)])
def test_every_request_finishes_exactly_once(curve, router, replicas):
    t, i, o = workload(n=1500, rate=30.0)
    i = np.minimum(i, 15_000)
    result = sim.simulate(curve, t, i, o, replicas, router)
    assert np.all(result.completions == 1)
    assert np.all(np.isfinite(result.e2e_s)) and np.all(result.ttft_s <= result.e2e_s)
    assert np.all(result.ttft_s > 0)
    assert set(np.unique(result.replica)) <= set(range(replicas))


def test_a_request_larger_than_the_kv_cache_is_rejected_not_lost():
    result = sim.simulate(SimCurve(kv_cache_tokens=1000), [0.0, 0.1, 0.2], [100, 2000, 100], [10, 10, 10],
                          slo=Slo(ttft_ms=1e6))
    assert result.rejected == 1 and math.isnan(result.e2e_s[1])
    assert list(result.completions) == [1, 0, 1]
    assert result.attainment == pytest.approx(2 / 3)


def test_kv_capacity_limits_concurrency():
    """Room for two requests: the third starts only when one of the first two has finished."""
    curve = SimCurve(kv_cache_tokens=2 * (1000 + 100))
    result = sim.simulate(curve, [0.0, 0.0, 0.0], [1000] * 3, [100] * 3)
    first_done = min(result.e2e_s[:2])
    assert result.ttft_s[2] > first_done
    assert result.ttft_s[1] < first_done


def test_max_num_seqs_one_serves_requests_one_after_another():
    result = sim.simulate(SimCurve(max_num_seqs=1), np.zeros(5), [200] * 5, [30] * 5)
    ends = np.sort(result.e2e_s)
    _, alone = alone_e2e(SimCurve(), 200, 30)
    assert np.allclose(np.diff(ends), alone, rtol=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_more_replicas_never_worsen_the_p95(seed):
    t, i, o = workload(n=2500, rate=60.0, seed=seed, cv=2.0)
    previous = None
    for replicas in range(1, 7):
        result = sim.simulate(SimCurve(), t, i, o, replicas, "jsq")
        p95 = (result.percentile_ms("ttft", 95), result.percentile_ms("e2e", 95))
        if previous is not None:
            assert p95[0] <= previous[0] * 1.001 and p95[1] <= previous[1] * 1.001, (replicas, p95, previous)
        previous = p95


def test_round_robin_assigns_in_turn_and_jsq_avoids_busy_replicas():
    t = np.array([0.0, 0.001, 0.002, 0.003])
    rr = sim.simulate(SimCurve(), t, [100] * 4, [1000, 10, 10, 10], 2, "round-robin")
    assert list(rr.replica) == [0, 1, 0, 1]
    # The first request is long; the short ones arrive after replica 1's finished: JSQ keeps them off replica 0.
    t = np.array([0.0, 0.001, 1.0, 2.0])
    jsq = sim.simulate(SimCurve(), t, [100] * 4, [2000, 10, 10, 10], 2, "jsq")
    assert list(jsq.replica) == [0, 1, 1, 1]
    rr = sim.simulate(SimCurve(), t, [100] * 4, [2000, 10, 10, 10], 2, "round-robin")
    assert jsq.percentile_ms("e2e", 100) <= rr.percentile_ms("e2e", 100)


@pytest.mark.parametrize("curve", [SimCurve(), SimCurve(async_scheduling=True), CurvedStepCurve()],
                         ids=["affine", "async", "not-affine"])
def test_one_replica_served_in_one_pass_equals_routing_each_arrival(curve):
    """simulate() serves a one-replica fleet in one pass (every arrival goes there): the same outcome, request by
    request, as the join-shortest-queue router bringing the replica up to each arrival."""
    t, i, o = workload(n=2000, rate=30.0, cv=3.0)
    one = sim.simulate(curve, t, i, o, 1, "jsq")
    run = sim._Run(t.tolist(), i.tolist(), o.tolist(), sim.step_model(curve))
    replica = sim._Replica()
    sim._route_jsq([replica], run)
    sim._make_advance(run)(replica, math.inf)
    assert np.array_equal(one.ttft_s, np.asarray(run.ttft), equal_nan=True)
    assert np.array_equal(one.e2e_s, np.asarray(run.e2e), equal_nan=True)


@pytest.mark.parametrize("router", sim.ROUTERS)
@pytest.mark.parametrize("curve", [SimCurve(), SimCurve(async_scheduling=True), CurvedStepCurve()],
                         ids=["affine", "async", "not-affine"])
def test_loads_sharing_their_first_requests_reuse_them_and_get_the_same_result(curve, router):
    """Loads that start with the same requests (a window behind one window, as the resampled hours judge them):
    the first requests are simulated once, and each load's outcome is what simulating it alone gives."""
    t, i, o = workload(n=3000, rate=60.0, cv=2.0)
    head = 1200
    for start in (1500, 2100, 2999):  # different continuations behind the same first 1200 requests
        rest = slice(start, None)
        tt = np.concatenate([t[:head], t[rest] - t[start] + t[head - 1] + 0.01])
        ii, oo = np.concatenate([i[:head], i[rest]]), np.concatenate([o[:head], o[rest]])
        alone = sim.simulate(curve, tt, ii, oo, 3, router)
        shared = sim.simulate(curve, tt, ii, oo, 3, router, prefix=head)
        for name in ("ttft_s", "e2e_s", "replica", "completions"):
            assert np.array_equal(getattr(alone, name), getattr(shared, name), equal_nan=True), (start, name)
    assert sum(key[0] is curve and key[2] == router for key in sim._PREFIXES) == 1  # simulated once, reused twice


@pytest.mark.parametrize("router", sim.ROUTERS)
@pytest.mark.parametrize("host", [None, sim.HostTier(200_000, 1e-7)], ids=["gpu", "host-tier"])
def test_loads_with_prefixes_sharing_their_first_requests_reuse_them_and_get_the_same_result(router, host):
    """As above, with prefix caches: prompts of 20 families (a family's blocks, then 1-3 of the request's own) in
    a KV cache that holds a few of them, each load taken from one log's block ids.  The first requests' caches
    are simulated once and copied; each load's outcome and hits are what simulating it alone gives."""
    n, head, block = 3000, 1200, 64
    t, _, o = workload(n=n, rate=60.0, cv=2.0)
    gen = np.random.default_rng(7)
    rows = [[int(f) * 100 + j for j in range(int(k))] + [10_000 + 10 * r + j for j in range(int(own))]
            for r, (f, k, own) in enumerate(zip(gen.integers(0, 20, n), gen.integers(1, 30, n),
                                                gen.integers(1, 4, n), strict=True))]
    i = np.array([block * len(ids) - int(cut) for ids, cut in zip(rows, gen.integers(0, block, n), strict=True)])
    log = BlockIds.of(rows, block)
    curve = SimCurve(kv_cache_tokens=60_000)
    for start in (1500, 2100, 2999):
        keep = np.r_[0:head, start:n]
        tt = np.concatenate([t[:head], t[start:] - t[start] + t[head - 1] + 0.01])
        blocks = log.take(keep)
        alone = sim.simulate(curve, tt, i[keep], o[keep], 3, router, blocks=blocks, host=host)
        shared = sim.simulate(curve, tt, i[keep], o[keep], 3, router, prefix=head, blocks=blocks, host=host)
        assert 0.0 < alone.prefix_hit_rate < 1.0
        for name in ("ttft_s", "e2e_s", "replica", "completions", "cached_tokens"):
            assert np.array_equal(getattr(alone, name), getattr(shared, name), equal_nan=True), (start, name)
    assert sum(key[0] is curve and key[2] == router for key in sim._PREFIXES) == 1  # simulated once, reused twice


@pytest.mark.parametrize("seed", range(3))
def test_jsq_beats_round_robin_on_mean_latency_with_heavy_tailed_outputs(seed):
    gen = np.random.default_rng(seed)
    n = 4000
    t = poisson(50.0, n, gen)
    o = np.minimum(1 + gen.pareto(1.2, n) * 40, 4000).astype(int)
    jsq = sim.simulate(SimCurve(max_num_seqs=16), t, np.full(n, 300), o, 4, "jsq")
    rr = sim.simulate(SimCurve(max_num_seqs=16), t, np.full(n, 300), o, 4, "round-robin")
    assert np.mean(jsq.e2e_s) < np.mean(rr.e2e_s)


@pytest.mark.parametrize("curve", [SimCurve(), MoeCurve()], ids=["dense", "moe"])
def test_affine_closed_forms_match_direct_calls(curve):
    model = sim.step_model(curve)
    assert model.affine and not sim.step_model(CurvedStepCurve()).affine
    step, jump, steps_to = sim._direct_closures(curve.step_time_s)
    gen = np.random.default_rng(3)
    for _ in range(200):
        b = int(gen.integers(1, 256))
        ctx = float(b * gen.integers(1, 8000))
        n = int(gen.integers(1, 3000))
        assert model.jump(b, ctx, n) == pytest.approx(jump(b, ctx, n), rel=1e-9)
        assert model.step(b, ctx, 700, 700 * 900) == pytest.approx(step(b, ctx, 700, 700 * 900), rel=1e-9)
        dt = float(gen.uniform(1e-4, 30.0))
        m = model.steps_to(b, ctx, dt)
        assert m == steps_to(b, ctx, dt)
        assert model.jump(b, ctx, m) >= dt and (m == 1 or model.jump(b, ctx, m - 1) < dt)


def test_slo_attainment_counts_requests_meeting_every_target():
    result = sim.simulate(SimCurve(), [0.0], [1000], [50], slo=Slo(ttft_ms=1e6, tpot_ms=1e-3))
    assert result.attainment == 0.0
    ok = sim.simulate(SimCurve(), [0.0], [1000], [50], slo=Slo(ttft_ms=1e6, tpot_ms=1e6, e2e_ms=1e6))
    assert ok.attainment == 1.0
    assert math.isnan(sim.simulate(SimCurve(), [0.0], [10], [5]).attainment)


@pytest.mark.parametrize("bad", [dict(arrival_s=[1.0, 0.0]), dict(input_len=[0, 5]), dict(output_len=[1.5, 2]),
                                 dict(replicas=0), dict(router="random")])
def test_bad_arguments_raise_input_error(bad):
    args = dict(arrival_s=[0.0, 1.0], input_len=[10, 10], output_len=[5, 5]) | bad
    with pytest.raises(InputError):
        sim.simulate(SimCurve(), **args)


@pytest.mark.parametrize("answer", [1, 2, 5, 6, 9, 40, 64])
@pytest.mark.parametrize("start", [1, 4, 5, 7, 30])
def test_bisect_finds_the_fewest_and_looks_little_past_it(answer, start):
    """Any start finds the smallest count that meets; from just below the answer it tries nothing above it (a
    screened start is usually there, and a count above the answer serves nothing else)."""
    asked: list[int] = []

    def meets(r: int) -> bool:
        asked.append(r)
        return r >= answer

    assert bisect_replicas(meets, start, 64) == answer
    if start in (answer - 1, answer):
        assert max(asked) == answer
    if start < answer:  # nothing up to a ceiling below the answer meets
        assert bisect_replicas(lambda r: r >= answer, start, answer - 1) is None


def makespan(curve, lengths, replicas: int, total: int | None = None) -> float:
    return predict(curve, Job(lengths[0], lengths[1], replicas, total)).makespan_s


def test_batch_makespan_and_cheapest_fleet():
    gen = np.random.default_rng(0)
    lengths = (gen.integers(100, 2000, 3000), gen.integers(50, 400, 3000))
    one, four = makespan(SimCurve(), lengths, 1), makespan(SimCurve(), lengths, 4)
    assert four < one
    deadline = one / 3
    fleet = cheapest_batch_fleet(SimCurve(), lengths, deadline, usd_per_gpu_hour=2.0, tp=2)
    assert fleet.feasible and fleet.wall_s <= deadline
    assert makespan(SimCurve(), lengths, fleet.replicas - 1) > deadline
    assert fleet.usd_per_job == pytest.approx(fleet.replicas * 2 * fleet.wall_s / 3600 * 2.0)
    spot = cheapest_batch_fleet(SimCurve(), lengths, deadline, 2.0, tp=2, spot=True, preemption_overhead=0.5)
    assert spot.replicas >= fleet.replicas and spot.wall_s == pytest.approx(spot.makespan_s * 1.5)
    late = cheapest_batch_fleet(SimCurve(), lengths, 1e-3, 2.0, max_replicas=8)
    assert not late.feasible and "deadline" in late.reason


def test_a_job_is_its_requests_submitted_at_once_and_reports_when_the_last_ends():
    """The door's Job tier: makespan = the last request's end of the simulated job; a fleet over the simulated
    replicas simulates their exact share, a job over its sample scales the sample's makespan."""
    gen = np.random.default_rng(1)
    inp, out = gen.integers(100, 2000, 500), gen.integers(50, 400, 500)
    report = predict(SimCurve(), Job(inp, out, 2))
    direct = sim.simulate(SimCurve(), np.zeros(500), inp, out, 2, "round-robin")
    assert report.tier == "simulated job" and report.makespan_s == pytest.approx(direct.makespan_s)
    assert report.value("e2e", 99) == pytest.approx(direct.percentile_ms("e2e", 99))
    doubled = predict(SimCurve(), Job(inp, out, 2, total_requests=1000))
    assert doubled.makespan_s == pytest.approx(2 * report.makespan_s)


def test_real_fitted_curve_single_request_latency():
    """Integration: a curve fitted to the bundled measured profiles drives the simulator."""
    from planner.engine.curves import find_curve, fit_curves, load_profiles

    curves = fit_curves(load_profiles())
    curve = find_curve(curves, "vllm", "h200", "llama-3.1-8b", "bf16", 1)
    result = sim.simulate(curve, [0.0], [1024], [128])
    ttft, e2e = alone_e2e(curve, 1024, 128, overhead=curve.request_overhead_s)
    assert result.ttft_s[0] == pytest.approx(ttft, rel=1e-9)
    assert result.e2e_s[0] == pytest.approx(e2e, rel=1e-9)
    assert sim.step_model(curve).affine
