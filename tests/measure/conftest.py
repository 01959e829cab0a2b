"""Fixtures for measure tests: a real OpenAI-compatible server (`transformers serve`, CPU) and a
stdlib SSE server whose token timing the test controls."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

SERVER_VENV = Path(os.environ.get("FLEETPLAN_SERVER_VENV", "/tmp/srv"))
SERVE = SERVER_VENV / "bin" / "transformers"
# `transformers serve` flags of the test server (CPU, continuous batching); the model path and port come first.
SERVE_FLAGS = ("--device", "cpu", "--continuous-batching", "--cb-num-blocks", "256", "--cb-block-size", "32")
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
HERE = Path(__file__).resolve().parent
# transformers serve is ready 6-9 s after launch on 2 cores; allow for a slow CI machine.
SERVER_READY_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_health(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"transformers serve exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"transformers serve not ready in {SERVER_READY_TIMEOUT_S} s: {log.read_text()[-2000:]}")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A tiny random Llama + tokenizer dir for `transformers serve` (skips without the test-server venv)."""
    python = SERVER_VENV / "bin" / "python"
    if not python.exists() or not SERVE.exists():
        message = f"test server not installed in {SERVER_VENV}: run bash .ci/setup_test_server.sh"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    model = tmp_path_factory.mktemp("tiny") / "model"
    subprocess.run([str(python), str(HERE / "make_tiny_model.py"), str(model)], check=True,
                   env={**os.environ, **OFFLINE_ENV}, capture_output=True, timeout=300)
    return model


@pytest.fixture(scope="session")
def tiny_server(tiny_model):
    """Base URL of `transformers serve` with a tiny random Llama, continuous batching, on 127.0.0.1."""
    model, env = tiny_model, {**os.environ, **OFFLINE_ENV}
    port, log = free_port(), model.parent / "server.log"
    with open(log, "w") as handle:
        proc = subprocess.Popen([str(SERVE), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
                                 *SERVE_FLAGS], stdout=handle, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_health(url, proc, log)
        yield {"url": url, "model_dir": model, "log": log}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


class TimedSSE(BaseHTTPRequestHandler):
    """Streams `n` text chunks: the first after `ttft_s`, then one every `itl_s`; options set per server.

    With `slots=K` the server generates for at most K requests at a time and the rest wait in line,
    as a saturated engine does: its capacity is K / (ttft_s + (n - 1) * itl_s) requests per second.
    `server.sent` records, per request, when it arrived and when each text chunk went out (time.perf_counter,
    the load generator's clock): a loaded machine oversleeps, and the tests compare with what was sent.
    """

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep test output clean
        pass

    def do_POST(self):  # noqa: N802 - http.server API
        cfg = self.server.cfg
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        received = time.perf_counter()
        self.server.bodies.append({"body": body, "auth": self.headers.get("Authorization")})
        if cfg.get("status", 200) != 200:
            payload = b'{"detail":"nope"}'
            self.send_response(cfg["status"])
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        n = body["max_tokens"]
        try:
            self._generate(n, cfg, received)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (a run stopped at its drain): nothing to tell it

    def _generate(self, n: int, cfg: dict, received: float) -> None:
        slots, chunks = self.server.slots, []
        self.server.sent.append({"received": received, "chunks": chunks})
        if slots is not None:
            slots.acquire()
        try:
            if self.server.closed.is_set():
                return  # the test is over: requests still queued for a slot are dropped
            time.sleep(cfg["ttft_s"])
            for i in range(n):
                if i:
                    time.sleep(cfg["itl_s"])
                chunks.append(time.perf_counter())  # stamped before the write: no client reads it earlier
                self._send({"choices": [{"index": 0, "text": f"w{i} "}]})
        finally:
            if slots is not None:
                slots.release()
        final = {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}
        if cfg.get("usage", True):
            final["usage"] = {"prompt_tokens": 7, "completion_tokens": n, "total_tokens": n + 7}
        self._send(final)
        if cfg.get("done", True):
            self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _send(self, payload: dict) -> None:
        self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
        self.wfile.flush()


@pytest.fixture
def timed_server():
    """Factory: start a TimedSSE server with a config dict; returns (url, server)."""
    servers = []

    def start(**cfg):
        server = ThreadingHTTPServer(("127.0.0.1", 0), TimedSSE)
        server.cfg, server.bodies, server.sent = cfg, [], []
        server.slots = threading.Semaphore(cfg["slots"]) if cfg.get("slots") else None
        server.closed = threading.Event()
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", server

    yield start
    for s in servers:
        s.closed.set()
        s.shutdown()
        s.server_close()
