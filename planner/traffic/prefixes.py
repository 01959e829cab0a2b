"""Prefix reuse of a request log: the prompt blocks an earlier request already had, found as vLLM's automatic
prefix caching finds them (docs/traffic.md, "Prefix reuse").  Pure functions: no engine, no timing.

A request is its arrival and its prompt's block ids (`PromptBlocks`): one id per block of `block_size` tokens,
the last block possibly partial, equal ids = equal tokens (a Mooncake trace's `hash_ids`).  The rules, after
vLLM v1 (`v1/core/kv_cache_utils.py`, `v1/core/kv_cache_manager.py`):
- blocks are chained: block j's key is (key of block j - 1, id j), so a block matches only behind the same
  prefix.  Keys are interned exactly (a dict), so there are no hash collisions;
- the engine caches in blocks of ENGINE_BLOCK_TOKENS, finer than a trace's hash blocks: a prompt's partial last
  hash block is cached up to its last full engine block, and a later prompt with the same id there (the next
  turn of a session, which fills that block) finds those tokens.  So each chained key holds the tokens cached
  of it (a whole hash block, or a partial one's engine blocks);
- a hit is the leading run of cached tokens, through whole hash blocks and into the first one cached only in
  part, at most floor((n - 1) / ENGINE_BLOCK_TOKENS) engine blocks: the last prompt token is always recomputed
  for its logits (hash blocks that ENGINE_BLOCK_TOKENS does not divide are taken as the engine's blocks: only
  whole ones are cached);
- a request's blocks enter the cache at its arrival (here: no prefill timing); blocks of generated tokens are
  not cached here (vLLM caches those too, so a multi-turn session's next turn may hit a little more);
- LRU: a request references its blocks tail first (vLLM frees a finished request's blocks in reverse order,
  so a chain's head outlives its tail), and the least recently referenced block is evicted.  No block is
  held by a running request (no ref counts: nothing runs here).

`hit_tokens` gives per request the tokens served by an unbounded cache and by an LRU cache of a capacity;
`prefix_reuse` the share of prompt tokens seen before and the reuse distances.  `BlockIds` is the prefix structure
a simulation carries beside its requests (planner.latency.simulate keeps one such cache per replica), and
`segmented_prompts` its requests' chained blocks in segments, as that cache keeps them.
"""

from __future__ import annotations

import itertools
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from fleetfacts.errors import InputError
from fleetfacts.requestlog import blocks_for

REUSE_QUANTILES = (50, 90)  # reuse distance percentiles `traffic` prints
ROOT_KEY = -1  # the parent key of a prompt's first block
# Tokens per KV block of the engine's prefix cache: vLLM's default --block-size on CUDA (16).  A hit is a whole
# number of these; a trace's hash blocks (512 tokens) are coarser, so a partial hash block still hits in part.
ENGINE_BLOCK_TOKENS = 16


@dataclass(frozen=True)
class PromptBlocks:
    """Requests as a prefix cache sees them: arrival_s (s), prompt_tokens (tokens per prompt), hash_ids (per
    request an int array, one id per block of the prompt: ceil(prompt_tokens / block_size) of them)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    hash_ids: Sequence[np.ndarray]

    def __len__(self) -> int:
        return len(self.prompt_tokens)


@dataclass(frozen=True, eq=False)
class BlockIds:
    """The prefix structure of a list of requests: per request its prompt's block ids (one per block of block_size
    tokens, the last possibly partial; equal ids = equal tokens), in the requests' order.  Held flat (a million
    requests' ids as a million small arrays cost ~110 bytes of array header each): request k's ids are
    ids[starts[k]:starts[k] + counts[k]]; `hash_ids` gives them request by request."""

    ids: np.ndarray
    starts: np.ndarray
    counts: np.ndarray
    block_size: int
    # The block ids these were taken from (their rows cover `ids`; None: these are), so that every subset of one
    # log shares one set of chained keys and segments (`segmented_prompts`).
    root: BlockIds | None = None

    @property
    def universe(self) -> BlockIds:
        """The block ids these were taken from (themselves when not taken)."""
        return self.root if self.root is not None else self

    @classmethod
    def of(cls, hash_ids: Sequence[np.ndarray] | Iterable[Sequence[int]], block_size: int) -> BlockIds:
        """Block ids from one id sequence per request."""
        rows = [np.asarray(row, dtype=np.int64) for row in hash_ids]
        counts = np.array([row.size for row in rows], dtype=np.int64)
        ids = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        return cls(ids, np.cumsum(counts) - counts, counts, int(block_size))

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def hash_ids(self) -> _Rows:
        """Request by request, its ids (views of the flat array)."""
        return _Rows(self)

    def take(self, index: np.ndarray | slice) -> BlockIds:
        """The requests at `index` (a boolean mask, positions or a slice), in that order (the flat ids shared)."""
        return BlockIds(self.ids, self.starts[index], self.counts[index], self.block_size, self.universe)

    def id_range(self) -> tuple[int, int]:
        """(lowest block id, one past the highest) of the ids held (those of requests taken out included: a
        range that holds every request's ids); (0, 0) without ids."""
        if not self.ids.size:
            return 0, 0
        return int(self.ids.min()), int(self.ids.max()) + 1

    def shifted(self, offset: int) -> BlockIds:
        """The same structure with every id moved by `offset` (another route's ids kept apart from these)."""
        return BlockIds(self.ids + offset, self.starts, self.counts, self.block_size) if offset else self

    @classmethod
    def joined(cls, parts: Sequence[BlockIds], block_size: int) -> BlockIds:
        """The requests of `parts` one after another (their ids as they are: equal ids stay equal tokens)."""
        if any(p.block_size != block_size for p in parts):
            raise InputError(f"block ids: expected blocks of {block_size} tokens in every part, got "
                             f"{sorted({p.block_size for p in parts})}")
        empty = np.zeros(0, dtype=np.int64)
        if parts and all(p.universe is parts[0].universe for p in parts):  # subsets of one log: rows of its ids
            return cls(parts[0].ids, np.concatenate([empty, *(p.starts for p in parts)]),
                       np.concatenate([empty, *(p.counts for p in parts)]), int(block_size), parts[0].universe)
        bases = np.cumsum([0, *(p.ids.size for p in parts)])[:-1]
        return cls(np.concatenate([empty, *(p.ids for p in parts)]),
                   np.concatenate([empty, *(p.starts + base for p, base in zip(parts, bases, strict=True))]),
                   np.concatenate([empty, *(p.counts for p in parts)]), int(block_size))

    @classmethod
    def shared(cls, prompt_tokens: np.ndarray, shared_tokens: int, block_size: int) -> BlockIds:
        """Requests that all start with the same `shared_tokens` prompt tokens (a system prompt) and share nothing
        else: the shared blocks have ids 0..k-1 in every request, every other block an id of its own (k, k + 1, ...
        in the requests' order)."""
        n = np.asarray(prompt_tokens, dtype=np.int64)
        full = np.minimum(int(shared_tokens) // block_size, n // block_size)
        counts = -(-n // block_size)
        own = counts - full
        fresh = int(shared_tokens) // block_size + np.cumsum(own) - own  # each request's first id of its own
        starts = np.cumsum(counts) - counts
        row = np.repeat(np.arange(n.size), counts)
        j = np.arange(int(counts.sum()), dtype=np.int64) - starts[row]
        ids = np.where(j < full[row], j, fresh[row] + j - full[row])
        return cls(ids.astype(np.int64), starts, counts, int(block_size))


class _Rows(Sequence[np.ndarray]):
    """A BlockIds' ids request by request: row k is a view of the flat ids; a slice gives a list of rows."""

    def __init__(self, blocks: BlockIds) -> None:
        self._blocks = blocks

    def __len__(self) -> int:
        return len(self._blocks)

    @overload
    def __getitem__(self, k: int) -> np.ndarray: ...

    @overload
    def __getitem__(self, k: slice) -> list[np.ndarray]: ...

    def __getitem__(self, k: int | slice) -> np.ndarray | list[np.ndarray]:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        b = self._blocks
        start = int(b.starts[k])
        return b.ids[start:start + int(b.counts[k])]


@dataclass(frozen=True)
class CacheHits:
    """Prompt tokens served from the cache per request (in the requests' order): unbounded and LRU."""

    infinite: np.ndarray
    lru: np.ndarray


@dataclass(frozen=True)
class PrefixReuse:
    """A log's reuse: prompt_tokens (all prompts), reused_tokens (what an unbounded cache serves: hit_tokens'
    `infinite`), distances_tokens (per reused block, the cached prompt tokens of the requests between its
    previous use and this one), block_size; lru_tokens: what an LRU of cache_tokens serves (None if not asked)."""

    prompt_tokens: int
    reused_tokens: int
    distances_tokens: np.ndarray
    block_size: int
    cache_tokens: int | None = None
    lru_tokens: int | None = None

    @property
    def share(self) -> float:
        """Share of prompt tokens seen before (NaN without prompt tokens)."""
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else math.nan

    def distance(self, percentile: float) -> float:
        """Reuse distance at a percentile (tokens; linear interpolation), NaN when nothing is reused."""
        if not self.distances_tokens.size:
            return math.nan
        return float(np.percentile(self.distances_tokens, percentile))

    def describe(self) -> str:
        """One line: reuse share, reuse distance p50/p90 and, when asked, the LRU cache's share."""
        text = (f"prefix reuse: {percent_text(self.share)} of prompt tokens repeat an earlier request's prefix (what "
                f"an unbounded prefix cache serves; {self.block_size}-token blocks chained as vLLM chains them, "
                f"a partial block hit in the engine's {ENGINE_BLOCK_TOKENS}-token blocks)")
        if self.distances_tokens.size:
            p50, p90 = (tokens_text(self.distance(q)) for q in REUSE_QUANTILES)
            text += (f"; reuse distance p50 {p50}, p90 {p90} tokens of traffic between a block's uses (an LRU cache "
                     "larger than the distance keeps the block)")
        if self.cache_tokens is not None and self.lru_tokens is not None:
            share = self.lru_tokens / self.prompt_tokens if self.prompt_tokens else math.nan
            text += f"; an LRU cache of {tokens_text(self.cache_tokens)} tokens serves {percent_text(share)}"
        return text


def percent_text(share: float) -> str:
    """0.814 -> '81.4%'; NaN -> 'n/a'."""
    return "n/a" if math.isnan(share) else f"{100 * share:.1f}%"


def tokens_text(value: float) -> str:
    """12345 -> '12.3k', 2.5e6 -> '2.5M'."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.0f}"


# ---------------------------------------------------------------- the walk over requests

@dataclass(frozen=True)
class ChainedPrompt:
    """One prompt as a prefix cache sees it: the chained keys of its hash blocks (the last possibly partial),
    the tokens of its last block when partial (0: every block full), the most tokens a hit may take, and the
    tokens per hash block."""

    keys: list[int]
    tail: int
    cap: int
    block: int

    def own(self, j: int) -> int:
        """Tokens the engine caches of this prompt's j-th hash block (whole engine blocks only)."""
        if j < len(self.keys) - 1 or not self.tail:
            return self.block
        grain = engine_grain(self.block)
        return self.tail // grain * grain

    def cached_tokens(self) -> int:
        """Tokens of this prompt the engine caches once it is prefilled."""
        return sum(self.own(j) for j in range(len(self.keys)))


def engine_grain(block_size: int) -> int:
    """Tokens per engine cache block under hash blocks of block_size: ENGINE_BLOCK_TOKENS where it divides them
    (a trace's 512), else the hash block itself (a session log cut into the engine's own blocks)."""
    return ENGINE_BLOCK_TOKENS if block_size % ENGINE_BLOCK_TOKENS == 0 else block_size


def _walk(requests: PromptBlocks, block_size: int) -> Iterator[tuple[int, ChainedPrompt]]:
    """(request index, its ChainedPrompt), in arrival order (ties in the given order).  Raises InputError for a
    block size below 1 or a hash list of the wrong length."""
    if block_size < 1:
        raise InputError(f"block size: expected a whole number of tokens >= 1, got {block_size}")
    if not len(requests.arrival_s) == len(requests.prompt_tokens) == len(requests.hash_ids):
        raise InputError(f"prompt blocks: {len(requests.arrival_s)} arrivals, {len(requests.prompt_tokens)} prompt "
                         f"lengths and {len(requests.hash_ids)} hash lists; expected one of each per request")
    chain: dict[tuple[int, int], int] = {}
    for i in np.argsort(np.asarray(requests.arrival_s, dtype=float), kind="stable"):
        n, ids = int(requests.prompt_tokens[i]), requests.hash_ids[i]
        if len(ids) != blocks_for(n, block_size):
            raise InputError(f"request {i}: {len(ids)} hash ids for a {n}-token prompt; blocks of {block_size} "
                             f"tokens need {blocks_for(n, block_size)}")
        keys, parent = [], ROOT_KEY
        for block_id in ids:
            parent = chain.setdefault((parent, int(block_id)), len(chain))
            keys.append(parent)
        grain = engine_grain(block_size)
        cap = max(0, (n - 1) // grain * grain)
        yield int(i), ChainedPrompt(keys, n % block_size, cap, block_size)


class SegmentedPrompt:
    """One prompt as the simulator's prefix cache keeps it: its chained hash blocks in segments.  A segment is a run
    of blocks that every prompt of its log holding the run's first block holds whole (a system prompt, the text a
    conversation's turn added), so every prompt references its blocks together, tail first, and they sit side by
    side in an LRU of blocks: the cache keeps, moves and evicts (from its tail) a segment at once and stays the
    LRU of blocks that `leading_tokens` / `remember` keep, at a fraction of the work (`segmented_prompts`).

    keys: each segment's key (its first block's chained key); sizes: the tokens the engine caches of each (the
    last block possibly partial: whole engine blocks only; 0 when it caches none of the last); starts: the hash
    blocks before each; cap: the most tokens a hit may take; block: tokens per hash block."""

    __slots__ = ("keys", "sizes", "starts", "cap", "block", "tokens")

    def __init__(self, keys: tuple[int, ...], sizes: tuple[int, ...], starts: tuple[int, ...], cap: int,
                 block: int, tokens: int) -> None:
        self.keys, self.sizes, self.starts, self.cap, self.block = keys, sizes, starts, cap, block
        self.tokens = tokens  # the prompt's


class _LogSegments:
    """A log's segments (SegmentedPrompt): per row of its block ids its segments' keys and widths (hash blocks),
    held flat in numpy (a million rows cost a few arrays, not a million Python lists), each row found by its start
    in the flat ids; the shapes many prompts share are kept once, and each row's prompt is made when first asked
    for."""

    def __init__(self, universe: BlockIds) -> None:
        keys, parents = _chained_flat(universe)
        holders = np.bincount(keys, minlength=int(keys.max(initial=-1)) + 1)  # rows holding each key (once each)
        parent_of = np.full(holders.size, ROOT_KEY, dtype=np.int64)
        parent_of[keys] = parents
        children = np.bincount(parent_of[parent_of >= 0], minlength=holders.size)
        del parent_of
        # A block joins its parent's segment when it is the parent's only child and every row holding the parent
        # holds it too (the first block of a row never does: its parent is the root).
        inner = np.flatnonzero(parents >= 0)
        joins = np.zeros(keys.size, dtype=bool)
        joins[inner] = (children[parents[inner]] == 1) & (holders[parents[inner]] == holders[keys[inner]])
        del inner, children, holders, parents
        heads = np.flatnonzero(~joins)  # flat positions of the segments' first blocks
        del joins
        self.head_keys = keys[heads]
        self.widths = np.diff(np.append(heads, keys.size))  # a row's first block is a head: a segment ends at the next
        offsets = np.cumsum(universe.counts) - universe.counts  # each row's first block, as laid out
        self.first = np.searchsorted(heads, offsets)  # each row's first segment
        self.count = np.searchsorted(heads, offsets + universe.counts) - self.first
        self.order = np.argsort(universe.starts, kind="stable")  # rows by start, to find a row by its start
        self.sorted_starts = universe.starts[self.order]
        self.shapes: dict[tuple[int, ...], tuple[int, ...]] = {}
        self.starts: dict[tuple[int, ...], tuple[int, ...]] = {}  # widths -> the blocks before each segment
        self.made: list[SegmentedPrompt | None] = [None] * len(universe)  # per row its last prompt made

    def rows(self, starts: np.ndarray) -> np.ndarray:
        """The rows at these starts in the flat ids."""
        return self.order[np.searchsorted(self.sorted_starts, starts)]

    def shared(self, value: tuple[int, ...]) -> tuple[int, ...]:
        """`value`, kept once however many prompts have it."""
        return self.shapes.setdefault(value, value)

    def prompt(self, row: int, n: int, block: int, grain: int) -> SegmentedPrompt:
        """The SegmentedPrompt of the row with an n-token prompt."""
        made = self.made[row]
        if made is not None and made.tokens == n:
            return made
        a = int(self.first[row])
        b = a + int(self.count[row])
        keys, widths = tuple(self.head_keys[a:b].tolist()), self.shared(tuple(self.widths[a:b].tolist()))
        tail = n % block
        last = (widths[-1] - 1) * block + (tail // grain * grain if tail else block)
        sizes = self.shared(tuple(w * block for w in widths[:-1]) + (last,))
        starts = self.starts.get(widths)
        if starts is None:
            starts = self.starts[widths] = tuple(itertools.accumulate(widths[:-1], initial=0))
        made = self.made[row] = SegmentedPrompt(keys, sizes, starts, max(0, (n - 1) // grain * grain), block, n)
        return made


def _chained_flat(universe: BlockIds) -> tuple[np.ndarray, np.ndarray]:
    """Per block of the universe's rows, row after row, its chained key and its parent's key (ROOT_KEY for a
    row's first block): equal keys = the same block behind the same prefix.  Keys are numbered depth by depth
    (np.unique of (parent, id) pairs), so the work is numpy's, one pass per block depth."""
    counts = universe.counts.astype(np.int64)
    offsets = np.cumsum(counts) - counts
    starts = universe.starts.astype(np.int64)
    deep = np.argsort(-counts, kind="stable")  # rows longest first: those deeper than d are a prefix of it
    longer = np.searchsorted(-counts[deep], -np.arange(int(counts.max(initial=0))), side="left")
    keys = np.empty(int(counts.sum()), dtype=np.int64)
    parents = np.full(keys.size, ROOT_KEY, dtype=np.int64)
    distinct = np.unique(universe.ids)  # dense codes: (parent, code) packs into one int64
    width = max(int(distinct.size), 1)
    numbered = 0
    for d, n in enumerate(longer.tolist()):
        rows = deep[:n]
        here = offsets[rows] + d  # the d-th block of each row at least d + 1 long, as laid out
        if d:
            parents[here] = keys[here - 1]  # the block before it in its row
        codes = np.searchsorted(distinct, universe.ids[starts[rows] + d])
        _, inverse = np.unique((parents[here] + 1) * width + codes, return_inverse=True)
        keys[here] = numbered + inverse.ravel()
        numbered += int(inverse.max(initial=-1)) + 1
    return keys, parents


_SEGMENTS: weakref.WeakKeyDictionary[BlockIds, _LogSegments] = weakref.WeakKeyDictionary()
_SEGMENTS_LOCK = threading.Lock()  # the app's sessions simulate in threads of one process


def segmented_prompts(blocks: BlockIds, prompt_tokens: Sequence[int]) -> list[SegmentedPrompt]:
    """Per request (in the given order) its SegmentedPrompt, segmented over the whole log the block ids were taken
    from (computed once per log and kept while it lives: every subset a plan simulates shares it).  Raises
    InputError for a block size below 1 or a hash list of the wrong length."""
    block = blocks.block_size
    prompts = np.asarray(prompt_tokens, dtype=np.int64)
    if block < 1:
        raise InputError(f"block size: expected a whole number of tokens >= 1, got {block}")
    wrong = np.flatnonzero(blocks.counts != -(-prompts // block))
    if wrong.size:
        i = int(wrong[0])
        raise InputError(f"request {i}: {int(blocks.counts[i])} hash ids for a {int(prompts[i])}-token prompt; "
                         f"blocks of {block} tokens need {blocks_for(int(prompts[i]), block)}")
    universe = blocks.universe
    with _SEGMENTS_LOCK:
        log = _SEGMENTS.get(universe)
    if log is None:
        log = _LogSegments(universe)
        with _SEGMENTS_LOCK:
            _SEGMENTS[universe] = log
    grain = engine_grain(block)
    return [log.prompt(row, n, block, grain) for row, n in zip(log.rows(blocks.starts).tolist(), prompts.tolist(),
                                                                 strict=True)]


def leading_tokens(prompt: ChainedPrompt, cached: Mapping[int, int]) -> tuple[int, int]:
    """(tokens of the prompt's leading run found in `cached`, keys it reaches): through each hash block whose
    key holds at least the prompt's own tokens of it, into the first that holds fewer; at most prompt.cap."""
    hit, keys, block = 0, prompt.keys, prompt.block
    last = len(keys) - 1
    for j, key in enumerate(keys):
        take = min(cached.get(key, 0), block if j < last else prompt.own(j))  # own() only for the last block
        hit += take
        if take < block:
            break
    hit = min(hit, prompt.cap)
    return hit, -(-hit // prompt.block)  # whole blocks, then at most one in part


def remember(cache: OrderedDict[int, int], prompt: ChainedPrompt) -> None:
    """The prompt's blocks referenced tail first, each holding the most of its tokens seen so far (a partial block
    grows when a longer prompt fills it)."""
    chain, block = prompt.keys, prompt.block
    last = len(chain) - 1
    for j in reversed(range(len(chain))):
        own = block if j < last else prompt.own(j)  # own() only for the last block (the hot path)
        if own:  # a partial block shorter than an engine block is not cached
            key = chain[j]
            if cache.get(key, 0) < own:
                cache[key] = own
            cache.move_to_end(key)


def _reference(cache: OrderedDict[int, int], prompt: ChainedPrompt, capacity_blocks: int) -> None:
    """LRU: reference a prompt's blocks (remember), then evict the least recently used beyond the capacity."""
    remember(cache, prompt)
    while len(cache) > capacity_blocks:
        cache.popitem(last=False)


# ---------------------------------------------------------------- public

def hit_tokens(requests: PromptBlocks, capacity_tokens: int, block_size: int) -> CacheHits:
    """Per request (in the given order), prompt tokens served from the prefix cache: under an unbounded cache,
    and under an LRU cache of `capacity_tokens` (floor(capacity / block_size) blocks).  Raises InputError for a
    negative capacity, a block size below 1 or a hash list of the wrong length."""
    if capacity_tokens < 0:
        raise InputError(f"cache capacity: expected tokens >= 0, got {capacity_tokens}")
    infinite = np.zeros(len(requests), dtype=np.int64)
    lru = np.zeros(len(requests), dtype=np.int64)
    seen: OrderedDict[int, int] = OrderedDict()
    cache: OrderedDict[int, int] = OrderedDict()
    for i, prompt in _walk(requests, block_size):
        infinite[i] = leading_tokens(prompt, seen)[0]
        lru[i] = leading_tokens(prompt, cache)[0]
        remember(seen, prompt)
        _reference(cache, prompt, int(capacity_tokens // block_size))
    return CacheHits(infinite, lru)


def unbounded_share(blocks: BlockIds, prompt_tokens: np.ndarray) -> float:
    """The share of prompt tokens an unbounded prefix cache serves (requests in the given order; what
    prefix_reuse's `share` gives, without its reuse distances).  NaN without prompt tokens."""
    prompts = np.asarray(prompt_tokens, dtype=np.int64)
    seen: OrderedDict[int, int] = OrderedDict()
    reused = 0
    for _, prompt in _walk(PromptBlocks(np.arange(len(prompts), dtype=float), prompts, blocks.hash_ids),
                           blocks.block_size):
        reused += leading_tokens(prompt, seen)[0]
        remember(seen, prompt)
    total = int(prompts.sum())
    return reused / total if total else math.nan


def prefix_reuse(requests: PromptBlocks, block_size: int, cache_tokens: int | None = None) -> PrefixReuse:
    """The share of prompt tokens an unbounded prefix cache serves, and per reused block its reuse distance: the
    cached prompt tokens (full blocks) of the requests that arrived between its previous use and this one.  An
    LRU cache keeps a block while fewer distinct blocks than it holds were referenced since, so a cache of N
    tokens catches every reuse at a distance below N minus the block's own prefix (repeated blocks in between
    count every time: the distance is an upper bound on what LRU needs).  cache_tokens: also give what an LRU
    cache of that many tokens serves (hit_tokens)."""
    last: dict[int, int] = {}  # key -> position (in arrival order) of its last use
    filled: OrderedDict[int, int] = OrderedDict()  # key -> its tokens seen so far
    traffic = [0]  # cached prompt tokens of the requests before each position
    distances: list[int] = []
    reused = 0
    for position, (_, prompt) in enumerate(_walk(requests, block_size)):
        hit, reached = leading_tokens(prompt, filled)
        reused += hit
        distances.extend(traffic[position] - traffic[last[key] + 1] for key in prompt.keys[:reached])
        last.update((key, position) for key in prompt.keys)
        remember(filled, prompt)
        traffic.append(traffic[-1] + prompt.cached_tokens())
    lru = None if cache_tokens is None else int(hit_tokens(requests, cache_tokens, block_size).lru.sum())
    return PrefixReuse(int(np.sum(requests.prompt_tokens)), reused, np.asarray(distances, dtype=np.int64),
                       block_size, cache_tokens, lru)
