"""A route's prefix reuse beside its plan: pure, rows in, frames, text or a chart out.

For a planned online route with prefix structure (a request log with Mooncake `hash_ids` or `session_id`, or a
declared `shared_prefix_tokens`): the share of its prompt tokens an unbounded prefix cache serves, the reuse
distances, and what an LRU cache of one replica's KV cache serves (planner.traffic.prefixes.prefix_reuse, as
`planner traffic --cache-tokens`); the prefix hit rate of the route's one load (planner.traffic.workload.route_load)
on N replicas behind each router, from the fleet simulation the plan sizes with (planner.sizing.sizing.fleet_latency,
as `predict --log --replicas N --router R`); the prefill tokens per second the cache removes; and the other router's
fleet the plan priced (its notes: planner.planning.sim_check.cheaper_router).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd

from planner.engine.transfer_physics import with_host_tier
from planner.latency import DEFAULT_ROUTER, ROUTERS
from planner.planning.sim_check import OtherMemory, OtherRouter, memory_in_notes
from planner.planning.sim_check import router_in_notes as other_router
from planner.sizing.sizing import fleet_latency, search_fleet
from planner.traffic.prefixes import REUSE_QUANTILES, PromptBlocks, percent_text, prefix_reuse, tokens_text
from planner.traffic.routes import Route
from planner.traffic.workload import Requests, route_load, route_log_load
from ui.lengths import recommended_curve

# The most replicas the view simulates on request (each is one fleet simulation of the route's load per router).
MAX_SIMULATED_REPLICAS = 64
# A plan made without a host-memory KV tier to price (the assumptions' host_kv_gib = 0).
NO_HOST_TIER_TEXT = ("No host-memory KV tier was priced (copies of the prefix blocks kept in CPU memory: vLLM's "
                     "CPU KV offloading, LMCache): these hit rates are of each replica's GPU KV cache alone. Plan "
                     "with `--host-kv-gib G` (assumption `host_kv_gib`) to price one per replica; an assumption, "
                     "not measured.")
KINDS = ("the log", "router")  # hit-rate rows: the log's own reuse, or a simulated fleet
KIND_COLOURS = ("#9e9e9e", "#1f77b4")
CHART_WIDTH, ROW_HEIGHT = 420, 22
COMPACT_CHART_WIDTH = 150  # a 390 px phone: the bars beside their labels (as ui.page_base.COMPACT_FACET_WIDTH)


@dataclass(frozen=True)
class PrefixView:
    """A route's prefix reuse and its plan's cache figures.  Shares are 0..1; distances and caches in tokens;
    hit_rates: (router, share of prompt tokens found cached) at `replicas` replicas, empty without a fitted curve
    to simulate; plan_hit_rate NaN when the plan was not checked by simulation."""

    route: str
    source: str
    reuse_share: float
    distance_p50_tokens: float
    distance_p90_tokens: float
    kv_cache_tokens: int | None
    lru_share: float | None
    prompt_tok_per_s: float
    replicas: int
    hit_rates: tuple[tuple[str, float], ...]
    plan_router: str
    plan_hit_rate: float
    plan_replicas: int | None
    plan_usd_per_month: float
    other: OtherRouter | None
    plan_host_gib: float = 0.0  # the host KV tier per replica the plan kept (0: none)
    other_memory: OtherMemory | None = None  # the fleet with the other host-tier setting, as the plan priced it


def declares_prefixes(route_row: Mapping[str, Any]) -> bool:
    """Whether a ROUTES row may carry prefix structure (a request log, or shared_prefix_tokens > 0), read from the
    row alone (a log's own structure is known once it is read: route_prefix)."""
    log, shared = route_row.get("log"), _number(route_row.get("shared_prefix_tokens"))
    return (isinstance(log, str) and bool(log)) or shared > 0


def route_prefix(route_row: Mapping[str, Any], plan_row: Mapping[str, Any], curves: Mapping[Any, Any],
                 replicas: int | None = None) -> PrefixView | None:
    """The prefix view of an online ROUTES row (its `log` a path the planner reads) and its plan row, simulated at
    `replicas` replicas (default: the plan's) behind every router when `curves` holds the plan's curve; None for a
    route without prefix structure (no log with `hash_ids` / `session_id`, no shared_prefix_tokens)."""
    route = Route.from_row(dict(route_row))
    if route.traffic != "online":
        return None
    log, blocks = route_log_load(route)
    load = route_load(route, log, blocks)
    if load.blocks is None:
        return None
    source = load.source if log is not None else (
        f"{load.source}; every prompt starts with the declared {route.shared_prefix_tokens:,}-token shared prefix "
        f"(shared_prefix_tokens; counted in whole blocks of {load.blocks.block_size} tokens)")
    curve = recommended_curve(plan_row, curves)
    host_gib = _number(plan_row.get("host_kv_gib"))
    host_gib = host_gib if host_gib > 0 else 0.0  # blank (NaN) or 0: none
    if curve is not None and host_gib > 0:  # the plan's replicas keep a copy of their blocks in host memory too
        curve = with_host_tier(curve, host_gib) or curve
    kv = None if curve is None else int(curve.caps.kv_cache_tokens)
    reuse = prefix_reuse(PromptBlocks(load.arrival_s, load.input_len, load.blocks.hash_ids), load.blocks.block_size, kv)
    plan_replicas = _count(plan_row.get("replicas"))
    count = int(replicas or plan_replicas or 1)
    hits = () if curve is None else tuple(
        (router, float(fleet_latency(curve, route, count, load, router).prefix_hit_rate)) for router in ROUTERS)
    p50, p90 = (reuse.distance(q) for q in REUSE_QUANTILES)
    return PrefixView(
        route.name, source, reuse.share, p50, p90, kv,
        None if reuse.lru_tokens is None else reuse.lru_tokens / reuse.prompt_tokens, _prompt_rate(load), count, hits,
        str(plan_row.get("router") or DEFAULT_ROUTER), _number(plan_row.get("prefix_hit_rate_pred")), plan_replicas,
        _number(plan_row.get("total_usd_per_month")), other_router(str(plan_row.get("notes") or "")), host_gib,
        memory_in_notes(str(plan_row.get("notes") or "")))


def _prompt_rate(load: Requests) -> float:
    """Prompt tokens per second the load offers (its prompts over its span; NaN for a load of one instant)."""
    span = float(load.arrival_s[-1] - load.arrival_s[0]) if load.arrival_s.size > 1 else 0.0
    return float(load.input_len.sum()) / span if span > 0 else math.nan


def hit_rate_table(view: PrefixView) -> pd.DataFrame:
    """One row per cache: the log's unbounded reuse, an LRU of one replica's KV cache, and each router's fleet
    at view.replicas: cache, kind, hit_rate (0..1), prefill_tok_per_s_saved (hit rate x offered prompt tok/s),
    planned (the plan's router)."""
    rows = [("unbounded cache", KINDS[0], view.reuse_share, False)]
    if view.lru_share is not None and view.kv_cache_tokens is not None:
        rows.append((f"LRU, one replica's KV ({tokens_text(view.kv_cache_tokens)})", KINDS[0],
                     view.lru_share, False))
    rows += [(f"{router} × {view.replicas}", KINDS[1], hit, router == view.plan_router) for router, hit in view.hit_rates]
    table = pd.DataFrame(rows, columns=["cache", "kind", "hit_rate", "planned"])
    table.insert(3, "prefill_tok_per_s_saved", table["hit_rate"] * view.prompt_tok_per_s)
    return table


def hit_rate_chart(table: pd.DataFrame, width: int = CHART_WIDTH) -> alt.LayerChart:
    """Horizontal bars of hit_rate_table's hit rates (grey: the log's own reuse; blue: a simulated fleet; the
    planned router outlined), labelled with the percentage; `width` in pixels (a phone's is narrower)."""
    y = alt.Y("cache:N", sort=None, title=None)
    tooltip = [alt.Tooltip("cache:N"), alt.Tooltip("hit_rate:Q", format=".1%", title="prompt tokens found cached"),
               alt.Tooltip("prefill_tok_per_s_saved:Q", format=",.0f", title="prefill tok/s saved"),
               alt.Tooltip("planned:N", title="the plan's router")]
    base = alt.Chart(table).encode(y=y, x=alt.X("hit_rate:Q", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1]),
                                                title="share of prompt tokens found cached"), tooltip=tooltip)
    bars = base.mark_bar().encode(
        color=alt.Color("kind:N", scale=alt.Scale(domain=list(KINDS), range=list(KIND_COLOURS)), title=None,
                        legend=alt.Legend(orient="bottom")),
        stroke=alt.condition("datum.planned", alt.value("black"), alt.value(None)), strokeWidth=alt.value(2))
    labels = base.mark_text(align="left", dx=3).encode(text=alt.Text("hit_rate:Q", format=".1%"))
    return alt.layer(bars, labels).properties(width=width, height=ROW_HEIGHT * len(table))


def reuse_text(view: PrefixView) -> str:
    """One line: the load's reuse (unbounded share, reuse distances, one replica's LRU) and where it comes from."""
    text = (f"**{percent_text(view.reuse_share)}** of prompt tokens repeat an earlier request's prefix (an unbounded "
            "cache would serve them)")
    if not math.isnan(view.distance_p50_tokens):
        text += (f"; reuse distance p50 {tokens_text(view.distance_p50_tokens)}, p90 {tokens_text(view.distance_p90_tokens)} "
                 "tokens of traffic between a block's uses")
    if view.lru_share is not None and view.kv_cache_tokens is not None:
        text += (f"; an LRU cache of one replica's KV cache ({tokens_text(view.kv_cache_tokens)} tokens) serves "
                 f"**{percent_text(view.lru_share)}**")
    return f"{text}. Load: {view.source}."


def router_text(view: PrefixView) -> str:
    """What the planned router saves or costs: the plan's hit rate and the prefill it removes, then the other
    router's fleet as the plan priced it (or why it is not priced)."""
    planned = (f"The plan: {_replicas(view.plan_replicas)} behind **{view.plan_router}**, "
               f"${view.plan_usd_per_month:,.0f}/month")
    if math.isnan(view.plan_hit_rate):
        return planned + ("; not checked by simulation, so no prefix hit rate and no other router priced yet "
                          "(the checked plan replaces it in seconds).")
    planned += (f", predicted prefix hit rate **{percent_text(view.plan_hit_rate)}**: the cache removes "
                f"{view.plan_hit_rate * view.prompt_tok_per_s:,.0f} of {view.prompt_tok_per_s:,.0f} prompt tokens/s "
                "of prefill.")
    return f"{planned} {_other_text(view)}"


def _other_text(view: PrefixView) -> str:
    other = view.other
    if other is None:
        return "The plan priced no other router for this route."
    if other.replicas is None:
        return f"Behind {other.router}, no fleet holds: {other.reason}."
    hit = "" if other.hit_rate is None else f", prefix hit rate {percent_text(other.hit_rate)}"
    text = f"Behind {other.router}: {_replicas(other.replicas)}, ${other.usd_per_month:,.0f}/month{hit}"
    if other.usd_per_month is None or math.isnan(view.plan_usd_per_month):
        return text + "."
    saved = other.usd_per_month - view.plan_usd_per_month
    if abs(saved) < 0.5:
        return text + f": the same cost (the plan keeps {view.plan_router} on a tie)."
    verb = "saves" if saved > 0 else "costs"
    return text + f": {view.plan_router} {verb} ${abs(saved):,.0f}/month."


@dataclass(frozen=True)
class TierFleet:
    """The plan's option sized with a host-memory KV tier of `gib` GiB per replica behind the plan's router (the
    fleet simulation the plan sizes with, searched from the plan's count): replicas (None: no fleet up to the
    search's ceiling holds), $/month at the plan's price per replica, and its prefix hit rate."""

    gib: float
    replicas: int | None
    usd_per_month: float
    hit_rate: float


def tier_fleet(route_row: Mapping[str, Any], plan_row: Mapping[str, Any], curves: Mapping[Any, Any], gib: float,
               attainment: float) -> TierFleet | None:
    """What a host KV tier of `gib` GiB per replica would buy for an online route with prefix structure (a what-if
    the plan did not price: an assumption, not measured); None without prefix structure or a fitted curve."""
    route = Route.from_row(dict(route_row))
    curve = recommended_curve(plan_row, curves)
    if route.traffic != "online" or curve is None or gib <= 0:
        return None
    load = route_load(route, *route_log_load(route))
    tiered = with_host_tier(curve, gib)
    if load.blocks is None or tiered is None:
        return None
    router = str(plan_row.get("router") or DEFAULT_ROUTER)
    planned = _count(plan_row.get("replicas")) or 1
    search = search_fleet(tiered, route, load, planned, attainment, router)
    count = search.replicas
    per_replica = _number(plan_row.get("gpu_usd_per_month")) / planned
    usd = math.nan if count is None else per_replica * count + _number(plan_row.get("eng_usd_per_month"))
    return TierFleet(gib, count, usd, float(search.report.prefix_hit_rate))


def tier_text(view: PrefixView, fleet: TierFleet) -> str:
    """The what-if tier's fleet beside the plan's."""
    head = f"With a {fleet.gib:g} GiB host KV tier per replica (a what-if here: an assumption, not measured)"
    if fleet.replicas is None:
        return f"{head}, no fleet the search tried holds every window."
    text = (f"{head}: {_replicas(fleet.replicas)} behind {view.plan_router}, ${fleet.usd_per_month:,.0f}/month, "
            f"prefix hit rate {percent_text(fleet.hit_rate)}")
    saved = view.plan_usd_per_month - fleet.usd_per_month
    if math.isnan(saved) or abs(saved) < 0.5:
        return text + ": the same cost as the plan."
    return text + (f": saves ${saved:,.0f}/month against the plan." if saved > 0
                   else f": ${-saved:,.0f}/month more than the plan.")


def memory_text(view: PrefixView) -> str:
    """What a host-memory KV tier saves or costs, as the plan priced it (planner.planning.sim_check.cheaper_memory),
    or how to price one."""
    other = view.other_memory
    if other is None:
        return NO_HOST_TIER_TEXT
    assumed = "an assumption, not measured"
    if view.plan_host_gib > 0:
        head = (f"The plan keeps a **{view.plan_host_gib:g} GiB host KV tier** per replica ({assumed}; `deploy` "
                "writes vLLM's `--kv-offloading-size`).")
        label = "Without it"
    else:
        head = "The plan keeps no host KV tier."
        label = f"With a {other.gib:g} GiB host KV tier per replica ({assumed})"
    if other.replicas is None or other.usd_per_month is None:
        return f"{head} {label}, no fleet holds: {other.reason}."
    hit = "" if other.hit_rate is None else f", prefix hit rate {percent_text(other.hit_rate)}"
    text = f"{head} {label}: {_replicas(other.replicas)}, ${other.usd_per_month:,.0f}/month{hit}"
    if math.isnan(view.plan_usd_per_month):
        return text + "."
    saved = other.usd_per_month - view.plan_usd_per_month
    if abs(saved) < 0.5:
        return text + ": the same cost (the plan keeps no tier on a tie)."
    return text + (f": the tier saves ${saved:,.0f}/month." if view.plan_host_gib > 0
                   else f": ${saved:,.0f}/month more.")


def _replicas(n: int | None) -> str:
    return "? replicas" if n is None else f"{n} replica{'s' if n != 1 else ''}"


def _number(value: object) -> float:
    """A cell as a float; NaN when blank (None, NA, NaN) or not a number."""
    try:
        return math.nan if value is None or pd.isna(value) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _count(value: object) -> int | None:
    number = _number(value)
    return None if math.isnan(number) else int(number)



