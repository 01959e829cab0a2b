"""A route's request lengths beside its plan: pure, frames in, frames or charts out.

For a route with a request log: how its prompt and output lengths spread (quantiles and a histogram on log-spaced
bins), where the recommended curve's profiles stop (longer lengths are predicted by the physics prior, provenance
"physics": planner.engine.curves LENGTH_DIMS) and which prompts no replica brings within the TTFT target
(planner.latency.idle; the plan's ttft_idle_infeasible column counts them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from fleetfacts.schema import DEFAULT_CONFIG
from planner.engine.curves import GroupKey
from planner.latency import idle_prompt_limit
from planner.traffic.routes import Route
from planner.traffic.workload import route_log_requests

# Quantiles of the length table, and their column names (100: the longest).
LENGTH_QUANTILES = {"p50": 50, "p90": 90, "p95": 95, "p99": 99, "max": 100}
# Histogram bins per decade of tokens: ten read a 1k-120k spread without gaps.
BINS_PER_DECADE = 10
REGIONS = ("measured", "physics")  # within the curve's measured lengths, or beyond them
REGION_COLOURS = ("#1f77b4", "#ff7f0e")
PANEL_WIDTH, PANEL_HEIGHT = 300, 180


@dataclass(frozen=True, eq=False)
class RouteLengths:
    """A route's logged request lengths (tokens), the recommended curve's longest measured prompt and output
    (None: no fitted curve, e.g. a transferred option) and the longest prompt an idle replica of it brings within
    the TTFT target (None: every prompt it admits, or no TTFT target)."""

    route: str
    input_len: np.ndarray
    output_len: np.ndarray
    measured_input_max: float | None = None
    measured_output_max: float | None = None
    idle_limit: int | None = None

    @property
    def idle_infeasible(self) -> int:
        return 0 if self.idle_limit is None else int(np.count_nonzero(self.input_len > self.idle_limit))


def route_lengths(route_row: Mapping[str, Any], plan_row: Mapping[str, Any] | None,
                  curves: Mapping[GroupKey, Any]) -> RouteLengths | None:
    """The lengths of a ROUTES row's log (its `log` a path the planner reads) against the plan row's recommended
    curve when `curves` holds it; None for a route without a log."""
    route = Route.from_row(dict(route_row))
    log = route_log_requests(route) if route.traffic == "online" else None
    if log is None:
        return None
    inputs, outputs = (np.asarray(v, dtype=np.int64) for v in log[1])
    curve = recommended_curve(plan_row, curves)
    if curve is None:
        return RouteLengths(route.name, inputs, outputs)
    limit = None if route.slo.ttft_ms is None else idle_prompt_limit(curve, float(route.slo.ttft_ms))
    return RouteLengths(route.name, inputs, outputs, curve.covered.input_len[1], curve.covered.output_len[1], limit)


def recommended_curve(plan_row: Mapping[str, Any] | None, curves: Mapping[GroupKey, Any]) -> Any:
    """The fitted curve a plan row (status ok) recommends, from `curves`; None when not planned or not fitted
    (a transferred option)."""
    if plan_row is None or plan_row.get("status") != "ok":
        return None
    config = plan_row.get("engine_config")
    key = GroupKey(str(plan_row["engine"]), str(plan_row["engine_version"]), str(plan_row["gpu"]),
                   str(plan_row["model"]), str(plan_row["precision"]), int(plan_row["tp"]),
                   config if isinstance(config, str) and config else DEFAULT_CONFIG)
    return curves.get(key)


def quantile_table(lengths: RouteLengths) -> pd.DataFrame:
    """Prompt and output tokens at LENGTH_QUANTILES, and how many requests lie beyond the curve's measured
    lengths (physics) and, for prompts, past the idle TTFT limit."""
    rows = []
    for name, values, measured in (("prompt", lengths.input_len, lengths.measured_input_max),
                                   ("output", lengths.output_len, lengths.measured_output_max)):
        row: dict[str, Any] = {"tokens": name}
        row.update({column: int(round(float(np.percentile(values, q)))) for column, q in LENGTH_QUANTILES.items()})
        row["longest measured"] = "-" if measured is None else f"{measured:,.0f}"
        row["beyond it (physics)"] = "-" if measured is None else int(np.count_nonzero(values > measured))
        rows.append(row)
    return pd.DataFrame(rows).set_index("tokens")


def histogram_table(values: np.ndarray, measured_max: float | None) -> pd.DataFrame:
    """Requests per log-spaced bin of tokens (BINS_PER_DECADE a decade): bin_lo, bin_hi, requests, and region
    (physics when the bin starts beyond `measured_max`)."""
    v = np.asarray(values, dtype=float)
    low, high = math.floor(math.log10(max(float(v.min()), 1.0))), math.log10(float(v.max())) + 1e-9
    edges = 10.0 ** np.arange(low, high + 1.0 / BINS_PER_DECADE, 1.0 / BINS_PER_DECADE)
    counts, _ = np.histogram(v, bins=edges)
    region = [REGIONS[1] if measured_max is not None and lo >= measured_max else REGIONS[0] for lo in edges[:-1]]
    table = pd.DataFrame({"bin_lo": edges[:-1], "bin_hi": edges[1:], "requests": counts, "region": region})
    return table[table["requests"] > 0].reset_index(drop=True)


def lengths_chart(lengths: RouteLengths) -> alt.HConcatChart:
    """Prompt and output histograms side by side on log token axes, coloured measured / physics, with a rule at
    the longest measured length and (prompts) one at the idle TTFT limit."""
    panels = []
    for title, values, measured, limit in (("prompt tokens", lengths.input_len, lengths.measured_input_max,
                                            lengths.idle_limit),
                                           ("output tokens", lengths.output_len, lengths.measured_output_max, None)):
        panels.append(_histogram_panel(histogram_table(values, measured), title, measured, limit))
    return alt.hconcat(*panels)


def _histogram_panel(table: pd.DataFrame, title: str, measured: float | None, limit: int | None) -> alt.LayerChart:
    x = alt.X("bin_lo:Q", scale=alt.Scale(type="log"), title=f"{title} (log scale)")
    bars = alt.Chart(table).mark_bar(opacity=0.85).encode(
        x, x2="bin_hi:Q", y=alt.Y("requests:Q", title="requests"),
        color=alt.Color("region:N", scale=alt.Scale(domain=list(REGIONS), range=list(REGION_COLOURS)),
                        title="the curve's lengths"),
        tooltip=[alt.Tooltip("bin_lo:Q", format=",.0f", title="from"), alt.Tooltip("bin_hi:Q", format=",.0f", title="to"),
                 alt.Tooltip("requests:Q", format=",d"), "region:N"])
    rules = [(measured, "longest measured", "#525252"), (limit, "idle TTFT limit", "#d62728")]
    marks = pd.DataFrame([{"tokens": float(v), "rule": name, "colour": colour} for v, name, colour in rules
                          if v is not None])
    layers: list[alt.Chart] = [bars]
    if not marks.empty:
        layers.append(alt.Chart(marks).mark_rule(strokeDash=[4, 3]).encode(
            x=alt.X("tokens:Q"), color=alt.Color("colour:N", scale=None),
            tooltip=["rule:N", alt.Tooltip("tokens:Q", format=",.0f")]))
    return alt.layer(*layers).properties(width=PANEL_WIDTH, height=PANEL_HEIGHT)


def idle_text(lengths: RouteLengths) -> str:
    """One line on the prompts no replica brings within the TTFT target ('' when there are none)."""
    n = lengths.idle_infeasible
    if not n:
        return ""
    return (f"{n:,} requests ({n / lengths.input_len.size:.2%}) have prompts over {lengths.idle_limit:,} tokens, whose "
            "prefill alone exceeds the TTFT target on an idle replica: they are judged on every target but TTFT.")
