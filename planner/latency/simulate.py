"""Discrete-event simulation of continuous-batching replicas behind a router.

One replica (vLLM / TensorRT-LLM in-flight batching) runs engine iterations
back to back.  An iteration decodes one token for each of the `b` running
sequences (mean context c) and prefills up to `budget - b` prompt tokens of
admitted requests (chunked prefill, FIFO); it takes

    curve.step_time_s(b, c, prefill_tokens, prefill_context)   seconds

plus the curve's per-request overhead for each request whose prefill ends in
it.  A request's first token is emitted at the end of the iteration that
completes its prefill, then one token per iteration; TTFT, TPOT =
(e2e - TTFT) / (output - 1) and e2e are measured from its arrival.

Admission (FIFO, at the start of an iteration): a request is admitted when
fewer than max_num_seqs requests are running and its prompt + output tokens
fit in the KV-cache tokens not yet reserved.  Reserving the whole output up
front (the simulator knows each request's output length) means the cache can
never overflow, so there is no preemption; real engines allocate as they go
and preempt on overflow, which planner.engine.curves counts the same way
(KV_ADMISSION_OUTPUT_SHARE = 1).  A request that could never fit is rejected.

Speed: no per-token events.  Between events (an arrival, a completion, a
change of batch) every iteration decodes the same `b` sequences while the
context grows by one token per sequence, so the replica jumps over all those
iterations at once: n iterations take n * step_time(b, mean context over the
jump) -- exact when step time is affine in context, as the fitted model is.
The step model is probed from the curve once (`StepModel`) and falls back to
calling step_time_s when the curve is not affine.  A curve served through an
OpenAI server (its `front_end`, planner.engine.frontend) prefills at the front end's
prefill_scale, and each request's first token then waits for the front end,
loaded by what its replica streamed just before it arrived.  Routers: round robin
(replicas simulated independently), join-shortest-queue (least outstanding
requests; replicas advanced lazily, only when their load may have changed) and
prefix affinity (below).

Prefix cache (only when the requests come with their prompts' block ids,
planner.traffic.prefixes.BlockIds; without them none of this runs): each
replica keeps an LRU of chained block keys holding kv_cache_tokens / block_size
blocks, each with the tokens cached of it (a partial hash block holds its whole
engine blocks: planner.traffic.prefixes).  It keeps them by segments, runs of
blocks every prompt holding the first holds whole (SegmentedPrompt): such blocks
are always referenced together, tail first, so they sit side by side in the LRU
and one entry per segment, evicted from its tail, is the same LRU at a fraction
of the work.  A request admitted on a replica looks
up the leading run of its tokens in that cache (whole engine blocks, at most
floor((n - 1) / 16) of them, as vLLM); it then
prefills only its other tokens, while its attention still reads the whole
prompt (the step's prefill context is the full prompt).  Its blocks enter the
cache when its prefill completes (vLLM commits them chunk by chunk as they are
scheduled: completion is a first approximation that misses hits between
siblings prefilling at the same time).  A block that running requests hold
is held once: a request whose cached prefix reaches blocks another running
request holds reserves KV only for the rest of its prompt and its output (vLLM
reference-counts shared blocks), and a block's KV is freed when its last holder
ends (`_BlockCache.reserve` / `release`).  A host tier (HostTier) is written
through: every block the GPU caches is stored in the host LRU too, as vLLM's
OffloadingConnector stores computed blocks; a request whose prefix continues
there waits for it to come back (loaded asynchronously, as the connector does:
the replica's iterations go on) before it prefills the rest.  Not modelled: running requests'
blocks are not pinned in the LRU (it may evict them; each hit refreshes them),
and the LRU is not shrunk by the KV running requests hold.  Prefix affinity sends
a request to the replica whose cache holds the longest prefix of it (ties: the
least outstanding), unless that replica has more than AFFINITY_LOAD_CAP
outstanding requests beyond the least loaded one's: then, as without a match,
to the least loaded (llm-d's and SGLang's cache-aware routers, with their
real caches read exactly: a "precise" router).
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from array import array
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, is_dataclass, replace
from functools import lru_cache
from heapq import heappop, heappush

import numpy as np

from fleetfacts.errors import InputError
from fleetfacts.specs import windowed_attention_len, windowed_tokens
from planner.engine.curves import CurveLike
from planner.engine.frontend import FrontEnd, stream_load
from planner.traffic.prefixes import BlockIds, SegmentedPrompt, segmented_prompts
from planner.traffic.routes import Slo
from planner.traffic.workload import Numbers

log = logging.getLogger(__name__)

# assumption: vLLM's chunked-prefill token budget per step when the curve does not record one.
DEFAULT_PREFILL_BUDGET = 8192
ROUTERS = ("jsq", "round-robin", "prefix-affinity")
# Prefix affinity yields to the least loaded replica beyond this many extra outstanding requests: SGLang's router's
# balance_abs_threshold default (sgl-router src/policies/mod.rs, /work/shared/review/long-and-repeated.md section 2).
AFFINITY_LOAD_CAP = 32
# Relative tolerance when checking that the curve's step time is affine in context and prefill tokens.
AFFINE_RTOL = 1e-9
# Probe points for that check: batch sizes, contexts (tokens), prefill tokens, prompt lengths.
PROBE_BATCHES = (1, 2, 7, 33, 200, 700)
PROBE_CONTEXTS = (0.0, 137.0, 4096.0)
PROBE_PREFILLS = ((0.0, 0.0), (512.0, 700.0), (8192.0, 3000.0))
# Probing reference sizes (any positive numbers work for an affine model).
PROBE_CONTEXT = 1000.0
PROBE_PREFILL = 1000.0


# ---------------------------------------------------------------- step model

class _PerBatch(dict):
    """A lazily filled table: value(b) computed once per batch size."""

    def __init__(self, fn: Callable[[int], float]) -> None:
        super().__init__()
        self._fn = fn

    def __missing__(self, b: int) -> float:
        value = self[b] = self._fn(b)
        return value


StepFn = Callable[[int, float, float, float], float]
StepTimeFn = Callable[..., float]  # a curve's step_time_s(batch, context, prefill_tokens=0, prefill_context=0)
JumpFn = Callable[[int, float, int], float]
ExpertFn = Callable[[float], float]  # an MoE curve's expert_read_s(tokens in the step)
StepsToFn = Callable[[int, float, float], int]


@dataclass(frozen=True, eq=False)
class StepModel:
    """A curve's iteration time as the simulator evaluates it.

    step(b, ctx_total, p, p_weighted): b decoding sequences whose contexts sum to
    ctx_total tokens, p prefill tokens whose prompt lengths, weighted by tokens,
    sum to p_weighted.  jump(b, ctx_total, n): n pure-decode iterations
    (context + b per iteration).  steps_to(b, ctx_total, dt): the fewest such
    iterations lasting >= dt seconds.  affine: the fast closed forms are exact.
    async_scheduling: the engine schedules each iteration while the one before
    it runs (vLLM's default since 0.14), so a request that arrives during an
    iteration joins the one after next, not the next.
    """

    step: StepFn
    jump: JumpFn
    steps_to: StepsToFn
    overhead_s: float
    max_num_seqs: int
    kv_cache_tokens: int
    prefill_budget: int
    affine: bool
    async_scheduling: bool = False
    window: tuple[int, float] = (0, 0.0)  # (tokens, share of layers) of a model's windowed layers (Caps.window)


@lru_cache(maxsize=64)
def step_model(curve: CurveLike) -> StepModel:
    """Probe `curve` once: affine closed forms when they reproduce its step time, else direct calls.

    A curve served through an OpenAI server (its `front_end`) prefills at the front end's
    `prefill_scale` times the curve's prefill cost (planner.engine.frontend).
    """
    budget = int(getattr(curve, "max_num_batched_tokens", 0) or DEFAULT_PREFILL_BUDGET)
    overhead = float(getattr(curve, "request_overhead_s", 0.0) or 0.0)
    caps = (int(curve.max_num_seqs), int(curve.kv_cache_tokens), budget)
    lag = bool(getattr(curve, "async_scheduling", False))
    full, window = _without_window(curve)
    experts = _expert_read(curve)
    f = _served_step_time(full, experts)
    affine = _affine_parts(f)
    if affine is None:
        log.info("step time of %s is not affine in context: simulating with direct calls (slower)",
                 getattr(curve, "key", curve))
        return StepModel(*_direct_closures(_with_experts(f, experts), window), overhead, *caps, affine=False,
                         async_scheduling=lag, window=window)
    closures = _windowed_affine_closures(*affine, experts, window) if window[1] else _affine_closures(*affine, experts)
    return StepModel(*closures, overhead, *caps, affine=True, async_scheduling=lag, window=window)


def _without_window(curve: CurveLike) -> tuple[CurveLike, tuple[int, float]]:
    """(the curve with its layers counted as full attention, its window (tokens, share of layers)): the simulator
    applies the window itself, the KV read to the batch's summed context (_windowed) and attention to each prompt
    (_Run.attn), so the step stays affine in what it is given."""
    caps = getattr(curve, "caps", None)
    share = float(getattr(caps, "window_share", 0.0) or 0.0)
    if not share or not is_dataclass(curve):
        return curve, (0, 0.0)
    return replace(curve, caps=replace(caps, window=0, window_share=0.0)), (int(caps.window), share)


def _windowed(b: int, ctx: float, window: int, share: float) -> float:
    """The KV tokens b sequences of contexts summing to ctx read when a `share` of the layers read at most `window`
    tokens: windowed_tokens of their mean context, times b."""
    return b * windowed_tokens(ctx / b, window, share) if b else ctx


def _expert_read(curve: CurveLike) -> ExpertFn | None:
    """An MoE curve's expert-read seconds per step of n tokens (planner.engine.curves), else None: that term is
    not affine in the step's tokens, so the closed forms add it apart."""
    fn = getattr(curve, "expert_read_s", None)
    return fn if callable(fn) and float(fn(1.0)) > 0.0 else None


def _with_experts(f: StepTimeFn, experts: ExpertFn | None) -> StepTimeFn:
    if experts is None:
        return f
    return lambda b, c, p=0.0, pc=0.0: float(f(b, c, p, pc)) + experts(b + p)


def _served_step_time(curve: CurveLike, experts: ExpertFn | None = None) -> StepTimeFn:
    """The curve's step time less its expert reads (`experts`), its prefill part scaled by the server's
    prefill_scale when it has one."""
    f: StepTimeFn = curve.step_time_s
    if experts is not None:
        whole = f
        f = lambda b, c, p=0.0, pc=0.0: float(whole(b, c, p, pc)) - experts(b + p)  # noqa: E731
    front_end = getattr(curve, "front_end", None)
    scale = float(front_end.prefill_scale) if front_end is not None else 1.0
    if scale == 1.0:
        return f

    def served(b: float, c: float, p: float = 0.0, pc: float = 0.0) -> float:
        decode = float(f(b, c, 0.0, 0.0))
        return decode + scale * (float(f(b, c, p, pc)) - decode)

    return served


def _affine_parts(f: StepTimeFn) -> tuple[_PerBatch, _PerBatch, float, float] | None:
    """(base[b], per-context-token[b], q, r) if step = base + k_b*ctx_total + q*p + r*p*I, else None."""
    base = _PerBatch(lambda b: float(f(b, 0.0, 0.0, 0.0)))
    per_ctx = _PerBatch(lambda b: (float(f(b, PROBE_CONTEXT, 0.0, 0.0)) - base[b]) / PROBE_CONTEXT / b if b else 0.0)
    q = (float(f(0, 0.0, PROBE_PREFILL, 0.0)) - base[0]) / PROBE_PREFILL
    r = (float(f(0, 0.0, PROBE_PREFILL, PROBE_CONTEXT)) - base[0] - q * PROBE_PREFILL) / PROBE_PREFILL / PROBE_CONTEXT
    for b in (0, *PROBE_BATCHES):
        for c in PROBE_CONTEXTS:
            for p, pc in PROBE_PREFILLS:
                actual = float(f(b, c, p, pc))
                model = base[b] + per_ctx[b] * b * c + q * p + r * p * pc
                if not math.isclose(actual, model, rel_tol=AFFINE_RTOL, abs_tol=1e-15):
                    return None
    return base, per_ctx, q, r


def _affine_closures(base: _PerBatch, per_ctx: _PerBatch, q: float, r: float, experts: ExpertFn | None = None
                     ) -> tuple[StepFn, JumpFn, StepsToFn]:
    if experts is not None:  # a pure-decode step of b sequences reads experts(b): part of its base
        affine_base, base = base, _PerBatch(lambda b: affine_base[b] + experts(b))

        def step(b: int, ctx: float, p: float, pw: float) -> float:
            extra = experts(b + p) - experts(b) if p else 0.0
            return base[b] + per_ctx[b] * ctx + q * p + r * pw + extra
    else:
        def step(b: int, ctx: float, p: float, pw: float) -> float:
            return base[b] + per_ctx[b] * ctx + q * p + r * pw

    def jump(b: int, ctx: float, n: int) -> float:
        return n * (base[b] + per_ctx[b] * (ctx + 0.5 * b * (n - 1)))

    def steps_to(b: int, ctx: float, dt: float) -> int:
        # T(n) = n*s0 + h*n*(n-1) with s0 = the next step's time, h = k*b/2: the smallest n with T(n) >= dt.
        k = per_ctx[b]
        s0 = base[b] + k * ctx
        h = 0.5 * k * b
        if h > 0:
            lin = s0 - h
            n = max(1, math.ceil((math.sqrt(lin * lin + 4.0 * h * dt) - lin) / (2.0 * h)))
        else:
            n = max(1, math.ceil(dt / s0))
        while n > 1 and (n - 1) * (s0 + h * (n - 2)) >= dt:  # rounding guards
            n -= 1
        while n * (s0 + h * (n - 1)) < dt:
            n += 1
        return n

    return step, jump, steps_to


def _fewest_steps(jump: JumpFn, b: int, ctx: float, dt: float) -> int:
    """The fewest decode iterations jump(b, ctx, n) puts at >= dt seconds (doubling, then bisection)."""
    low, high = 0, 1  # jump(low) < dt <= jump(high)
    while jump(b, ctx, high) < dt:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if jump(b, ctx, mid) < dt else (low, mid)
    return high


def _windowed_affine_closures(base: _PerBatch, per_ctx: _PerBatch, q: float, r: float, experts: ExpertFn | None,
                              window: tuple[int, float]) -> tuple[StepFn, JumpFn, StepsToFn]:
    """_affine_closures where a share of the layers reads at most a window: the KV-read term is piecewise linear in
    the context (its slope drops by the share once the batch's contexts pass b x window), so a stretch of decode
    steps is summed on each side of that point; `pw` arrives with each prompt's attention already windowed."""
    size, share = window
    step0, _, _ = _affine_closures(base, per_ctx, q, r, experts)
    decode_base = _PerBatch(lambda b: base[b] + (experts(b) if experts is not None else 0.0))

    def step(b: int, ctx: float, p: float, pw: float) -> float:
        return step0(b, _windowed(b, ctx, size, share), p, pw)

    def jump(b: int, ctx: float, n: int) -> float:
        k = per_ctx[b]
        edge = b * size  # summed context where every sequence's passes the window
        inside = n if ctx + b * (n - 1) <= edge else max(0, min(n, math.floor((edge - ctx) / b) + 1))
        total = inside * ctx + b * inside * (inside - 1) / 2  # contexts of the steps before the edge
        rest = n - inside
        if rest:
            start = ctx + b * inside
            total += (1.0 - share) * (rest * start + b * rest * (rest - 1) / 2) + rest * share * edge
        return n * decode_base[b] + k * total

    def steps_to(b: int, ctx: float, dt: float) -> int:
        return _fewest_steps(jump, b, ctx, dt)

    return step, jump, steps_to


def _direct_closures(f: StepTimeFn, window: tuple[int, float] = (0, 0.0)) -> tuple[StepFn, JumpFn, StepsToFn]:
    size, share = window

    def step(b: int, ctx: float, p: float, pw: float) -> float:
        ctx = _windowed(b, ctx, size, share) if share else ctx
        return float(f(b, ctx / b if b else 0.0, p, pw / p if p else 0.0))

    def jump(b: int, ctx: float, n: int) -> float:
        mid = ctx + 0.5 * b * (n - 1)  # the stretch's mean summed context
        return n * float(f(b, (_windowed(b, mid, size, share) if share else mid) / b, 0.0, 0.0))

    def steps_to(b: int, ctx: float, dt: float) -> int:
        return _fewest_steps(jump, b, ctx, dt)

    return step, jump, steps_to


# ---------------------------------------------------------------- replica state

@dataclass(frozen=True)
class HostTier:
    """A host-memory KV tier per replica (vLLM's CPU offloading, LMCache): `tokens` of KV kept in host memory
    behind the GPU's prefix cache, brought back at `load_s_per_token` seconds a token (KV bytes over the
    host-to-GPU rate; planner.engine.transfer_physics.HOST_LOAD_GB_PER_S, measured once on an H100)."""

    tokens: int
    load_s_per_token: float


class _Either(Mapping[int, int]):
    """Tokens cached of a key in either tier (the more of the two): what a prompt can reuse from both."""

    __slots__ = ("gpu", "host")

    def __init__(self, gpu: Mapping[int, int], host: Mapping[int, int]) -> None:
        self.gpu, self.host = gpu, host

    def __getitem__(self, key: int) -> int:
        value = max(self.gpu.get(key, 0), self.host.get(key, 0))
        if not value:
            raise KeyError(key)
        return value

    def get(self, key: int, default: int = 0) -> int:  # type: ignore[override]  # the hot path: no exception
        return max(self.gpu.get(key, default), self.host.get(key, default))

    def __iter__(self) -> Iterator[int]:
        return iter(set(self.gpu) | set(self.host))

    def __len__(self) -> int:
        return len(set(self.gpu) | set(self.host))


def _leading(prompt: SegmentedPrompt, cached: Mapping[int, int]) -> tuple[int, int]:
    """(tokens of the prompt's leading run found in `cached`, hash blocks it reaches): through each segment whose
    key holds at least the prompt's tokens of it, into the first that holds fewer (a segment holds its leading
    blocks); at most prompt.cap (planner.traffic.prefixes.leading_tokens, segment by segment)."""
    hit = 0
    for key, size in zip(prompt.keys, prompt.sizes, strict=True):
        take = cached.get(key, 0)
        if take < size:
            hit += take
            break
        hit += size
    hit = min(hit, prompt.cap)
    return hit, -(-hit // prompt.block)  # whole blocks, then at most one in part


def _reached(prompt: SegmentedPrompt, blocks: int) -> list[tuple[int, int]]:
    """(key, tokens) of the prompt's segments within its first `blocks` hash blocks, the last one in part where
    the reach ends inside it; segments the engine caches nothing of are left out."""
    out, block = [], prompt.block
    for key, size, start in zip(prompt.keys, prompt.sizes, prompt.starts, strict=True):
        if start >= blocks:
            break
        size = min(size, (blocks - start) * block)
        if size:
            out.append((key, size))
    return out


class _Tier:
    """One LRU of segment keys (least recently used first), each with the tokens cached of its leading blocks, at
    most `capacity` hash blocks in all (`count`): evicting takes the oldest segment's blocks from its tail, as an
    LRU of blocks referenced tail first does."""

    __slots__ = ("lru", "count", "capacity", "block")

    def __init__(self, capacity: int, block: int) -> None:
        self.lru: OrderedDict[int, int] = OrderedDict()
        self.count, self.capacity, self.block = 0, capacity, block

    def remember(self, tail_first: Iterable[tuple[int, int]]) -> None:
        """Reference the (key, tokens) segments, given tail first, each holding the most of its tokens seen so far
        (none of a segment of 0 tokens); then evict."""
        lru, block, count = self.lru, self.block, self.count
        for key, tokens in tail_first:
            if not tokens:
                continue
            held = lru.get(key, 0)
            if held < tokens:
                lru[key] = tokens
                count += -(-tokens // block) + (held // -block)
            lru.move_to_end(key)
        capacity = self.capacity
        while count > capacity:
            key, tokens = next(iter(lru.items()))
            blocks, excess = -(-tokens // block), count - capacity
            if blocks <= excess:
                lru.popitem(last=False)
                count -= blocks
            else:
                lru[key] = (blocks - excess) * block  # its leading blocks stay (all whole), where it was
                count -= excess
        self.count = count

    def copy(self) -> _Tier:
        twin = _Tier(self.capacity, self.block)
        twin.lru, twin.count = OrderedDict(self.lru), self.count
        return twin


class _BlockCache:
    """One replica's prefix cache: an LRU of the prompts' segments (planner.traffic.prefixes.SegmentedPrompt) of
    at most `capacity` hash blocks; with a host tier, every block is also written to a host LRU of `host_capacity`
    blocks as it is cached (vLLM's OffloadingConnector stores each computed block: write-through, so the host
    holds what the GPU holds, and more only where it is larger)."""

    __slots__ = ("gpu", "host", "held", "holds")

    def __init__(self, capacity: int, host_capacity: int = 0, block: int = 1) -> None:
        self.gpu = _Tier(capacity, block)
        self.host = _Tier(host_capacity, block) if host_capacity else None
        self.held: dict[int, list[int]] = {}  # key -> [running requests holding it, its KV tokens]
        self.holds: dict[int, tuple[list[int], int]] = {}  # running request -> (keys it holds, its other KV tokens)

    def kv_need(self, prompt: SegmentedPrompt, reached: int, total: int) -> tuple[int, list[tuple[int, int]], int]:
        """(KV tokens a request of `total` prompt + output tokens reserves, the (key, tokens) segments it will hold,
        its other tokens): its prompt's segments within its cached prefix (the first `reached` blocks) that running
        requests hold are shared; the rest are its own (a segment a sibling still prefills is a copy, as in vLLM).
        A held segment the reach ends inside is shared up to the reach, the rest counted as a copy until it ends."""
        held, blocks, block = self.held, [], prompt.block
        private, new = total, 0
        for key, size, start in zip(prompt.keys, prompt.sizes, prompt.starts, strict=True):
            if not size:
                break
            entry = held.get(key)
            if entry is None:
                blocks.append((key, size))
                new += size
                private -= size
            elif start < reached:
                blocks.append((key, size))
                private -= min(size, entry[1], (reached - start) * block)
        private = max(private, 0)  # a model's windowed layers may hold less than its prompt (_Run.held)
        return private + new, blocks, private

    def reserve(self, i: int, blocks: list[tuple[int, int]], private: int) -> None:
        """Request i admitted holding `blocks` and `private` tokens of its own (both from kv_need)."""
        held = self.held
        for key, own in blocks:
            entry = held.get(key)
            if entry is None:
                held[key] = [1, own]
            else:
                entry[0] += 1
        self.holds[i] = ([key for key, _ in blocks], private)

    def release(self, i: int) -> int:
        """Request i ended: the KV tokens freed (its own, and the segments it was the last to hold)."""
        keys, freed = self.holds.pop(i)
        held = self.held
        for key in keys:
            entry = held[key]
            entry[0] -= 1
            if not entry[0]:
                freed += entry[1]
                del held[key]
        return freed

    def match(self, prompt: SegmentedPrompt) -> tuple[int, int]:
        """(tokens of the prompt's leading run held on the GPU, blocks that run reaches)."""
        return _leading(prompt, self.gpu.lru)

    def match_both(self, prompt: SegmentedPrompt) -> tuple[int, int, int]:
        """(tokens of the prompt's leading run on the GPU, more tokens it finds in the host tier, blocks reached)."""
        gpu, reached = _leading(prompt, self.gpu.lru)
        if self.host is None:
            return gpu, 0, reached
        both, reached = _leading(prompt, _Either(self.gpu.lru, self.host.lru))
        return gpu, both - gpu, reached

    def touch(self, prompt: SegmentedPrompt, blocks: int | None = None) -> None:
        """Reference the prompt's first `blocks` hash blocks (all by default) tail first (a chain's head is evicted
        last) in the GPU cache and the host tier (if any), each evicting beyond its capacity."""
        if blocks is None:
            self.gpu.remember(zip(reversed(prompt.keys), reversed(prompt.sizes), strict=True))
            if self.host is not None:
                self.host.remember(zip(reversed(prompt.keys), reversed(prompt.sizes), strict=True))
            return
        segments = _reached(prompt, blocks)
        self.gpu.remember(reversed(segments))
        if self.host is not None:
            self.host.remember(reversed(segments))

    def copy(self) -> _BlockCache:
        twin = _BlockCache.__new__(_BlockCache)
        twin.gpu, twin.host = self.gpu.copy(), None if self.host is None else self.host.copy()
        twin.held = {key: list(entry) for key, entry in self.held.items()}
        twin.holds = dict(self.holds)
        return twin


class _Replica:
    """Mutable state of one replica (slots: the hot loop reads and writes these)."""

    __slots__ = ("index", "queue", "qhead", "clock", "prefill", "head_done", "heap", "steps", "b", "ctx", "kv",
                 "running", "outstanding", "wake", "busy_s", "started", "cache", "loading")

    def __init__(self, index: int = 0, cache: _BlockCache | None = None) -> None:
        self.index = index           # its place in the fleet
        self.queue: list[int] = []   # ids routed here, in arrival order
        self.qhead = 0               # first id not yet admitted
        self.clock = 0.0             # when the next iteration can start, s
        self.prefill: deque[int] = deque()  # admitted ids with prompt tokens left to prefill
        self.head_done = 0           # prompt tokens of prefill[0] already prefilled
        self.heap: list[tuple[int, int]] = []  # (decode iteration that ends it, id)
        self.steps = 0               # decode iterations so far (the heap's clock)
        self.b = 0                   # sequences decoding
        self.ctx = 0                 # their contexts (prompt + generated), summed, tokens
        self.kv = 0                  # KV-cache tokens reserved by admitted requests
        self.running = 0             # admitted, not finished
        self.outstanding = 0         # routed here, not finished (the JSQ load)
        self.wake = 0.0              # nothing visible changes before this time unless a request is routed here
        self.busy_s = 0.0            # time spent in iterations, s
        self.started = 0.0           # when the last iteration started (async scheduling decided the next then), s
        self.cache = cache           # its prefix cache (None: the requests carry no prefix structure)
        self.loading: list[tuple[float, int]] = []  # (when its host-tier hit is back, id): admitted, not yet prefilling

    def copy(self) -> _Replica:
        """An independent copy (its lists too)."""
        twin = _Replica()
        for name in self.__slots__:
            setattr(twin, name, getattr(self, name))
        twin.queue, twin.prefill, twin.heap = list(self.queue), deque(self.prefill), list(self.heap)
        twin.loading = list(self.loading)
        twin.cache = None if self.cache is None else self.cache.copy()
        return twin


@dataclass(eq=False)
class _Run:
    """Inputs and per-request outputs shared by the replicas of one simulation."""

    arr: list[float]
    inp: list[int]
    out: list[int]
    model: StepModel
    blocks: BlockIds | None = None
    # Raw doubles, not lists of floats: a third of the memory on a million requests, as fast to write.
    ttft: array[float] = field(init=False)
    e2e: array[float] = field(init=False)
    done: list[int] = field(init=False)
    todo: list[int] = field(init=False)  # prompt tokens to prefill: the prompt less its cached prefix
    cached: list[int] = field(init=False)  # prompt tokens found in the prefix cache (with `blocks`)
    prompts: list[SegmentedPrompt] = field(init=False)  # each prompt's segments of chained blocks (with `blocks`)
    host: HostTier | None = None
    load_s: list[float] = field(init=False)  # seconds to bring a request's host-tier hit back (with `host`)
    # KV tokens each request holds where the model's windowed layers hold less than its context (else None: the
    # prompt + output)
    held: list[int] | None = field(init=False)
    attn: list[float] | list[int] = field(init=False)  # each prompt's attention length (windowed_attention_len)

    def __post_init__(self) -> None:
        n = len(self.arr)
        self.ttft = array("d", [math.nan]) * n
        self.e2e = array("d", [math.nan]) * n
        self.done = [0] * n
        self.todo = self.inp if self.blocks is None else list(self.inp)
        self.cached = [0] * n
        self.prompts = [] if self.blocks is None else _chained(self.blocks, self.inp)
        self.load_s = [0.0] * n if self.host is not None else []
        window, share = self.model.window
        self.held = None if not share else [math.ceil(windowed_tokens(i + o, window, share))
                                            for i, o in zip(self.inp, self.out, strict=True)]
        self.attn = self.inp if not share else [windowed_attention_len(i, window, share) for i in self.inp]


# Each load's segmented prompts, kept while its block ids live: a plan simulates one load at many fleet sizes and
# routers.
_CHAINS: weakref.WeakKeyDictionary[BlockIds, tuple[int, list[SegmentedPrompt]]] = weakref.WeakKeyDictionary()
_CHAINS_LOCK = threading.Lock()


def _chained(blocks: BlockIds, prompt_tokens: list[int]) -> list[SegmentedPrompt]:
    """segmented_prompts(blocks, prompt_tokens), memoised per block-ids object and prompt lengths."""
    lengths = hash(np.asarray(prompt_tokens, dtype=np.int64).tobytes())
    with _CHAINS_LOCK:
        found = _CHAINS.get(blocks)
    if found is not None and found[0] == lengths:
        return found[1]
    chains = segmented_prompts(blocks, prompt_tokens)
    with _CHAINS_LOCK:
        _CHAINS[blocks] = (lengths, chains)
    return chains


# The steps of a replica's iterations are closures over the run's arrays (read as locals: attribute
# look-ups were most of the hot loop's cost), called with the replica's state, returning what changed.
# Each is called at most once per turn of `advance`, and only when it has work: admission and retirement take
# every request that is due at once, one call per turn rather than one per request.

AdmitFn = Callable[[list[int], int, float, int, int, deque[int], _BlockCache | None, list[tuple[float, int]]],
                   tuple[int, int, int, int]]
IterateFn = Callable[[deque[int], int, int, int, int, float, list[tuple[int, int]], _BlockCache | None],
                     tuple[float, int, int, int, int, int, int]]
DecodeFn = Callable[[int, int, int, float, float, float, float], tuple[int, float, float]]
RetireFn = Callable[[list[tuple[int, int]], int, float, _BlockCache | None], tuple[int, int, int]]


def _make_admission(run: _Run) -> AdmitFn:
    """admit(queue, qhead, seen, kv, running, prefill, cache, loading) -> (qhead, kv, running, rejected).

    FIFO from queue[qhead]: each request that arrived by `seen` joins `prefill` while fewer than max_num_seqs
    are running and its prompt + output KV tokens are free; one that could never fit is rejected (its ttft
    and e2e stay NaN).  Stops at the first request that has not arrived or must wait.  With a prefix `cache`,
    a request's cached prefix is looked up there first: the blocks of it that running requests hold take no
    more KV (`_BlockCache.kv_need`), and once admitted it prefills the rest (`_cached_prefix`).  One whose
    prefix comes back from the host tier waits in `loading` until it is back (vLLM's offloading connector
    loads it asynchronously: the engine's iterations go on meanwhile), then joins `prefill`.
    """
    arr, inp, out = run.arr, run.inp, run.out
    max_seqs, kv_cap = run.model.max_num_seqs, run.model.kv_cache_tokens
    held = run.held

    load_s = run.load_s
    def admit(queue: list[int], qhead: int, seen: float, kv: int, running: int,
              prefill: deque[int], cache: _BlockCache | None, loading: list[tuple[float, int]]
              ) -> tuple[int, int, int, int]:
        nq = len(queue)
        rejected = 0
        while qhead < nq:
            i = queue[qhead]
            if arr[i] > seen:
                break
            need = whole = inp[i] + out[i] if held is None else held[i]
            if cache is not None and running < max_seqs:  # no slot: it waits whatever its prefix
                match = cache.match_both(run.prompts[i])
                need, blocks, private = cache.kv_need(run.prompts[i], match[2], whole)
            if running >= max_seqs or kv + need > kv_cap:
                if whole <= kv_cap:
                    break
                rejected += 1
            else:
                kv += need
                running += 1
                if cache is None:
                    prefill.append(i)
                else:
                    cache.reserve(i, blocks, private)
                    _cached_prefix(run, cache, i, match)
                    if load_s and load_s[i] > 0.0:  # its KV slots wait for the host tier (vLLM loads async)
                        heappush(loading, (seen + load_s[i], i))
                    else:
                        prefill.append(i)
            qhead += 1
        return qhead, kv, running, rejected

    return admit


def _cached_prefix(run: _Run, cache: _BlockCache, i: int, match: tuple[int, int, int]) -> None:
    """Request i admitted on the replica of `cache`, where its prompt matched `match` (_BlockCache.match_both):
    its cached prefix (refreshed in the LRU) is not prefilled."""
    prompt = run.prompts[i]
    hit, from_host, reached = match
    cache.touch(prompt, reached)
    run.cached[i] = hit + from_host
    run.todo[i] = run.inp[i] - hit - from_host
    if run.host is not None:
        run.load_s[i] = from_host * run.host.load_s_per_token


def _make_mixed_iteration(run: _Run) -> IterateFn:
    """iterate(prefill, head_done, b, ctx, steps, clock, heap, cache) -> (dt, head_done, steps, b, ctx, freed, ended).

    One mixed iteration starting at `clock`: the b running sequences (contexts
    summing to ctx) decode one token while prompts are prefilled in chunks,
    FIFO, within the token budget they leave (head_done: tokens of prefill[0]
    already prefilled).  It lasts dt = step time + the per-request overhead of
    each prompt it completes.  Those requests emit their first token at its end
    (TTFT); one-token requests finish there, the others join `heap` at the
    decode iteration that ends them.  Returns the decode iterations so far, the
    batch and its contexts after it, the KV tokens freed and the requests ended.
    A prompt's prefill is its tokens not in the prefix cache (`run.todo`); its
    blocks enter `cache` (when given) as its prefill completes.
    """
    arr, inp, out, ttft, e2e, done = run.arr, run.inp, run.out, run.ttft, run.e2e, run.done
    todo, prompts, held, attn = run.todo, run.prompts, run.held, run.attn
    step, overhead, budget_cap = run.model.step, run.model.overhead_s, run.model.prefill_budget

    def iterate(prefill: deque[int], head_done: int, b: int, ctx: int, steps: int, clock: float,
                heap: list[tuple[int, int]], cache: _BlockCache | None) -> tuple[float, int, int, int, int, int, int]:
        budget = budget_cap - b
        p, pw = 0, 0.0
        first: list[int] = []
        while prefill and budget > 0:
            i = prefill[0]
            left = todo[i] - head_done
            if left <= budget:
                prefill.popleft()
                head_done = 0
                first.append(i)
            else:
                left = budget
                head_done += left
            p += left
            pw += left * attn[i]
            budget -= left
        dt = step(b, ctx, p, pw) + overhead * len(first)
        clock += dt
        if b:
            steps += 1
            ctx += b
        freed = ended = 0
        for i in first:
            if cache is not None:
                cache.touch(prompts[i])
            ttft[i] = clock - arr[i]
            if out[i] == 1:
                e2e[i] = ttft[i]
                done[i] += 1
                if cache is not None:
                    freed += cache.release(i)
                else:
                    freed += inp[i] + 1 if held is None else held[i]
                ended += 1
            else:
                heappush(heap, (steps + out[i] - 1, i))
                b += 1
                ctx += inp[i] + 1
        return dt, head_done, steps, b, ctx, freed, ended

    return iterate


def _make_decode_jump(run: _Run) -> DecodeFn:
    """decode(b, ctx, due, clock, started, arrival, limit) -> (n, dt, started).

    A pure-decode stretch of b sequences (contexts summing to ctx) from `clock`:
    n iterations lasting dt, up to the next completion (`due` iterations away),
    or cut at the boundary after the next arrival routed here (`arrival`, inf
    when none) when it comes first; one iteration when, with async scheduling,
    that arrival waits only for the batch scheduled (at `started`) before it
    came.  n = 0 when the next completion ends after `limit` (at clock + dt): the
    replica lazily stays where it is.  `started`: when the last of the n began.
    """
    jump, steps_to, lag = run.model.jump, run.model.steps_to, run.model.async_scheduling

    def decode(b: int, ctx: int, due: int, clock: float, started: float, arrival: float,
               limit: float) -> tuple[int, float, float]:
        n = 1 if lag and started < arrival <= clock else due
        dt = jump(b, ctx, n)
        cut = clock < arrival < limit
        if clock + dt > (arrival if cut else limit):
            if not cut:
                return 0, dt, started
            n = steps_to(b, ctx, arrival - clock)
            dt = jump(b, ctx, n)
        if lag:
            started = clock + dt - jump(b, ctx + b * (n - 1), 1)
        return n, dt, started

    return decode


def _make_retirement(run: _Run) -> RetireFn:
    """retire(heap, steps, clock, cache) -> (ended, their context tokens, KV tokens freed): finish the sequences
    whose last token the iteration ending at `clock` produced (heap entries due by decode iteration `steps`).
    Without a prefix `cache` the KV freed is their contexts (what windowed layers held of them: run.held); with
    one, what they alone held."""
    arr, inp, out, e2e, done, held = run.arr, run.inp, run.out, run.e2e, run.done, run.held

    def retire(heap: list[tuple[int, int]], steps: int, clock: float,
               cache: _BlockCache | None) -> tuple[int, int, int]:
        ended = freed = kv_freed = 0
        while heap and heap[0][0] <= steps:
            i = heappop(heap)[1]
            e2e[i] = clock - arr[i]
            done[i] += 1
            freed += inp[i] + out[i]
            if cache is not None:
                kv_freed += cache.release(i)
            elif held is not None:
                kv_freed += held[i]
            ended += 1
        return ended, freed, freed if cache is None and held is None else kv_freed

    return retire


def _loads_back(loading: list[tuple[float, int]], prefill: deque[int], clock: float) -> float:
    """Move the requests whose host-tier hit is back by `clock` from `loading` to `prefill` (they prefill the
    rest); when the next one is back (inf: none waits)."""
    while loading and loading[0][0] <= clock:
        prefill.append(heappop(loading)[1])
    return loading[0][0] if loading else math.inf


def _make_advance(run: _Run) -> Callable[[_Replica, float], None]:
    """advance(rep, limit): run `rep`'s iterations that start before `limit` (inf = until its queue is empty).

    Leaves it at the first iteration boundary >= limit, or (lazily) earlier in
    a pure-decode stretch whose next completion is after `limit`.  Each turn:
    admit the requests that have arrived (with async scheduling, a busy engine
    fixed this iteration's batch when the last one started); run one mixed
    iteration when prompts wait, else jump over the pure-decode iterations up
    to the next completion or arrival, else idle until the next arrival; then
    retire the sequences whose last token that produced.  The replica's state
    lives in locals for the whole call (the hot loop).
    """
    arr, lag, inf = run.arr, run.model.async_scheduling, math.inf
    admit, iterate = _make_admission(run), _make_mixed_iteration(run)
    decode, retire = _make_decode_jump(run), _make_retirement(run)

    def advance(rep: _Replica, limit: float) -> None:
        if rep.clock >= limit:
            return
        queue, prefill, heap, loading = rep.queue, rep.prefill, rep.heap, rep.loading
        nq, qhead, clock, head_done = len(queue), rep.qhead, rep.clock, rep.head_done
        steps, b, ctx, kv, running, busy = rep.steps, rep.b, rep.ctx, rep.kv, rep.running, rep.busy_s
        started, cache = rep.started, rep.cache
        finished = 0
        wake = inf  # stays inf when it stops idle with nothing routed here
        while clock < limit:
            seen = started if lag and (b or prefill) else clock
            if qhead < nq and arr[queue[qhead]] <= seen:
                qhead, kv, running, rejected = admit(queue, qhead, seen, kv, running, prefill, cache, loading)
                finished += rejected
            back = _loads_back(loading, prefill, clock) if loading else inf  # next host-tier hit back (inf: none)
            if prefill:
                started = clock
                dt, head_done, steps, b, ctx, freed, ended = iterate(prefill, head_done, b, ctx, steps, clock, heap, cache)
                kv, running, finished = kv - freed, running - ended, finished + ended
            elif b:
                arrival = arr[queue[qhead]] if qhead < nq else inf
                arrival = back if back < arrival else arrival  # a load back cuts the stretch as an arrival does
                n, dt, started = decode(b, ctx, heap[0][0] - steps, clock, started, arrival, limit)
                if not n:
                    wake = min(clock + dt, back)  # lazily stay here: the next completion is after `limit`
                    break
                steps += n
                ctx += b * n
            elif (nxt := min(arr[queue[qhead]] if qhead < nq else inf, back)) <= limit:
                clock, dt = max(clock, nxt), 0.0  # idle until the next routed arrival or load back
            else:
                wake = back
                break
            clock += dt
            busy += dt
            if heap and heap[0][0] <= steps:  # first tokens just queued are due later
                ended, freed, kv_freed = retire(heap, steps, clock, cache)
                b, ctx, kv, running, finished = b - ended, ctx - freed, kv - kv_freed, running - ended, finished + ended
        else:
            wake = clock
        rep.qhead, rep.clock, rep.head_done, rep.steps, rep.b, rep.ctx = qhead, clock, head_done, steps, b, ctx
        rep.kv, rep.running, rep.busy_s, rep.wake, rep.started = kv, running, busy, wake, started
        rep.outstanding -= finished

    return advance


# When each replica serves: (first arrival it may take, s; no arrival from this time on), one per replica.
Active = Sequence[tuple[float, float]]


def _takes(active: Active | None, r: int, t: float) -> bool:
    """Does replica r take an arrival at time t (always, without a schedule)?"""
    return active is None or active[r][0] <= t < active[r][1]


def _route_round_robin(reps: list[_Replica], run: _Run, active: Active | None = None, first: int = 0) -> list[int]:
    """Arrivals from `first` on, each replica in turn (among those taking arrivals then, with `active`)."""
    count = len(reps)
    if active is None:
        assigned = [i % count for i in range(first, len(run.arr))]
    else:
        assigned, turn = [], 0
        for t in run.arr[first:]:
            serving = [r for r in range(count) if _takes(active, r, t)] or [0]
            assigned.append(serving[turn % len(serving)])
            turn += 1
    for i, r in enumerate(assigned, start=first):
        reps[r].queue.append(i)
    return assigned


def _route_jsq(reps: list[_Replica], run: _Run, active: Active | None = None, first: int = 0) -> list[int]:
    """Arrivals from `first` on, each to the replica with the fewest outstanding requests (lowest index on ties)
    among those taking arrivals then (`active`; every replica without it, the first when none does)."""
    if active is not None:
        return _route_jsq_scheduled(reps, run, active, first)
    arr, inf = run.arr, math.inf
    assigned = [0] * (len(arr) - first)
    advance = _make_advance(run)
    for i in range(first, len(arr)):
        t = arr[i]
        best, best_load = reps[0], inf
        for rep in reps:
            if rep.wake <= t:
                advance(rep, t)
            if rep.outstanding < best_load:
                best, best_load = rep, rep.outstanding
                if not best_load:
                    break  # nobody has fewer; the others are brought up to date later
        best.queue.append(i)
        best.outstanding += 1
        if best.wake > t:
            best.wake = t
        assigned[i - first] = best.index
    return assigned


def _route_jsq_scheduled(reps: list[_Replica], run: _Run, active: Active, first: int) -> list[int]:
    """_route_jsq among the replicas taking arrivals at each arrival's time (the first when none does)."""
    arr = run.arr
    assigned = [0] * (len(arr) - first)
    advance = _make_advance(run)
    for i in range(first, len(arr)):
        t = arr[i]
        best, best_load = reps[0], math.inf
        for r, rep in enumerate(reps):
            if rep.wake <= t:
                advance(rep, t)
            if active[r][0] <= t < active[r][1] and rep.outstanding < best_load:
                best, best_load = rep, rep.outstanding
                if best_load == 0:
                    break
        best.queue.append(i)
        best.outstanding += 1
        best.wake = min(best.wake, t)
        assigned[i - first] = best.index
    return assigned


def _route_affinity(reps: list[_Replica], run: _Run, active: Active | None = None, first: int = 0) -> list[int]:
    """Arrivals from `first` on, each to the replica whose prefix cache holds the longest prefix of it (ties: the
    fewest outstanding, then the lowest index) among those taking arrivals then (`active`; the first when none
    does), unless it has more than AFFINITY_LOAD_CAP outstanding requests beyond the least loaded one: then to
    that one.  Without prefix caches, or without a match, this is _route_jsq."""
    arr, prompts = run.arr, run.prompts
    assigned = [0] * (len(arr) - first)
    advance = _make_advance(run)
    for i in range(first, len(arr)):
        t = arr[i]
        serving = [rep for r, rep in enumerate(reps) if _takes(active, r, t)] or reps[:1]
        for rep in serving:
            if rep.wake <= t:
                advance(rep, t)
        least = min(serving, key=lambda rep: rep.outstanding)
        best = max(serving, key=lambda rep: (rep.cache.match(prompts[i])[0] if rep.cache else 0,
                                             -rep.outstanding))
        if best.outstanding - least.outstanding > AFFINITY_LOAD_CAP:
            best = least
        best.queue.append(i)
        best.outstanding += 1
        best.wake = min(best.wake, t)
        assigned[i - first] = best.index
    return assigned


def _router(router: str, replicas: int, active: Active | None) -> Callable[..., list[int]]:
    # One replica takes every arrival whatever the router: served in one pass, without routing each arrival.
    if router == "round-robin" or (replicas == 1 and active is None):
        return _route_round_robin
    return _route_affinity if router == "prefix-affinity" else _route_jsq


# ---------------------------------------------------------------- a load's first requests, simulated once

# Fleets' state right after the first requests of a load, kept for the next simulations of loads starting with the
# same requests (planner.sizing.resampled judges every SLO window behind one window): they copy it instead of
# simulating those requests again.  Results are the same either way.
_PREFIXES: OrderedDict[tuple, tuple[_Run, list[_Replica], list[int]]] = OrderedDict()
_PREFIXES_LOCK = threading.Lock()  # the app's sessions simulate in threads of one process
PREFIX_STATES = 8


def _start(curve: CurveLike, t: np.ndarray, i: np.ndarray, o: np.ndarray, replicas: int, router: str,
           prefix: int, blocks: BlockIds | None = None, host: HostTier | None = None
           ) -> tuple[_Run, list[_Replica], list[int]]:
    """A run of these requests, its replicas and the first `prefix` requests' replicas: fresh, or (0 < prefix <
    requests) as the prefix left them up to its last arrival, simulated once per curve, fleet and prefix (and its
    requests' block ids and host tier).  blocks: the prompts' block ids; each replica then has a prefix cache."""
    own_tier = getattr(curve, "host_kv_tokens", 0)  # the curve's own host tier (with_host_tier), if any
    if host is None and own_tier > 0:
        host = HostTier(int(own_tier), float(getattr(curve, "host_load_s_per_token", 0.0)))
    if blocks is None:
        host = None
    run = _Run(t.tolist(), i.tolist(), o.tolist(), step_model(curve), blocks, host)
    if not 0 < prefix < t.size:
        return run, _fresh(run, replicas), []
    key: tuple = (curve, replicas, router, t[:prefix].tobytes(), i[:prefix].tobytes(), o[:prefix].tobytes())
    if blocks is not None:  # the log's identity (its state holds it, so the id stays its own) and the rows taken
        key += (id(blocks.universe), blocks.starts[:prefix].tobytes(), blocks.block_size, host)
    with _PREFIXES_LOCK:
        state = _PREFIXES.get(key)
    if state is None:  # a state is only read once made: each run copies it
        head = _Run(t[:prefix].tolist(), i[:prefix].tolist(), o[:prefix].tolist(), run.model,
                    None if blocks is None else blocks.take(slice(0, prefix)), host)
        state = _prefix_state(head, replicas, router)
        with _PREFIXES_LOCK:
            _PREFIXES[key] = state
            while len(_PREFIXES) > PREFIX_STATES:
                _PREFIXES.popitem(last=False)
    head, reps, assigned = state
    run.ttft[:prefix], run.e2e[:prefix], run.done[:prefix] = head.ttft, head.e2e, head.done
    if blocks is not None:
        run.todo[:prefix], run.cached[:prefix] = head.todo, head.cached
        if host is not None:
            run.load_s[:prefix] = head.load_s
    return run, [rep.copy() for rep in reps], list(assigned)


def _fresh(run: _Run, replicas: int) -> list[_Replica]:
    """Idle replicas for `run`, each with an empty prefix cache when its requests carry block ids."""
    if run.blocks is None:
        return [_Replica(r) for r in range(replicas)]
    size = run.model.kv_cache_tokens // run.blocks.block_size
    host_size = 0 if run.host is None else run.host.tokens // run.blocks.block_size
    return [_Replica(r, _BlockCache(size, host_size, run.blocks.block_size)) for r in range(replicas)]


def _prefix_state(run: _Run, replicas: int, router: str) -> tuple[_Run, list[_Replica], list[int]]:
    """The first requests (`run`) routed and served up to the last of their arrivals (the iterations that start
    before it: what comes later cannot change them)."""
    reps = _fresh(run, replicas)
    assigned = _router(router, replicas, None)(reps, run)
    advance = _make_advance(run)
    for rep in reps:
        advance(rep, run.arr[-1])
    return run, reps, assigned


# ---------------------------------------------------------------- results

PERCENTILES = (50, 95, 99)
METRICS = ("ttft", "tpot", "e2e")


@dataclass(frozen=True, eq=False)
class SimResult:
    """Per-request outcomes of one simulation (seconds), and what was simulated.

    tpot_s is NaN for one-token requests; ttft/e2e are NaN for rejected ones
    (prompt + output larger than the KV cache).  completions counts how often
    each request finished (1 for every served request).  attainment: share of
    requests meeting every SLO in `slo` (NaN without one).  cached_tokens: per
    request, prompt tokens found in its replica's prefix cache (None when the
    requests carried no prefix structure).
    """

    arrival_s: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    replica: np.ndarray
    completions: np.ndarray
    replicas: int
    router: str
    busy_s: np.ndarray
    slo: Slo
    attainment: float
    cached_tokens: np.ndarray | None = None

    @property
    def n(self) -> int:
        return int(self.arrival_s.size)

    @property
    def rejected(self) -> int:
        return int(np.sum(~np.isfinite(self.e2e_s)))

    @property
    def makespan_s(self) -> float:
        """Time from 0 to the last completion."""
        ends = self.arrival_s + self.e2e_s
        return float(np.nanmax(ends)) if self.n else 0.0

    @property
    def prefix_hit_rate(self) -> float:
        """Prompt tokens found in the prefix caches over all prompt tokens, of the served requests, as vLLM's
        prefix_cache_hits / prefix_cache_queries (NaN without prefix structure or served requests)."""
        if self.cached_tokens is None:
            return math.nan
        served = np.isfinite(self.e2e_s)
        prompts = float(np.sum(self.input_len[served]))
        return float(np.sum(self.cached_tokens[served])) / prompts if prompts else math.nan

    def percentile_ms(self, metric: str, pct: float) -> float:
        """The `pct` percentile of ttft / tpot / e2e over served requests, ms (NaN if none)."""
        values = getattr(self, f"{metric}_s")
        values = values[np.isfinite(values)]
        return float(np.percentile(values, pct) * 1000.0) if values.size else math.nan

    def summary(self) -> dict[str, float | int | str]:
        """Requests, replicas, attainment and p50/p95/p99 of each latency (ms), as a flat dict."""
        out: dict[str, float | int | str] = {"requests": self.n, "replicas": self.replicas, "router": self.router,
                                             "rejected": self.rejected, "attainment": self.attainment,
                                             "slo": self.slo.describe()}
        if self.cached_tokens is not None:
            out["prefix_hit_rate"] = self.prefix_hit_rate
        for metric in METRICS:
            for pct in PERCENTILES:
                out[f"{metric}_p{pct}_ms"] = self.percentile_ms(metric, pct)
        return out


# ---------------------------------------------------------------- public entry points

def _check_requests(arrival_s: Numbers, input_len: Numbers, output_len: Numbers
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.asarray(arrival_s, dtype=float)
    i = np.asarray(input_len)
    o = np.asarray(output_len)
    if not (t.shape == i.shape == o.shape and t.ndim == 1):
        raise InputError(f"arrival_s, input_len and output_len must be 1-D arrays of one length; "
                         f"got shapes {t.shape}, {i.shape}, {o.shape}")
    if t.size and (not np.all(np.isfinite(t)) or np.any(np.diff(t) < 0)):
        raise InputError("arrival times must be finite and sorted (non-decreasing)")
    for name, values in (("input_len", i), ("output_len", o)):
        if values.size and (not np.all(np.isfinite(values)) or np.any(values < 1) or np.any(values != np.round(values))):
            raise InputError(f"{name} must be whole numbers of tokens >= 1")
    return t, i.astype(np.int64, copy=False), o.astype(np.int64, copy=False)


def simulate(curve: CurveLike, arrival_s: Numbers, input_len: Numbers, output_len: Numbers,
             replicas: int = 1, router: str = "jsq", slo: Slo | None = None, active: Active | None = None,
             prefix: int = 0, blocks: BlockIds | None = None, host: HostTier | None = None) -> SimResult:
    """Simulate `replicas` replicas of `curve` serving the given requests.

    arrival_s: sorted arrival times, s; input_len / output_len: tokens per
    request (>= 1).  router: "jsq" (least outstanding requests), "round-robin"
    or "prefix-affinity" (see the module doc).  blocks: the prompts' block ids
    (one array per request): each replica then keeps a prefix cache, and the
    result its hits (`cached_tokens`, `prefix_hit_rate`); host: a host-memory KV tier behind each replica's
    cache (with `blocks`).  active: per replica, when it takes arrivals (an autoscaled
    fleet: a replica started later, or draining); a request it took is served
    to the end.  prefix: the first `prefix` requests start other loads
    simulated on this fleet too; their simulation is kept and reused (the
    result is the same; without `active`).  Raises InputError on bad arguments.
    """
    if active is not None and len(active) != replicas:
        raise InputError(f"active: expected one (from, until) per replica ({replicas}), got {len(active)}")
    if router not in ROUTERS:
        raise InputError(f"router: expected one of {', '.join(ROUTERS)}, got {router!r}")
    if int(replicas) != replicas or replicas < 1:
        raise InputError(f"replicas: expected a whole number >= 1, got {replicas!r}")
    t, i, o = _check_requests(arrival_s, input_len, output_len)
    if blocks is not None and len(blocks) != t.size:
        raise InputError(f"blocks: expected one block id list per request ({t.size}), got {len(blocks)}")
    run, reps, assigned = _start(curve, t, i, o, int(replicas), router, prefix if active is None else 0, blocks,
                                 host)
    assigned += _router(router, int(replicas), active)(reps, run, active, len(assigned))
    advance = _make_advance(run)
    for rep in reps:
        advance(rep, math.inf)
    ttft, e2e = np.array(run.ttft), np.array(run.e2e)
    front_end = getattr(curve, "front_end", None)
    if front_end is not None and front_end.adds_delay:
        delays = _front_end_delays(front_end, t, i, o, ttft, e2e, np.asarray(assigned))
        ttft += delays
        e2e += delays
    return _result(run, t, i, o, ttft, e2e, assigned, reps, router, slo or Slo())


def _front_end_delays(front_end: FrontEnd, t: np.ndarray, i: np.ndarray, o: np.ndarray, ttft: np.ndarray,
                      e2e: np.ndarray, assigned: np.ndarray) -> np.ndarray:
    """How long every request's first token (and so its end) waits for its replica's front end
    (planner.engine.frontend), s.

    Each replica has its own front end, loaded by the requests it took and the tokens its engine
    streamed in the window before each arrival; the engine's schedule is left as simulated.
    """
    delays = np.zeros(t.size)
    for replica in np.unique(assigned):
        mine = assigned == replica
        load = stream_load(t[mine], t[mine] + ttft[mine], t[mine] + e2e[mine], o[mine])
        delays[mine] = front_end.delays_s(i[mine], load)
    return delays


def _result(run: _Run, t: np.ndarray, i: np.ndarray, o: np.ndarray, ttft: np.ndarray, e2e: np.ndarray,
            assigned: list[int], reps: list[_Replica], router: str, slo: Slo) -> SimResult:
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(o > 1, (e2e - ttft) / (o - 1), math.nan)
    attainment = math.nan if slo.empty or not t.size else float(np.mean(slo.met(ttft, tpot, e2e)))
    cached = None if run.blocks is None else np.array(run.cached, dtype=np.int64)
    return SimResult(t, i, o, ttft, tpot, e2e, np.array(assigned, dtype=np.int64), np.array(run.done),
                     len(reps), router, np.array([rep.busy_s for rep in reps]), slo, attainment, cached)
