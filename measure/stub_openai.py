"""A misbehaving OpenAI-compatible server for fault drills (stdlib only; runs as its own process on 127.0.0.1).

Used by tests/measure/test_faults.py and scripts/measure_faults.py: `start_stub(faults)` launches it and
waits for /health.  Run directly: `python -m measure.stub_openai PORT [FAULTS_JSON] [--api-key KEY]`.

Streams `max_tokens` text chunks, `ITL_S` apart, with usage and [DONE].  FAULTS_JSON maps a request's
max_tokens (a point's output_len) to a fault: `500` (an error body echoing the Authorization header, as
some proxies do), `401`, `drop` (the connection closed mid-stream), `hang` (no answer for HANG_S), `die`
(the server process exits), `escape` (a 500 body with terminal escape codes), and `garbage:KIND`, a
malformed stream event where KIND is `nonobject` (a JSON list), `binary` (bytes that are not UTF-8),
`usage` (non-numeric token counts) or `choices` (a string where a list belongs).  Warm-up requests (max_tokens 4) are never faulted.

A token-id prompt meets an unbounded prefix cache as vLLM's works (blocks of CACHE_BLOCK tokens chained from the
start, only full blocks, the last prompt token always computed): usage then carries
`prompt_tokens_details.cached_tokens`, as vLLM's does with `--enable-prompt-tokens-details`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ITL_S = 0.002
HANG_S = 30.0
GARBAGE = {
    "nonobject": b"data: [1, 2, 3]\n\n",
    "binary": b"data: {\"choices\": [{\"text\": \"\xff\xfe\x80\"}]}\n\n",
    "usage": b'data: {"choices": [{"text": "x"}], "usage": {"completion_tokens": "many"}}\n\n',
    "choices": b'data: {"choices": "abc"}\n\n',
}
# Tokens per prefix-cache block (vLLM's default block size).
CACHE_BLOCK = 16
# The stub's prefix cache: chained block keys seen (one process, one cache, shared by the handler threads).
CACHED_KEYS: set[int] = set()


def cached_tokens(prompt: list[int]) -> int:
    """Leading prompt tokens found in the stub's prefix cache; the prompt's full blocks are then cached."""
    hit, key, hitting = 0, 0, True
    for j in range(len(prompt) // CACHE_BLOCK):
        key = hash((key, tuple(prompt[j * CACHE_BLOCK:(j + 1) * CACHE_BLOCK])))
        if hitting and key in CACHED_KEYS and (j + 1) * CACHE_BLOCK <= len(prompt) - 1:
            hit += CACHE_BLOCK
        else:
            hitting = False
        CACHED_KEYS.add(key)
    return hit


# The stub answers /health within a second of launch (stdlib imports only); more is a broken start.
READY_S = 10.0
# Between /health polls while it starts.
POLL_S = 0.05


class Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    faults: dict[str, str] = {}
    api_key: str | None = None

    def log_message(self, *args):  # keep test output clean
        pass

    def do_GET(self):  # noqa: N802 - http.server API
        if self.path in ("/health", "/v1/models", "/version"):
            self._reply(200, b'{"version": "stub-1"}' if self.path == "/version" else b"{}")
        else:
            self._reply(404, b"{}")

    def do_POST(self):  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n = int(body["max_tokens"])
        fault = self.faults.get(str(n), "ok")
        auth = self.headers.get("Authorization", "")
        if self.api_key and auth != f"Bearer {self.api_key}" or fault == "401":
            self._reply(401, f'{{"error": "invalid Authorization header {auth!r}"}}'.encode())
        elif fault == "500":
            self._reply(500, f'{{"error": "upstream failed", "request_headers": {{"Authorization": "{auth}"}}}}'.encode())
        elif fault == "escape":
            self._reply(500, b'{"error": "\x1b[2J\x1b]8;;http://evil\x07click\x1b]8;;\x07"}')
        elif fault == "hang":
            time.sleep(HANG_S)
        elif fault == "die":
            os._exit(1)
        else:
            prompt = body.get("prompt")
            tokens = prompt if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt) else None
            self._stream(n, fault, tokens)

    def _reply(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, n: int, fault: str, tokens: list[int] | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for i in range(n):
            if fault == "drop" and i == 1:
                self.connection.shutdown(2)
                return
            if fault.startswith("garbage:") and i == 1:
                self.wfile.write(GARBAGE[fault.split(":", 1)[1]])
                self.wfile.flush()
                continue
            self.wfile.write(f"data: {json.dumps({'choices': [{'index': 0, 'text': f'w{i} '}]})}\n\n".encode())
            self.wfile.flush()
            time.sleep(ITL_S)
        usage: dict = {"prompt_tokens": 7, "completion_tokens": n, "total_tokens": n + 7}
        if tokens is not None:
            usage |= {"prompt_tokens": len(tokens), "total_tokens": n + len(tokens),
                      "prompt_tokens_details": {"cached_tokens": cached_tokens(tokens)}}
        self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()
        self.close_connection = True


def main(argv: list[str]) -> None:
    args = list(argv)
    if "--api-key" in args:
        i = args.index("--api-key")
        Stub.api_key = args[i + 1]
        del args[i:i + 2]
    Stub.faults = json.loads(args[1]) if len(args) > 1 else {}
    server = ThreadingHTTPServer(("127.0.0.1", int(args[0])), Stub)
    server.daemon_threads = True
    server.serve_forever()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_stub(faults: dict | None = None, port: int | None = None,
               api_key: str | None = None) -> tuple[str, subprocess.Popen]:
    """Launch the stub in its own process with `faults` (max_tokens -> fault); returns (base URL, process)
    once /health answers.  The caller kills the process.  Raises RuntimeError if it is not up in READY_S."""
    port = port or free_port()
    argv = [sys.executable, __file__, str(port), json.dumps({str(k): v for k, v in (faults or {}).items()})]
    proc = subprocess.Popen(argv + (["--api-key", api_key] if api_key else []))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as reply:
                if reply.status == 200:
                    return url, proc
        except OSError:  # refused while starting (urllib.error.URLError is an OSError)
            time.sleep(POLL_S)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"stub server on port {port} did not start within {READY_S:g} s (exit {proc.returncode})")


if __name__ == "__main__":
    main(sys.argv[1:])
