"""Load generator: exact TTFT/TPOT/ITL arithmetic on a server whose timing the test controls,
arrivals, request logs, and real runs against `transformers serve` (CPU)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from fleetfacts.arrivals import arrival_times
from fleetfacts.errors import InputError
from fleetfacts.schema import PROFILE, load_table
from measure.cli import EXIT_OK, main
from measure.loadgen import (
    LoadSpec,
    RequestResult,
    RequestSpec,
    SSEReader,
    load_request_log,
    run_load_sync,
    summarize_results,
)

TTFT_S, ITL_S, N_TOKENS = 0.20, 0.05, 6
# Between a chunk the server sends and the load generator's clock reading it, on a loaded 2-core box (the tests
# run beside others). The server's own sleeps overshoot by more there, so timings are checked against the times it
# recorded sending each chunk (conftest.TimedSSE), not against the sleeps.
TOL_S = 0.04


def test_tpot_is_vllm_definition():
    r = RequestResult(True, start_s=10.0, end_s=10.9, ttft_s=0.2, itl_s=(0.1,) * 7, output_tokens=8)
    assert r.e2e_s == pytest.approx(0.9) and r.tpot_s == pytest.approx((0.9 - 0.2) / 7)
    assert RequestResult(True, 0.0, 1.0, ttft_s=0.5, output_tokens=1).tpot_s is None


@pytest.mark.parametrize("done,usage", [(True, True), (False, True), (False, False)])
def test_timing_against_controlled_server(timed_server, done, usage):
    url, server = timed_server(ttft_s=TTFT_S, itl_s=ITL_S, done=done, usage=usage)
    spec = LoadSpec(base_url=url, requests=(RequestSpec(16, N_TOKENS),) * 2, concurrency=1, api_key="sk-test")
    result = run_load_sync(spec)
    assert len(result.results) == 2 and all(r.ok for r in result.results)
    # closed loop at concurrency 1: the second request starts after the first ends, so they pair with the
    # server's records in order
    first, second = sorted(result.results, key=lambda r: r.start_s)
    assert second.start_s >= first.end_s
    for r, sent in zip((first, second), server.sent, strict=True):
        chunks = np.array(sent["chunks"])  # when the server sent each token (the same perf_counter clock)
        assert r.output_tokens == N_TOKENS == len(chunks)
        assert r.start_s <= sent["received"] and r.ttft_s >= TTFT_S  # the server slept at least TTFT_S
        assert len(r.itl_s) == N_TOKENS - 1 and min(r.itl_s) >= 0
        # When the client read each token: never before the server sent it (a TTFT taken at the headers, or a
        # gap given to the wrong token, reads one too early), and the gaps add up to the span from the first
        # token to the last.  A descheduled client may read two tokens together (one gap ~0 after a long one),
        # so the per-gap equality with the server's gaps is not asserted.
        read = r.start_s + r.ttft_s + np.concatenate([[0.0], np.cumsum(r.itl_s)])
        assert np.all(read >= chunks - 1e-6)
        assert read[-1] <= r.end_s and r.e2e_s >= chunks[-1] - r.start_s - 1e-6
        assert r.tpot_s == (r.e2e_s - r.ttft_s) / (N_TOKENS - 1)   # exactly the definition
    assert server.bodies[0]["auth"] == "Bearer sk-test" and server.bodies[0]["body"]["ignore_eos"] is True
    assert server.bodies[0]["body"]["prompt"] != server.bodies[1]["body"]["prompt"]


def test_errors_counted_not_timed(timed_server):
    url, _ = timed_server(ttft_s=0, itl_s=0, status=422)
    result = run_load_sync(LoadSpec(base_url=url, requests=(RequestSpec(4, 2),) * 3, concurrency=3))
    stats = summarize_results(result.results)
    assert stats["errors"] == 3 and stats["ok"] == 0 and stats["first_error"].startswith("HTTP 422")
    assert stats["ttft_ms"] == []


def test_time_bound_cancels_in_flight(timed_server):
    url, _ = timed_server(ttft_s=0.05, itl_s=0.1, done=True)
    spec = LoadSpec(base_url=url, requests=(RequestSpec(4, 20),) * 4, concurrency=2, max_duration_s=0.5)
    result = run_load_sync(spec)
    assert result.cancelled == 4 and result.results == ()


def test_arrivals_seeded_with_the_requested_rate_and_cv():
    pois = np.diff(arrival_times(20000, 5.0, "poisson", seed=1))
    assert pois.mean() == pytest.approx(0.2, rel=0.03) and pois.std() / pois.mean() == pytest.approx(1, rel=0.05)
    gam = np.diff(arrival_times(20000, 5.0, "gamma:cv=3", seed=1))
    assert gam.mean() == pytest.approx(0.2, rel=0.1) and gam.std() / gam.mean() == pytest.approx(3, rel=0.1)
    assert arrival_times(5, 1.0, "poisson", 7) == arrival_times(5, 1.0, "poisson", 7)
    with pytest.raises(InputError, match="expected poisson"):
        arrival_times(3, 1.0, "uniform", 0)


def test_request_log_reads_every_format_the_planner_reads(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("timestamp,prompt_tokens,completion_tokens\n105.5,30,4\n100.0,10,2\n")
    assert load_request_log(path) == (RequestSpec(10, 2, 0.0), RequestSpec(30, 4, 5.5))
    jl = tmp_path / "log.jsonl"
    jl.write_text(json.dumps({"timestamp": 3, "usage": {"prompt_tokens": 5, "completion_tokens": 0}}) + "\n"
                  + json.dumps({"timestamp": 4, "prompt_tokens": 7, "completion_tokens": 8}) + "\n")
    assert load_request_log(jl) == (RequestSpec(5, 1, 0.0), RequestSpec(7, 8, 1.0))  # 0 output tokens: sent for 1
    azure = tmp_path / "azure.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                     "2023-11-16 18:15:50.9951690,396,109\n")
    specs = load_request_log(azure)
    assert [(r.input_len, r.output_len) for r in specs] == [(374, 44), (396, 109)]
    assert specs[1].send_at_s == pytest.approx(4.3145790)
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,prompt_tokens\n1,2\n")
    with pytest.raises(InputError, match="line 1: not a request log"):
        load_request_log(bad)


def test_request_log_keeps_the_named_route(tmp_path):
    path = tmp_path / "gw.csv"
    path.write_text("timestamp,route,prompt_tokens,completion_tokens\n0,chat,10,2\n1,code,20,3\n2,chat,30,4\n"
                    "3,code,40,5\n")
    assert load_request_log(path, route="code") == (RequestSpec(20, 3, 0.0), RequestSpec(40, 5, 2.0))
    assert len(load_request_log(path)) == 4


def test_open_loop_replay_sends_on_schedule(timed_server):
    url, _ = timed_server(ttft_s=0.0, itl_s=0.0)
    requests = (RequestSpec(4, 2, 0.0), RequestSpec(4, 2, 0.3))
    result = run_load_sync(LoadSpec(base_url=url, requests=requests))
    starts = sorted(r.start_s for r in result.results)
    assert starts[1] - starts[0] == pytest.approx(0.3, abs=TOL_S)


# ------------------------------------------------------------------ real server (transformers serve, CPU)

@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_real_server_streams_and_counts_usage(tiny_server, endpoint):
    spec = LoadSpec(base_url=tiny_server["url"], requests=(RequestSpec(12, 8),) * 4, concurrency=2,
                    endpoint=endpoint, ignore_eos=False)
    result = run_load_sync(spec)
    stats = summarize_results(result.results)
    assert stats["errors"] == 0, stats["first_error"]
    assert all(r.output_tokens == 8 for r in result.results)       # usage.completion_tokens
    assert all(0 < r.ttft_s <= r.e2e_s for r in result.results) and len(stats["tpot_ms"]) == 4


def test_real_server_rejects_ignore_eos_and_errors_are_counted(tiny_server):
    spec = LoadSpec(base_url=tiny_server["url"], requests=(RequestSpec(6, 4),), concurrency=1, ignore_eos=True)
    result = run_load_sync(spec)
    assert not result.results[0].ok and "HTTP 422" in result.results[0].error


def test_profile_openai_engine_against_real_server(tiny_server, tmp_path, monkeypatch):
    """The sweep runner, resume and profile writing against a real server process."""
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("mode,input_len,output_len,batch_size,concurrency,request_rate,arrival,num_requests\n"
                      "offline,16,8,4,,,,\n"
                      "concurrency,16,8,,2,,,4\n"
                      "rate,16,8,,,20,poisson,4\n")
    out = tmp_path / "prof"
    monkeypatch.setenv("MY_KEY", "sk-secret-123")
    argv = ["profile", "--gpu", "cpu-ci", "--engine", "openai", "--model", "tiny", "--base-url", tiny_server["url"],
            "--shapes", str(shapes), "--out", str(out), "--no-ignore-eos", "--api-key-env", "MY_KEY",
            "--engine-version", "transformers-5.24.0"]
    assert main(argv) == EXIT_OK
    table = load_table(out / "profile.csv", PROFILE)
    assert list(table["mode"]) == ["offline", "concurrency", "rate"] and set(table["status"]) == {"ok"}
    assert (table["output_tok_per_s"] > 0).all() and table["tpot_p50_ms"].notna().all()
    assert table["engine_version"].iloc[0] == "transformers-5.24.0"
    assert list(table["num_requests"]) == [4, 4, 4]
    for path in (out / "profile.csv", out / "env.json"):
        assert "sk-secret-123" not in path.read_text()
    # resume after losing the last row: only that point runs again
    lines = (out / "profile.csv").read_text().splitlines()
    (out / "profile.csv").write_text("\n".join(lines[:-1]) + "\n")
    assert main(argv + ["--resume"]) == EXIT_OK
    with open(out / "profile.csv", newline="") as handle:
        assert [r["mode"] for r in csv.DictReader(handle)] == ["offline", "concurrency", "rate"]
    assert len(json.loads((out / "env.json").read_text())["runs"]) == 2


def test_profile_failed_point_recorded_against_real_server(tiny_server, tmp_path):
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("mode,input_len,output_len,batch_size\noffline,8,4,2\n")
    out = tmp_path / "prof"
    # with ignore_eos the server answers 422 to every request: the warm-up fails -> exit 2, nothing written
    argv = ["profile", "--gpu", "cpu-ci", "--engine", "openai", "--model", "tiny", "--base-url", tiny_server["url"],
            "--shapes", str(shapes), "--out", str(out)]
    assert main(argv) == 2
    assert not (out / "profile.csv").exists()


def test_sse_reader_times_events_by_chunk_arrival_across_split_lines():
    reader = SSEReader(chat=False)
    reader.feed(b'data: {"choices":[{"index":0,"text":"a"}]}\r\n\r\ndata: {"choices":[{"in', 1.0)
    reader.feed(b'dex":0,"text":"b"}]}\n\ndata: {"choices":[{"index":0,"text":"c"}]}\n\n', 2.0)
    reader.feed(b'data: {"choices":[],"usage":{"completion_tokens":3}}\n\ndata: [DONE]\n\n', 3.0)
    assert reader.times == [1.0, 2.0, 2.0]  # "b" completed in the second chunk; "c" arrived with it
    assert reader.usage == {"completion_tokens": 3} and reader.done


def test_sse_reader_reads_a_last_line_without_newline_and_nothing_after_done():
    reader = SSEReader(chat=True)
    reader.feed(b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\ndata: {"choices":[{"delta":{"content":"x"}}]}', 1.0)
    reader.close(2.0)
    assert reader.times == [2.0]  # the role-only opener is not a token
    reader.feed(b'\ndata: [DONE]\n\ndata: {"choices":[{"delta":{"content":"late"}}]}\n\n', 3.0)
    assert reader.times == [2.0] and reader.done


def test_sse_reader_reports_an_error_event_inside_a_200_stream():
    reader = SSEReader(chat=False)
    reader.feed(b'data: {"error": {"message": "Token id 326 is out of vocabulary", "code": 400}}\n\n', 1.0)
    assert reader.done and reader.error == "Token id 326 is out of vocabulary" and reader.times == []
