"""Benchmark: how many streamed tokens per second the load generator can time.

    .venv/bin/python benchmarks/loadgen_capacity.py [--itl-ms 10] [--output-len 256] [--concurrency 32 128 256 512]

Starts a minimal SSE server in a child process (raw asyncio, far cheaper per
event than a real inference server) that answers /v1/completions with
`max_tokens` chunks, one every --itl-ms after a first chunk at once, then
drives it with measure.loadgen at each concurrency.  With an ideal client the
measured TPOT equals --itl-ms at every concurrency; when the client's event
loop saturates, TPOT and TTFT grow while the server still keeps its pace.
Prints the client's CPU time per token event (the figure that bounds a real
run: at U us per event, one client core times at most 1e6/U tokens/s).  Not a
test: it prints, it does not assert.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from measure.loadgen import LoadSpec, RequestSpec, run_load_sync, summarize_results  # noqa: E402

SERVER = r'''
import asyncio, json, sys
itl = float(sys.argv[2])
CHUNK = b"data: " + json.dumps({"choices": [{"index": 0, "text": "x"}]}).encode() + b"\n\n"

async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length"))
            body = json.loads(await reader.readexactly(length))
            n = int(body["max_tokens"])
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            for i in range(n):
                if i:
                    await asyncio.sleep(itl)
                writer.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
                await writer.drain()
            usage = {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": n}}
            tail = b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n"
            writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]), backlog=4096)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()

asyncio.run(main())
'''


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def measure(base_url: str, concurrency: int, output_len: int, rounds: int) -> dict:
    n = concurrency * rounds
    spec = LoadSpec(base_url=base_url, requests=tuple(RequestSpec(16, output_len) for _ in range(n)),
                    concurrency=concurrency, prompt_format="tokens")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = run_load_sync(spec)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    stats = summarize_results(result.results)
    events = n * output_len
    return {"concurrency": concurrency, "events_per_s": events / wall, "client_cpu_share": cpu / wall,
            "cpu_us_per_event": cpu / events * 1e6, "tpot_p50_ms": float(np.median(stats["tpot_ms"])),
            "ttft_p50_ms": float(np.median(stats["ttft_ms"])), "errors": sum(not r.ok for r in result.results)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--itl-ms", type=float, default=10.0, help="server's gap between tokens (default 10)")
    parser.add_argument("--output-len", type=int, default=256, help="tokens per request (default 256)")
    parser.add_argument("--rounds", type=int, default=2, help="requests per client (default 2)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32, 128, 256, 512])
    args = parser.parse_args(argv)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(args.itl_ms / 1000)],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        if server.stdout.readline().strip() != "ready":
            print("error: the SSE server did not start", file=sys.stderr)
            return 1
        print(f"server: {args.itl_ms:g} ms between tokens, {args.output_len} tokens per request; "
              f"{os.cpu_count()} CPU cores")
        for c in args.concurrency:
            print(json.dumps({k: round(v, 2) if isinstance(v, float) else v
                              for k, v in measure(f"http://127.0.0.1:{port}", c, args.output_len, args.rounds).items()}))
    finally:
        server.terminate()
        server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
