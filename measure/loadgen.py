"""Load generator for any OpenAI-compatible server: streaming /v1/completions or /v1/chat/completions.

Loads: fixed concurrency (closed loop), open-loop arrivals at a rate (Poisson,
or gamma with a coefficient of variation: `gamma:cv=2`), or replay of a
request log (CSV or JSONL with `timestamp`, `input_len`/`prompt_tokens`,
`output_len`/`completion_tokens`).  Bounded by a request count and a time
limit.  Per request: TTFT (send to first token chunk), ITL (gaps between token
chunks), e2e (send to end of stream), TPOT = (e2e - ttft)/(output_tokens - 1)
as vLLM defines it.  Output tokens come from the stream's `usage` when the
server sends it, else from the number of token chunks.  Servers that end the
stream without `data: [DONE]` are handled (end of stream = done).  The API key
is sent as a Bearer header and never logged or returned.
"""

from __future__ import annotations

import asyncio
import csv
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import aiohttp
import numpy as np

from fleetfacts.errors import InputError

log = logging.getLogger(__name__)

# Bodies of failed responses are cut to this many characters in error messages.
MAX_ERROR_BODY = 200


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: its lengths and, in open-loop loads, when (s after the start)."""

    input_len: int
    output_len: int
    send_at_s: float | None = None


@dataclass(frozen=True)
class LoadSpec:
    """A bounded load against one endpoint."""

    base_url: str
    requests: tuple[RequestSpec, ...]
    endpoint: str = "completions"          # or "chat"
    model: str | None = None
    concurrency: int | None = None          # closed loop; None = open loop (send_at_s) or all at once
    max_duration_s: float | None = None
    request_timeout_s: float = 600.0
    api_key: str | None = field(default=None, repr=False)
    ignore_eos: bool = True
    prompt_format: str = "words"            # or "tokens" (token-id lists; completions only)
    vocab_size: int = 32000
    seed: int = 0
    extra_body: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RequestResult:
    ok: bool
    start_s: float                          # perf_counter at send
    end_s: float
    ttft_s: float | None = None
    itl_s: tuple[float, ...] = ()
    output_tokens: int = 0
    prompt_tokens: int | None = None
    error: str = ""

    @property
    def e2e_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def tpot_s(self) -> float | None:
        if self.ttft_s is None or self.output_tokens <= 1:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


@dataclass(frozen=True)
class LoadResult:
    results: tuple[RequestResult, ...]
    duration_s: float                       # first send to last completion
    cancelled: int = 0                      # requests cut by max_duration_s (not errors)


# ------------------------------------------------------------------ arrivals and request logs

def load_request_log(path: str | Path) -> tuple[RequestSpec, ...]:
    """Replay log rows (CSV or JSONL): timestamp [s] + prompt and completion token counts, sorted by time."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: request log not found")
    rows = _read_log_rows(path)
    specs = []
    for i, row in enumerate(rows):
        where = f"{path}, record {i + 1}"
        try:
            ts = float(row["timestamp"])
            inp = int(float(row.get("input_len") or row["prompt_tokens"]))
            out = int(float(row.get("output_len") or row["completion_tokens"]))
        except (KeyError, ValueError, TypeError):
            raise InputError(f"{where}: needs timestamp, input_len|prompt_tokens, output_len|completion_tokens "
                             f"as numbers, got {row!r}") from None
        if inp < 1 or out < 1 or not math.isfinite(ts):
            raise InputError(f"{where}: token counts must be >= 1 and the timestamp finite")
        specs.append((ts, inp, out))
    if not specs:
        raise InputError(f"{path}: no requests in the log")
    specs.sort()
    t0 = specs[0][0]
    return tuple(RequestSpec(inp, out, ts - t0) for ts, inp, out in specs)


def _read_log_rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as handle:
        if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
            try:
                return [json.loads(line) for line in handle if line.strip()]
            except json.JSONDecodeError as err:
                raise InputError(f"{path}: not JSON lines ({err})") from None
        return list(csv.DictReader(handle))


# ------------------------------------------------------------------ prompts and bodies

def _word(i: int) -> str:
    syllables = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "de", "po", "zu", "fe")
    out = ""
    for _ in range(3):
        i, r = divmod(i, len(syllables))
        out += syllables[r]
    return out


def make_prompt(index: int, length: int, fmt: str, vocab_size: int, rng: np.random.Generator) -> str | list[int]:
    """A distinct prompt of about `length` tokens (exactly, for token-id prompts); never empty."""
    length = max(1, length)
    if fmt == "tokens":
        ids = rng.integers(0, vocab_size, size=length)
        ids[0] = index % vocab_size
        return ids.tolist()
    words = [f"r{index}"] + [_word(int(w)) for w in rng.integers(0, 1728, size=length - 1)]
    return " ".join(words)


def request_body(spec: LoadSpec, prompt: str | list[int], output_len: int) -> dict:
    body: dict = {"max_tokens": output_len, "stream": True, "temperature": 0.0,
                  "stream_options": {"include_usage": True}}
    if spec.model:
        body["model"] = spec.model
    if spec.endpoint == "chat":
        if not isinstance(prompt, str):
            raise InputError("token-id prompts work with the completions endpoint only")
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if spec.ignore_eos:
        body["ignore_eos"] = True
    body.update(spec.extra_body)
    return body


# ------------------------------------------------------------------ one streamed request

def _token_event(payload: dict, chat: bool) -> bool:
    """True when an SSE chunk carries generated text (a role-only chat opener or a bare finish does not)."""
    for choice in payload.get("choices") or []:
        text = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
        if text:
            return True
        if text == "" and choice.get("finish_reason") is None and not (chat and "role" in (choice.get("delta")
                                                                                              or {})):
            return True
    return False


class SSEReader:
    """Splits a byte stream into SSE `data:` lines and times the token events among them.

    A chunk's arrival time stamps every event in it (events that arrive together were sent
    together); parsing happens after the clock is read, so it does not delay the stamps.
    """

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.times: list[float] = []
        self.usage: dict = {}
        self.error: str | None = None  # an error event inside a 200 stream (vLLM sends these)
        self.done = False
        self._rest = b""

    def feed(self, chunk: bytes, now: float) -> None:
        *lines, self._rest = (self._rest + chunk).split(b"\n")
        for line in lines:
            self._line(line, now)

    def close(self, now: float) -> None:
        if self._rest:
            self._line(self._rest, now)
            self._rest = b""

    def _line(self, line: bytes, now: float) -> None:
        if self.done or not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return
        payload = json.loads(data)
        if payload.get("error"):
            error = payload["error"]
            self.error = str(error.get("message", error) if isinstance(error, dict) else error)
            self.done = True
            return
        if payload.get("usage"):
            self.usage = payload["usage"]
        if _token_event(payload, self.chat):
            self.times.append(now)


async def stream_request(session: aiohttp.ClientSession, spec: LoadSpec, body: dict) -> RequestResult:
    """Send one streaming request and time its chunks."""
    path = "/v1/chat/completions" if spec.endpoint == "chat" else "/v1/completions"
    reader = SSEReader(chat=spec.endpoint == "chat")
    start = time.perf_counter()
    try:
        async with session.post(spec.base_url + path, json=body) as response:
            if response.status != 200:
                text = (await response.read()).decode("utf-8", "replace")
                return RequestResult(False, start, time.perf_counter(),
                                     error=f"HTTP {response.status}: {' '.join(text.split())[:MAX_ERROR_BODY]}")
            async for chunk in response.content.iter_any():
                reader.feed(chunk, time.perf_counter())
                if reader.done:
                    break
            reader.close(time.perf_counter())
    except (aiohttp.ClientError, asyncio.TimeoutError, json.JSONDecodeError, OSError) as err:
        return RequestResult(False, start, time.perf_counter(), error=f"{type(err).__name__}: {err}"[:300])
    end = time.perf_counter()
    if reader.error:
        return RequestResult(False, start, end, error=f"error in stream: {reader.error}"[:300])
    return _result(start, end, reader.times, reader.usage)


def _result(start: float, end: float, times: list[float], usage: dict) -> RequestResult:
    if not times:
        return RequestResult(False, start, end, error="stream ended without any token")
    n_out = int(usage.get("completion_tokens") or len(times))
    gaps = tuple(b - a for a, b in zip(times, times[1:], strict=False))
    return RequestResult(True, start, end, ttft_s=times[0] - start, itl_s=gaps, output_tokens=n_out,
                         prompt_tokens=usage.get("prompt_tokens"))


# ------------------------------------------------------------------ loads

def _client(spec: LoadSpec, width: int) -> aiohttp.ClientSession:
    """aiohttp: its C HTTP parser costs a fraction of httpx's per streamed chunk, which matters at
    10k+ tokens/s (benchmarks/loadgen_capacity.py); vLLM's own `bench serve` client uses it too."""
    headers = {"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else {}
    connector = aiohttp.TCPConnector(limit=max(width, 1) + 4)
    return aiohttp.ClientSession(headers=headers, connector=connector,
                                 timeout=aiohttp.ClientTimeout(total=spec.request_timeout_s))


def _bodies(spec: LoadSpec) -> list[dict]:
    rng = np.random.default_rng(spec.seed)
    return [request_body(spec, make_prompt(i, r.input_len, spec.prompt_format, spec.vocab_size, rng), r.output_len)
            for i, r in enumerate(spec.requests)]


async def run_load(spec: LoadSpec) -> LoadResult:
    """Run the whole load; prompts are built before the clock starts.  Requests still running at
    `max_duration_s` are cancelled and counted in `cancelled` (not errors)."""
    bodies = _bodies(spec)
    open_loop = spec.concurrency is None and all(r.send_at_s is not None for r in spec.requests)
    width = len(bodies) if open_loop or spec.concurrency is None else spec.concurrency
    results: list[RequestResult] = []
    async with _client(spec, width) as client:
        start = time.perf_counter()
        if open_loop:
            tasks = [asyncio.create_task(_send_at(client, spec, b, start + cast(float, r.send_at_s), results))
                     for b, r in zip(bodies, spec.requests, strict=True)]
        else:
            queue: asyncio.Queue = asyncio.Queue()
            for body in bodies:
                queue.put_nowait(body)
            tasks = [asyncio.create_task(_worker(client, spec, queue, results))
                     for _ in range(min(width, len(bodies)))]
        _, pending = await asyncio.wait(tasks, timeout=spec.max_duration_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    end = max((r.end_s for r in results), default=time.perf_counter())
    return LoadResult(results=tuple(results), duration_s=max(end - start, 1e-9),
                      cancelled=len(bodies) - len(results))


async def _send_at(client, spec: LoadSpec, body: dict, when: float, results: list) -> None:
    delay = when - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)
    results.append(await stream_request(client, spec, body))


async def _worker(client, spec: LoadSpec, queue: asyncio.Queue, results: list) -> None:
    """Closed loop: send the next body as soon as this worker's previous request ended."""
    while not queue.empty():
        body = queue.get_nowait()
        results.append(await stream_request(client, spec, body))


def run_load_sync(spec: LoadSpec) -> LoadResult:
    return asyncio.run(run_load(spec))


def summarize_results(results: Sequence[RequestResult]) -> dict:
    """ms lists of the successful requests: ttft, tpot, itl, e2e; plus counts."""
    ok = [r for r in results if r.ok]
    return {"ttft_ms": [r.ttft_s * 1000 for r in ok if r.ttft_s is not None],
            "tpot_ms": [r.tpot_s * 1000 for r in ok if r.tpot_s is not None],
            "itl_ms": [g * 1000 for r in ok for g in r.itl_s],
            "e2e_ms": [r.e2e_s * 1000 for r in ok],
            "ok": len(ok), "errors": len(results) - len(ok),
            "first_error": next((r.error for r in results if not r.ok), "")}
