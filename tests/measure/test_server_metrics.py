"""measure/server_metrics.py: vLLM's /metrics text parsed, two scrapes differenced, quantiles from buckets,
and the --server hook writing server_metrics.jsonl (against a stand-in /metrics)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from measure import server_metrics as sm
from measure.points import Point
from measure.stats import Measurement

LABELS = 'engine="0",model_name="llama-3.1-8b"'
REQ_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
               480.0, 960.0, 1920.0, 7680.0)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)


def hist_text(name: str, bounds, values, kind_help: str = "Histogram.") -> str:
    """A histogram as prometheus_client 0.2x exposes it (cumulative buckets, +Inf, _count, _sum, _created)."""
    lines = [f"# HELP {name} {kind_help}", f"# TYPE {name} histogram"]
    for le in (*bounds, float("inf")):
        cum = sum(1 for v in values if v <= le)
        le_text = "+Inf" if le == float("inf") else repr(float(le))
        lines.append(f'{name}_bucket{{{LABELS},le="{le_text}"}} {float(cum)}')
    lines += [f"{name}_count{{{LABELS}}} {float(len(values))}", f"{name}_sum{{{LABELS}}} {float(sum(values))}",
              f"{name}_created{{{LABELS}}} 1.7649e+09"]
    return "\n".join(lines)


def metrics_text(queue, prefill, ttft, preemptions=0.0, prompt=0.0, steps=()) -> str:
    parts = [
        "# HELP python_gc_objects_collected_total Objects collected during gc",
        "# TYPE python_gc_objects_collected_total counter",
        'python_gc_objects_collected_total{generation="0"} 12345.0',
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{LABELS}}} 3.0",
        f"vllm:num_requests_waiting{{{LABELS}}} 1.0",
        f"vllm:kv_cache_usage_perc{{{LABELS}}} 0.125",
        'vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="57125"} 1.0',
        "# TYPE vllm:num_preemptions counter",
        f"vllm:num_preemptions_total{{{LABELS}}} {preemptions}",
        f"vllm:num_preemptions_created{{{LABELS}}} 1.7649e+09",
        f"vllm:prompt_tokens_total{{{LABELS}}} {prompt}",
        f'vllm:request_success_total{{{LABELS},finished_reason="length"}} {float(len(ttft))}',
        f'vllm:request_success_total{{{LABELS},finished_reason="stop"}} 0.0',
        hist_text("vllm:request_queue_time_seconds", REQ_BUCKETS, queue),
        hist_text("vllm:request_prefill_time_seconds", REQ_BUCKETS, prefill),
        hist_text("vllm:time_to_first_token_seconds", TTFT_BUCKETS, ttft),
        hist_text("vllm:iteration_tokens_total", (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384),
                  list(steps)),
    ]
    return "\n".join(parts) + "\n"


def test_parse_labels_values_and_comments():
    samples = sm.parse_prometheus(metrics_text([0.1], [0.2], [0.3]) + 'x{a="q\\"uote",b="2"} NaN 1700000000\n')
    assert samples["vllm:num_requests_running"] == [({"engine": "0", "model_name": "llama-3.1-8b"}, 3.0)]
    assert samples["x"][0][0] == {"a": 'q\\"uote', "b": "2"}
    assert "# HELP" not in " ".join(samples)
    assert sm.gauge_values(samples) == {"running": 3.0, "waiting": 1.0, "kv_cache_usage": 0.125}
    h = sm.histogram(samples, sm.HISTOGRAMS["ttft"])
    assert h.count == 1 and h.sum == pytest.approx(0.3) and h.buckets[-1] == (float("inf"), 1.0)


def test_delta_of_two_scrapes_is_this_points_requests():
    warm = dict(queue=[0.0, 0.0], prefill=[0.01, 0.01], ttft=[0.02, 0.02], preemptions=0.0, prompt=16.0,
                steps=[8, 8])
    point_queue = [0.001] * 50 + [0.2] * 40 + [0.6] * 10          # 100 requests of this point
    point_prefill = [0.03] * 100
    point_ttft = [0.035] * 50 + [0.3] * 40 + [0.7] * 10
    before = sm.parse_prometheus(metrics_text(**warm))
    after = sm.parse_prometheus(metrics_text(warm["queue"] + point_queue, warm["prefill"] + point_prefill,
                                             warm["ttft"] + point_ttft, preemptions=3.0,
                                             prompt=16.0 + 100 * 512, steps=[8, 8] + [300] * 20 + [8192] * 5))
    delta = sm.point_delta(before, after)
    q = delta["queue"]
    assert q["count"] == 100
    assert q["mean_ms"] == pytest.approx(1000 * sum(point_queue) / 100, abs=1e-3)
    assert q["buckets"]["0.3"] == 90 and q["buckets"]["0.5"] == 90 and q["buckets"]["0.8"] == 100
    # p50 and p90 fall in [0, 0.3] (90 requests): linear inside the bucket
    assert q["p50_ms"] == pytest.approx(300 * 50 / 90, abs=1e-3)
    assert q["p90_ms"] == pytest.approx(300.0)
    assert q["p99_ms"] == pytest.approx(500 + 300 * 9 / 10)     # rank 99 in (0.5, 0.8]
    ttft = delta["ttft"]
    assert ttft["count"] == 100 and ttft["p50_ms"] == pytest.approx(40.0)   # rank 50 = top of (0.02, 0.04]
    assert delta["prefill"]["mean_ms"] == pytest.approx(30.0)
    assert delta["counters"]["preemptions"] == 3.0
    assert delta["counters"]["prompt_tokens"] == 100 * 512
    assert delta["counters"]["requests_finished"] == 100
    steps = delta["step_tokens"]
    assert steps["count"] == 25 and steps["mean"] == pytest.approx((20 * 300 + 5 * 8192) / 25)
    note = sm.summary_note(delta)
    assert note.startswith("server /metrics means ms: queue ") and "preemptions 3" in note
    assert "decode" not in note   # absent histogram: left out, not zero


def test_quantile_edges():
    h = sm.Histogram(((0.1, 0.0), (1.0, 10.0), (float("inf"), 12.0)), 12.0, 9.0)
    assert h.quantile(0.5) == pytest.approx(0.1 + 0.9 * 6 / 10)
    assert h.quantile(0.99) == 1.0               # in +Inf: the highest finite bound
    assert sm.Histogram((), 0.0, 0.0).quantile(0.5) is None


def test_counter_reset_and_missing_metrics():
    before = sm.parse_prometheus(metrics_text([0.1] * 5, [0.1] * 5, [0.1] * 5))
    after = sm.parse_prometheus(metrics_text([0.1], [0.1], [0.1]))
    assert sm.point_delta(before, after)["queue"] == {"error": "counter reset between scrapes"}
    assert sm.point_delta({}, {}) == {"counters": {}}


class _Metrics(BaseHTTPRequestHandler):
    text = ""

    def do_GET(self):  # noqa: N802
        body = self.text.encode()
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def metrics_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_server_engine_writes_one_line_per_point(tmp_path, metrics_server, monkeypatch):
    from measure.engines import EngineConfig
    from measure.engines.server import ServerEngine

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"vocab_size": 1000}))
    engine = ServerEngine(EngineConfig(engine="vllm", model="llama-3.1-8b", model_path=str(tmp_path / "m"),
                                       server=True, server_port=8123, server_log=str(tmp_path / "p" / "server.log")))
    engine.base_url = metrics_server
    engine._alive = lambda: True
    _Metrics.text = metrics_text([0.0], [0.01], [0.02])
    m = Measurement(num_requests=2, duration_s=1.5, input_tokens=10, output_tokens=8, ttft_ms=[21.04, 30.0],
                    tpot_ms=[5.0, 5.5], e2e_ms=[60.0, 70.0], notes="client note")

    def run_point(point, seed):
        _Metrics.text = metrics_text([0.0, 0.002, 0.004], [0.01, 0.02, 0.02], [0.02, 0.03, 0.03], preemptions=1.0)
        return m

    monkeypatch.setattr(engine.client, "run_point", run_point)
    point = Point("rate", 256, 256, request_rate=2.0, arrival="gamma:cv=4", num_requests=2)
    out = engine.run_point(point, seed=7)
    assert out.notes.startswith("client note; server /metrics means ms: queue 3.0, prefill 20.0")
    (line,) = sm.read_records(tmp_path / "p" / sm.FILE_NAME)
    assert line["point"]["arrival"] == "gamma:cv=4" and line["point"]["request_rate"] == 2.0
    assert line["point"]["num_requests"] == 2 and line["seed"] == 7
    assert line["server"]["queue"]["count"] == 2 and line["server"]["counters"]["preemptions"] == 1.0
    assert line["client"]["ttft_ms"] == [21.0, 30.0]
    assert "series" in line["server"]["gauges"]


def test_no_vllm_metrics_no_record(tmp_path):
    recorder = sm.PointRecorder(lambda: "# nothing here\n", interval_s=0)
    assert recorder.begin() is False and recorder.end() is None
    failing = sm.PointRecorder(lambda: (_ for _ in ()).throw(OSError("refused")), interval_s=0)
    assert failing.begin() is False and "refused" in failing.error
