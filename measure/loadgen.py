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
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast

import aiohttp
import numpy as np

from fleetfacts.errors import InputError
from fleetfacts.requestlog import HASH_COLUMN, read_log
from measure.redact import safe

log = logging.getLogger(__name__)

# Bodies of failed responses are cut to this many characters in error messages.
MAX_ERROR_BODY = 200
# A request's whole error message is cut to this many characters.
MAX_ERROR = 300


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: its lengths and, in open-loop loads, when (s after the start)."""

    input_len: int
    output_len: int
    send_at_s: float | None = None
    blocks: tuple[int, ...] | None = None   # the prompt's block ids (equal ids = equal tokens), from a log's hash_ids


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
    block_size: int = 512                   # tokens per block id of RequestSpec.blocks


@dataclass(frozen=True)
class RequestResult:
    ok: bool
    start_s: float                          # perf_counter at send
    end_s: float
    ttft_s: float | None = None
    itl_s: tuple[float, ...] = ()
    output_tokens: int = 0
    prompt_tokens: int | None = None
    cached_tokens: int | None = None        # prompt tokens the server's prefix cache served (usage, when sent)
    error: str = ""
    scheduled_s: float | None = None        # open loop: when the schedule said to send it (s from the load's start)

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

def load_request_log(path: str | Path, route: str | None = None,
                     block_size: int | None = None) -> tuple[RequestSpec, ...]:
    """A request log's requests (every format fleetfacts.requestlog reads, as the planner does), sorted by time,
    times from the first arrival.  route: keep that route's rows when the log has a route column that names it.
    A request with no output tokens is sent for one (a completion has at least one).  block_size: tokens per
    hash id, to carry the log's prefix structure (hash_ids, or sessions) as each request's `blocks`."""
    requests = read_log(path, route=route, block_size=block_size).requests
    if route is not None and (requests["route"] == route).any():
        requests = requests[requests["route"] == route]
    if requests.empty:
        raise InputError(f"{path}: no requests")
    t0 = float(requests["t_s"].iloc[0])
    blocks = (requests[HASH_COLUMN] if HASH_COLUMN in requests.columns
              else [None] * len(requests))
    return tuple(RequestSpec(max(1, int(i)), max(1, int(o)), float(t) - t0,
                             None if b is None else tuple(int(x) for x in b))
                 for t, i, o, b in zip(requests["t_s"], requests["input_len"], requests["output_len"], blocks,
                                       strict=True))


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


# Seed word of the tokens a prompt has past its block ids (block ids seed with their own value, below 2**63).
UNCOVERED = 2**63


def block_prompt(blocks: Sequence[int], length: int, block_size: int, vocab_size: int, salt: int,
                 memo: dict[int, np.ndarray], index: int = 0) -> list[int]:
    """A token-id prompt of exactly `length` tokens that shares tokens wherever a log says it does: block id h is
    always the same `block_size` random tokens (seeded by salt and h), the prompt is its blocks' tokens in order,
    cut to length (a partial last block is the first tokens of its block).  memo: block tokens already drawn;
    index: the request's position (tokens past its ids are its own)."""
    parts = []
    for h in blocks:
        if h not in memo:
            memo[h] = np.random.default_rng([salt, h & (2**63 - 1)]).integers(0, vocab_size, size=block_size)
        parts.append(memo[h])
    ids = np.concatenate(parts)[:length] if parts else np.empty(0, dtype=np.int64)
    if ids.size < length:  # a log whose ids do not cover the prompt: the rest is new tokens
        extra = np.random.default_rng([salt, UNCOVERED, index]).integers(0, vocab_size, size=length - ids.size)
        ids = np.concatenate([ids, extra])
    return ids.tolist()


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
    """True when an SSE chunk carries generated text (a role-only chat opener or a bare finish does not);
    TypeError when `choices` is not a list of objects."""
    choices = payload.get("choices") or []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise TypeError(f"choices: expected a list of objects, got {choices!r}"[:MAX_ERROR_BODY])
    for choice in choices:
        delta = choice.get("delta") or {}
        if chat and not isinstance(delta, dict):
            raise TypeError(f"delta: expected an object, got {delta!r}"[:MAX_ERROR_BODY])
        text = delta.get("content") if chat else choice.get("text")
        if text:
            return True
        if text == "" and choice.get("finish_reason") is None and not (chat and "role" in delta):
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
        self.finished = False  # a choice carried a finish_reason: the stream said it was complete
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
        try:
            self._event(json.loads(data), now)
        except (ValueError, TypeError, AttributeError) as err:  # not JSON, not UTF-8, not the expected shape
            self.error = f"malformed stream event ({type(err).__name__}: {err}): {data[:MAX_ERROR_BODY]!r}"
            self.done = True

    def _event(self, payload: object, now: float) -> None:
        if not isinstance(payload, dict):
            raise TypeError(f"expected a JSON object, got {type(payload).__name__}")
        if payload.get("error"):
            error = payload["error"]
            self.error = str(error.get("message", error) if isinstance(error, dict) else error)
            self.done = True
            return
        if payload.get("usage"):
            self.usage = _usage(payload["usage"])
        choices = payload.get("choices")
        if isinstance(choices, list) and any(isinstance(c, dict) and c.get("finish_reason") for c in choices):
            self.finished = True
        if _token_event(payload, self.chat):
            self.times.append(now)


def _usage(usage: object) -> dict:
    """The stream's usage object with whole-number token counts (prompt, completion, and the prefix cache's
    `prompt_tokens_details.cached_tokens` where the server sends it); TypeError/ValueError otherwise."""
    if not isinstance(usage, dict):
        raise TypeError(f"usage: expected a JSON object, got {type(usage).__name__}")
    out = {}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    for name, value in (("prompt_tokens", usage.get("prompt_tokens")),
                        ("completion_tokens", usage.get("completion_tokens")), ("cached_tokens", cached)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"usage.{name}: expected a whole number >= 0, got {value!r}")
            out[name] = value
    return out


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
                                     error=f"HTTP {response.status}: {safe(' '.join(text.split()))[:MAX_ERROR_BODY]}")
            async for chunk in response.content.iter_any():
                reader.feed(chunk, time.perf_counter())
                if reader.done:
                    break
            reader.close(time.perf_counter())
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as err:
        return RequestResult(False, start, time.perf_counter(), error=safe(f"{type(err).__name__}: {err}")[:MAX_ERROR])
    end = time.perf_counter()
    if reader.error:
        return RequestResult(False, start, end, error=safe(f"error in stream: {reader.error}")[:MAX_ERROR])
    if not (reader.done or reader.finished):
        return RequestResult(False, start, end, error=f"stream cut after {len(reader.times)} token event(s): "
                                                      "no finish_reason and no [DONE] (connection dropped?)")
    return _result(start, end, reader.times, reader.usage)


def _result(start: float, end: float, times: list[float], usage: dict) -> RequestResult:
    if not times:
        return RequestResult(False, start, end, error="stream ended without any token")
    n_out = int(usage.get("completion_tokens") or len(times))
    gaps = tuple(b - a for a, b in zip(times, times[1:], strict=False))
    return RequestResult(True, start, end, ttft_s=times[0] - start, itl_s=gaps, output_tokens=n_out,
                         prompt_tokens=usage.get("prompt_tokens"), cached_tokens=usage.get("cached_tokens"))


# ------------------------------------------------------------------ loads

def _client(spec: LoadSpec, width: int) -> aiohttp.ClientSession:
    """aiohttp: its C HTTP parser costs a fraction of httpx's per streamed chunk, which matters at
    10k+ tokens/s (benchmarks/loadgen_capacity.py); vLLM's own `bench serve` client uses it too."""
    headers = {"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else {}
    connector = aiohttp.TCPConnector(limit=max(width, 1) + 4)
    return aiohttp.ClientSession(headers=headers, connector=connector,
                                 timeout=aiohttp.ClientTimeout(total=spec.request_timeout_s))


def _bodies(spec: LoadSpec) -> list[dict]:
    """Every request's body; a request with `blocks` gets a prompt that shares tokens as its blocks say
    (token-id prompts only: words would not tokenise into the same blocks)."""
    rng, memo = np.random.default_rng(spec.seed), dict[int, np.ndarray]()
    if spec.prompt_format != "tokens" and any(r.blocks is not None for r in spec.requests):
        raise InputError("a log with prefix structure (hash_ids or sessions) replays with --prompt-format tokens "
                         "only: words would not share the same tokens")
    return [request_body(spec, make_prompt(i, r.input_len, spec.prompt_format, spec.vocab_size, rng)
                         if r.blocks is None else
                         block_prompt(r.blocks, max(1, r.input_len), spec.block_size, spec.vocab_size, spec.seed, memo, i),
                         r.output_len)
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
        tasks = (_open_loop_tasks(client, spec, bodies, start, results) if open_loop
                 else _closed_loop_tasks(client, spec, bodies, width, results))
        done, pending = await asyncio.wait(tasks, timeout=spec.max_duration_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    end = max((r.end_s for r in results), default=time.perf_counter())
    missing = len(bodies) - len(results)
    if missing and not pending:  # no time limit cut them: say why they never ended, as failures
        results += [_never_completed(done, start, end)] * missing
        missing = 0
    return LoadResult(results=tuple(results), duration_s=max(end - start, 1e-9), cancelled=missing)


def _open_loop_tasks(client, spec: LoadSpec, bodies: list[dict], start: float,
                     results: list[RequestResult]) -> list[asyncio.Task]:
    """One task per request, sent at start + its send_at_s whatever the others do."""
    return [asyncio.create_task(_send_at(client, spec, b, start, cast(float, r.send_at_s), results))
            for b, r in zip(bodies, spec.requests, strict=True)]


def _closed_loop_tasks(client, spec: LoadSpec, bodies: list[dict], width: int,
                       results: list[RequestResult]) -> list[asyncio.Task]:
    """`width` workers (at most one per request) taking the bodies from one queue, in order."""
    queue: asyncio.Queue = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    return [asyncio.create_task(_worker(client, spec, queue, results)) for _ in range(min(width, len(bodies)))]


def _never_completed(done: set[asyncio.Task], start: float, end: float) -> RequestResult:
    """The failure of a request no task finished, naming what killed a task when one died."""
    died = next((t.exception() for t in done if not t.cancelled() and t.exception()), None)
    reason = safe(f"request never completed ({type(died).__name__}: {died})" if died else "request never completed")
    return RequestResult(False, start, end, error=reason[:MAX_ERROR])


async def _send_at(client, spec: LoadSpec, body: dict, start: float, send_at_s: float, results: list) -> None:
    delay = start + send_at_s - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)
    results.append(replace(await _one_request(client, spec, body), scheduled_s=send_at_s))


async def _worker(client, spec: LoadSpec, queue: asyncio.Queue, results: list) -> None:
    """Closed loop: send the next body as soon as this worker's previous request ended."""
    while not queue.empty():
        body = queue.get_nowait()
        results.append(await _one_request(client, spec, body))


async def _one_request(client, spec: LoadSpec, body: dict) -> RequestResult:
    """stream_request, where anything it did not foresee becomes a failed result with its reason: a task
    that died would take its worker's remaining requests with it, unsent and uncounted."""
    start = time.perf_counter()
    try:
        return await stream_request(client, spec, body)
    except Exception as err:  # noqa: BLE001 - counted as this request's failure, never lost
        log.debug("request failed unexpectedly", exc_info=True)
        return RequestResult(False, start, time.perf_counter(), error=safe(f"{type(err).__name__}: {err}")[:MAX_ERROR])


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
