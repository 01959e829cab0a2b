"""Chart tables and Altair charts for the what-if app (pure: frames in, frames or charts out).

Each `*_table` function turns curves, profiles or plan options into a tidy
DataFrame with one row per plotted mark and a `provenance` column
(measured / published / predicted / extrapolated); each `*_chart` function
draws such a frame with typed encodings and tooltips.  Throughput is always
per GPU (replica tok/s / tp), so configurations with different TP compare.
The same provenance is drawn the same way in every chart: measured = filled
circle, published = filled square, predicted = solid line / hollow diamond,
extrapolated = dashed line / hollow triangle.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, TypeVar

import altair as alt
import numpy as np
import pandas as pd

from planner.engine.curves import GroupKey, engine_label, group_key, version_order
from planner.latency.analytic import Offline, Steady, analytic
from planner.latency.closed_loop import benchmark_rounds, rounds_answer
from planner.planning.exports import printable
from planner.sizing.costs import breakeven_updates, monthly_total_vs_updates
from planner.sizing.options import option_label, plan_option

PROVENANCE = ("measured", "published", "predicted", "extrapolated")
PROVENANCE_SHAPES = ("circle", "square", "diamond", "triangle-up")
PROVENANCE_FILLED = {"measured": True, "published": True, "predicted": False, "extrapolated": False}
PROVENANCE_DASH = ([1, 0], [1, 0], [1, 0], [5, 4])
# One hue per engine in every chart: an engine-coloured chart uses the first shade, a chart of several
# configurations of one engine (throughput curves, Pareto options) the next shades of the same hue.
ENGINE_SHADES = {"vllm": ("#1f77b4", "#6baed6", "#08519c", "#4292c6", "#2171b5", "#9ecae1"),
                 "trtllm": ("#76b900", "#31a354", "#006d2c", "#a1d99b", "#41ab5d", "#4d7a00"),
                 "sglang": ("#d62728", "#fb6a4a", "#a50f15", "#ef3b2c", "#cb181d", "#fc9272"),
                 "nim": ("#9467bd", "#6a51a3", "#bcbddc", "#807dba", "#54278f", "#9e9ac8")}
OTHER_SHADES = ("#7f7f7f", "#525252", "#a6a6a6", "#bdbdbd", "#636363", "#969696")
ENGINE_COLOURS = {engine: shades[0] for engine, shades in ENGINE_SHADES.items()}
# Legend swatches are drawn solid whatever the marks' opacity (a 12% band made a pale, unreadable swatch).
SOLID_SWATCH = 1.0
# Sweeps: this many loads per fitted line (log-spaced), enough for a smooth curve on screen.
SWEEP_POINTS = 24
# Offline sweeps go this many engine caps past the largest concurrent batch (saturation shows).
OFFLINE_SWEEP_CAPS = 4
# The TensorRT-LLM advantage commonly claimed for steady batches ("30-50% more tokens per GPU").
CLAIMED_RATIO = (1.3, 1.5)
# Options shown per route in the cost chart (cheapest feasible first); more is unreadable.
MAX_OPTIONS_PER_ROUTE = 8
CHART_HEIGHT = 320
# Throughput axes end this far above the highest fitted or profiled value (bands are clipped there).
Y_HEADROOM = 1.15


def _engine_colour(engines: Iterable[str] | None = None) -> alt.Scale:
    """Fixed colour per engine; only the engines present get a legend entry."""
    present = set(engines) if engines is not None else set(ENGINE_COLOURS)
    domain = [e for e in ENGINE_COLOURS if e in present] + sorted(present - set(ENGINE_COLOURS))
    return alt.Scale(domain=domain, range=[ENGINE_COLOURS.get(e, OTHER_SHADES[0]) for e in domain])


def legend(**kwargs) -> alt.Legend:
    """A legend with solid swatches (SOLID_SWATCH)."""
    return alt.Legend(symbolOpacity=SOLID_SWATCH, **kwargs)


def engine_color(engines: Iterable[str]) -> alt.Color:
    """Colour by engine (its first shade), with a solid-swatch legend."""
    return alt.Color("engine:N", scale=_engine_colour(engines), title="engine", legend=legend())


def series_scale(engine_of: Mapping[str, str]) -> alt.Scale:
    """Colours for lines named by `engine_of` (line -> engine): each line a shade of its engine's hue, the lines
    of one engine in name order (shades repeat after six lines of one engine)."""
    domain, colours = [], []
    for engine in sorted(set(engine_of.values()), key=lambda e: (e not in ENGINE_SHADES, e)):
        shades = ENGINE_SHADES.get(engine, OTHER_SHADES)
        lines = sorted(name for name, e in engine_of.items() if e == engine)
        domain += lines
        colours += [shades[i % len(shades)] for i in range(len(lines))]
    return alt.Scale(domain=domain, range=colours)


ChartT = TypeVar("ChartT", bound=alt.TopLevelMixin)


# Longest legend label, px, on a phone (390 px less the symbol and the page's padding).
COMPACT_LEGEND_LIMIT = 250
# Longest label, px, of a route name in a chart on a desk and on a phone (Vega cuts it with an ellipsis).
ROUTE_LABEL_LIMIT = 220
COMPACT_LABEL_LIMIT = 150  # the header starts after the option labels (~170 px): 390 px in all


def stretches(chart: object) -> bool:
    """Can the chart take the page's width?  Not a concatenation: each of its panels would take it whole."""
    return not isinstance(chart, alt.ConcatChart | alt.VConcatChart | alt.HConcatChart)


def fit(chart: ChartT, compact: bool) -> ChartT:
    """`chart` for a narrow (phone) page when `compact`: legends below the plot, one entry per line."""
    return chart.configure_legend(orient="bottom", columns=1, labelLimit=300) if compact else chart


def _shape() -> alt.Scale:
    return alt.Scale(domain=list(PROVENANCE), range=list(PROVENANCE_SHAPES))


def _dash() -> alt.Scale:
    return alt.Scale(domain=list(PROVENANCE), range=list(PROVENANCE_DASH))


def _per_gpu(tok_s: float, tp: int) -> float:
    return float(tok_s) / max(int(tp), 1)


# ---------------------------------------------------------------- throughput curves

def available_shapes(profiles: pd.DataFrame, model: str, mode: str = "offline") -> list[tuple[int, int]]:
    """(input_len, output_len) pairs profiled for `model` in `mode`: most measured points first, then most points."""
    rows = profiles[(profiles["model"] == model) & (profiles["mode"] == mode)]
    counts = rows.assign(measured=rows["provenance"] == "measured").groupby(["input_len", "output_len"]).agg(
        measured=("measured", "sum"), points=("measured", "size"))
    counts = counts.sort_values(["measured", "points"], ascending=False, kind="stable")
    return [(int(i), int(o)) for i, o in counts.index]


def newest_versions(keys: Iterable[GroupKey]) -> list[GroupKey]:
    """Only the newest engine version of each (engine, config, gpu, model, precision, tp).

    The config is part of the slot: tuned and default settings are not versions of each
    other, so the newest tuned curve is drawn beside the newest default one.
    """
    newest: dict[tuple[str, str, str, str, str, int], GroupKey] = {}
    for key in keys:
        slot = (key.engine, key.config, key.gpu, key.model, key.precision, key.tp)
        if slot not in newest or version_order(key.engine_version) > version_order(newest[slot].engine_version):
            newest[slot] = key
    return list(newest.values())


def sweep_loads(curve, input_len: float, output_len: float, mode: str, points: int = SWEEP_POINTS) -> np.ndarray:
    """Log-spaced batch sizes (offline) or concurrencies up to and past the engine's cap."""
    cap = max(int(curve.max_batch(input_len, output_len)), 1)
    top = cap * OFFLINE_SWEEP_CAPS if mode == "offline" else cap
    return np.unique(np.round(np.geomspace(1, max(top, 2), points)).astype(int))


def throughput_table(curves: Mapping, model: str, input_len: float, output_len: float, mode: str = "offline",
                     keys: Iterable | None = None) -> pd.DataFrame:
    """Fitted tok/s per GPU vs batch size or concurrency, one line per curve, with its interval."""
    rows = []
    for key in keys if keys is not None else curves:
        curve = curves[key]
        if key.model != model:
            continue
        for load in sweep_loads(curve, input_len, output_len, mode):
            pred = analytic(curve, Offline(input_len, output_len, int(load)) if mode == "offline"
                            else Steady(input_len, output_len, float(load))).prediction
            rows.append({**_key_columns(key), "load": float(load),
                         "tok_s_per_gpu": _per_gpu(pred.output_tok_per_s, key.tp),
                         "low": _per_gpu(pred.low, key.tp), "high": _per_gpu(pred.high, key.tp),
                         "provenance": "extrapolated" if pred.extrapolated else "predicted"})
    return _bridge_segments(pd.DataFrame(rows, columns=[*_KEY_COLUMNS, "load", "tok_s_per_gpu", "low", "high",
                                                        "provenance"]))


_KEY_COLUMNS = ("series", "engine", "engine_version", "config", "gpu", "precision", "tp")


def _key_columns(key) -> dict:
    return {"series": key.label(), "engine": key.engine, "engine_version": key.engine_version,
            "config": key.config, "gpu": key.gpu, "precision": key.precision, "tp": int(key.tp)}


def _bridge_segments(table: pd.DataFrame) -> pd.DataFrame:
    """Repeat the point where a line turns from predicted to extrapolated, so the segments join."""
    if table.empty:
        return table
    extra = []
    for _, line in table.groupby("series", sort=False):
        changes = line["provenance"].ne(line["provenance"].shift()) & line.index.isin(line.index[1:])
        for index in line.index[changes]:
            bridge = line.loc[index].copy()
            bridge["provenance"] = line["provenance"].shift().loc[index]
            extra.append(bridge)
    if not extra:
        return table
    return pd.concat([table, pd.DataFrame(extra)]).sort_values(["series", "load"], kind="stable") \
        .reset_index(drop=True)


def profile_points(profiles: pd.DataFrame, model: str, input_len: float, output_len: float,
                   mode: str = "offline") -> pd.DataFrame:
    """Measured and published points at exactly this shape, tok/s per GPU, with their source."""
    column = "batch_size" if mode == "offline" else "concurrency"
    rows = profiles[(profiles["model"] == model) & (profiles["mode"] == mode)
                    & (profiles["input_len"] == input_len) & (profiles["output_len"] == output_len)
                    & profiles["output_tok_per_s"].notna() & profiles[column].notna()]
    out = pd.DataFrame({
        "series": [group_key(r).label() for _, r in rows.iterrows()], "engine": rows["engine"].values,
        "gpu": rows["gpu"].values, "tp": rows["tp"].astype(int).values, "load": rows[column].astype(float).values,
        "tok_s_per_gpu": (rows["output_tok_per_s"] / rows["tp"].astype(float)).values,
        "provenance": rows["provenance"].values, "source": rows["source"].values,
    })
    return out


def throughput_chart(fitted: pd.DataFrame, points: pd.DataFrame, mode: str = "offline",
                     legend_columns: int = 2, compact: bool = False) -> alt.Chart:
    """Fitted lines (dashed where extrapolated) with interval bands inside the measured range,
    and measured/published points.  `compact` (a phone): the series legend only, its labels cut to the page (the
    caption says what dashes and point shapes mean)."""
    extra_legend = None if compact else legend()
    x_title = "batch size (requests submitted at once)" if mode == "offline" else "concurrency (requests in flight)"
    x = alt.X("load:Q", scale=alt.Scale(type="log"), title=x_title)
    top = Y_HEADROOM * max([*fitted["tok_s_per_gpu"], *points["tok_s_per_gpu"], 1.0])
    y = alt.Y("tok_s_per_gpu:Q", title="output tokens/s per GPU", scale=alt.Scale(domain=[0, top], clamp=True))
    engine_of = {**dict(zip(points["series"], points["engine"], strict=True)),
                 **dict(zip(fitted["series"], fitted["engine"], strict=True))}
    colour = alt.Color("series:N", title="engine / GPU / model", scale=series_scale(engine_of),
                       legend=legend(orient="bottom", columns=legend_columns,
                                     labelLimit=COMPACT_LEGEND_LIMIT if compact else 360))
    inside = fitted[fitted["provenance"] == "predicted"]  # extrapolated intervals would swamp the chart
    # Every layer carries the same colour encoding, legend included: a layer with legend=None
    # beside one with a legend makes Vega-Lite drop the series legend ('Conflicting legend property').
    band = alt.Chart(inside.assign(high=inside["high"].clip(upper=top))).mark_area(opacity=0.12, clip=True).encode(
        x=x, y=alt.Y("low:Q", scale=alt.Scale(domain=[0, top], clamp=True)), y2="high:Q",
        color=colour, detail="series:N")
    line = alt.Chart(fitted).mark_line(strokeWidth=2).encode(
        x=x, y=y, color=colour, strokeDash=alt.StrokeDash("provenance:N", scale=_dash(), title="line", legend=extra_legend),
        detail="series:N",
        tooltip=[alt.Tooltip("series:N"), alt.Tooltip("load:Q", format=",.0f"),
                 alt.Tooltip("tok_s_per_gpu:Q", format=",.0f", title="tok/s per GPU"),
                 alt.Tooltip("low:Q", format=",.0f"), alt.Tooltip("high:Q", format=",.0f"),
                 alt.Tooltip("provenance:N")])
    marks = alt.Chart(points).mark_point(size=70, filled=True, opacity=0.95).encode(
        x=x, y=y, color=colour, shape=alt.Shape("provenance:N", scale=_shape(), title="point", legend=extra_legend),
        tooltip=[alt.Tooltip("series:N"), alt.Tooltip("load:Q", format=",.0f"),
                 alt.Tooltip("tok_s_per_gpu:Q", format=",.0f", title="tok/s per GPU"),
                 alt.Tooltip("provenance:N"), alt.Tooltip("source:N")])
    return alt.layer(band, line, marks).resolve_scale(color="shared").properties(height=CHART_HEIGHT + 60)


# ---------------------------------------------------------------- engine head-to-head

def head_to_head_table(curves: Mapping, profiles: pd.DataFrame, baseline: str = "vllm",
                       challenger: str = "trtllm") -> pd.DataFrame:
    """Same GPU, model, precision, input/output lengths: the challenger's published saturated
    throughput beside the baseline's (measured here where that shape was run, else predicted
    from its curve).  One row per engine per shape; `ratio` = challenger / baseline per GPU.

    Each engine is compared at its best: where profiles of several configs (default, tuned)
    cover a shape, the faster one is taken, and its `config` column says which settings it assumes.
    """
    published = _newest_published(profiles, challenger)
    rows = []
    for r in published.itertuples():
        base = _baseline_at(curves, profiles, baseline, r)
        if base is None:
            continue
        challenger_tok = _per_gpu(r.output_tok_per_s, r.tp)
        ratio = challenger_tok / base["tok_s_per_gpu"]
        shape = {"gpu": r.gpu, "model": r.model, "precision": r.precision,
                 "input_len": int(r.input_len), "output_len": int(r.output_len),
                 "shape": f"{int(r.input_len)}/{int(r.output_len)}", "ratio": ratio}
        rows.append({**shape, "engine": challenger, "engine_version": r.engine_version, "config": r.config,
                     "tp": int(r.tp), "tok_s_per_gpu": challenger_tok, "provenance": r.provenance, "source": r.source})
        rows.append({**shape, **base})
    return pd.DataFrame(rows, columns=["gpu", "model", "precision", "input_len", "output_len", "shape", "ratio",
                                       "engine", "engine_version", "config", "tp", "tok_s_per_gpu", "provenance",
                                       "source"])


def _newest_published(profiles: pd.DataFrame, engine: str) -> pd.DataFrame:
    """Per shape, the newest version's published point (the fastest of its configs and TPs)."""
    rows = profiles[(profiles["engine"] == engine) & (profiles["provenance"] == "published")
                    & (profiles["mode"] == "offline") & profiles["output_tok_per_s"].notna()].copy()
    if rows.empty:
        return rows
    rows["_v"] = rows["engine_version"].map(version_order)
    rows = rows.sort_values(["_v", "output_tok_per_s"], kind="stable")
    shape = ["gpu", "model", "precision", "input_len", "output_len"]
    return rows.groupby(shape, sort=True).tail(1).sort_values(shape, kind="stable").drop(columns="_v")


def _baseline_at(curves: Mapping, profiles: pd.DataFrame, engine: str, r) -> dict | None:
    """The baseline engine's best per-GPU throughput at r's shape: measured if run, else predicted."""
    same = profiles[(profiles["engine"] == engine) & (profiles["mode"] == "offline")
                    & (profiles["gpu"] == r.gpu) & (profiles["model"] == r.model)
                    & (profiles["precision"] == r.precision) & (profiles["input_len"] == r.input_len)
                    & (profiles["output_len"] == r.output_len) & profiles["output_tok_per_s"].notna()]
    if not same.empty:
        # The best point over every version, TP and config: a tuned profile wins where it is faster.
        best = same.assign(per_gpu=same["output_tok_per_s"] / same["tp"]).sort_values("per_gpu").iloc[-1]
        return {"engine": engine, "engine_version": best.engine_version, "config": best.config, "tp": int(best.tp),
                "tok_s_per_gpu": float(best.per_gpu), "provenance": best.provenance, "source": best.source}
    return _predicted_baseline(curves, engine, r)


def _predicted_baseline(curves: Mapping, engine: str, r) -> dict | None:
    """The newest version's curve with the fewest GPUs per replica, predicting r's shape saturated.

    Between that version's configs (default, tuned, ...) the faster prediction is taken, as the
    measured branch takes the faster point: the two configs never overwrite each other silently,
    and the row's config names the settings the number assumes.
    """
    keys = [k for k in curves if (k.engine, k.gpu, k.model, k.precision) == (engine, r.gpu, r.model, r.precision)]
    if not keys:
        return None
    preds = {k: curves[k].saturated(float(r.input_len), float(r.output_len)) for k in keys}
    key = max(keys, key=lambda k: (version_order(k.engine_version), -k.tp, preds[k].output_tok_per_s))
    return {"engine": engine, "engine_version": key.engine_version, "config": key.config, "tp": int(key.tp),
            "tok_s_per_gpu": _per_gpu(preds[key].output_tok_per_s, key.tp), "provenance": preds[key].provenance,
            "source": f"predicted from the fitted curve {key.label()}"}


def head_to_head_summary(table: pd.DataFrame, challenger: str = "trtllm") -> dict[str, float]:
    """Ratio statistics over the compared shapes, and how many fall in the claimed 30-50% band."""
    ratios = table.loc[table["engine"] == challenger, "ratio"].astype(float)
    measured = table[(table["engine"] != challenger) & (table["provenance"] == "measured")]
    if ratios.empty:
        return {"shapes": 0.0}
    low, high = CLAIMED_RATIO
    return {"shapes": float(len(ratios)), "baseline_measured": float(len(measured)),
            "median_ratio": float(ratios.median()), "min_ratio": float(ratios.min()),
            "max_ratio": float(ratios.max()), "in_claimed_band": float(((ratios >= low) & (ratios <= high)).sum()),
            "above_claimed_band": float((ratios > high).sum()), "below_claimed_band": float((ratios < low).sum())}


def head_to_head_chart(table: pd.DataFrame) -> alt.Chart:
    """Grouped bars per shape (tok/s per GPU), hatched by provenance, with the ratio written above."""
    base = alt.Chart(table).encode(x=alt.X("shape:N", title="input/output tokens", sort=None,
                                           axis=alt.Axis(labelAngle=0)))
    bars = base.mark_bar().encode(
        xOffset=alt.XOffset("engine:N"), y=alt.Y("tok_s_per_gpu:Q", title="output tokens/s per GPU"),
        color=engine_color(table["engine"]),
        opacity=alt.Opacity("provenance:O", scale=alt.Scale(domain=list(PROVENANCE), range=[1.0, 0.85, 0.45, 0.3]),
                            title="number is", legend=alt.Legend(symbolType="square", symbolFillColor="#4c78a8",
                                                                 symbolStrokeColor="#4c78a8")),
        tooltip=[alt.Tooltip("gpu:N"), alt.Tooltip("model:N"), alt.Tooltip("precision:N"), alt.Tooltip("shape:N"),
                 alt.Tooltip("engine:N"), alt.Tooltip("engine_version:N"), alt.Tooltip("config:N"),
                 alt.Tooltip("tp:Q"), alt.Tooltip("tok_s_per_gpu:Q", format=",.0f", title="tok/s per GPU"),
                 alt.Tooltip("provenance:N"), alt.Tooltip("source:N")])
    ratio = table.drop_duplicates(["gpu", "model", "precision", "shape"]).assign(
        label=lambda d: [f"×{v:.2f}" for v in d["ratio"]], top=table.groupby("shape")["tok_s_per_gpu"].transform("max"))
    text = alt.Chart(ratio).mark_text(dy=-8, fontWeight="bold").encode(
        x=alt.X("shape:N", sort=None), y=alt.Y("top:Q"), text="label:N",
        tooltip=[alt.Tooltip("ratio:Q", format=".2f", title="TensorRT-LLM / vLLM per GPU")])
    return alt.layer(bars, text).properties(height=CHART_HEIGHT)


# ---------------------------------------------------------------- latency vs throughput

def frontier_table(curves: Mapping, model: str, input_len: float, output_len: float,
                   keys: Iterable | None = None) -> pd.DataFrame:
    """Predicted mean TPOT vs tok/s per GPU over concurrency, per curve; `frontier` marks the
    points no other configuration of the same engine beats on both axes."""
    rows = []
    for key in keys if keys is not None else curves:
        curve = curves[key]
        if key.model != model:
            continue
        for c in sweep_loads(curve, input_len, output_len, "concurrency"):
            pred = analytic(curve, Steady(input_len, output_len, float(c))).prediction
            rows.append({**_key_columns(key), "concurrency": float(c), "tpot_ms": pred.tpot_ms,
                         "tok_s_per_gpu": _per_gpu(pred.output_tok_per_s, key.tp),
                         "provenance": "extrapolated" if pred.extrapolated else "predicted",
                         "latency_basis": "fitted to latency measurements" if curve.has_latency
                         else "predicted without latency measurements"})
    table = pd.DataFrame(rows, columns=[*_KEY_COLUMNS, "concurrency", "tpot_ms", "tok_s_per_gpu", "provenance",
                                        "latency_basis"])
    table["frontier"] = _pareto(table)
    return table


def _pareto(table: pd.DataFrame) -> pd.Series:
    """True where no point of the same engine has both more tok/s per GPU and lower TPOT."""
    flags = pd.Series(False, index=table.index)
    for _, group in table.groupby("engine"):
        ordered = group.sort_values(["tok_s_per_gpu", "tpot_ms"], ascending=[False, True])
        best_tpot = math.inf
        for index, tpot in ordered["tpot_ms"].items():
            if tpot < best_tpot:
                flags[index] = True
                best_tpot = tpot
    return flags


FRONTIER_LINES = ("one configuration", "engine frontier")


def frontier_chart(table: pd.DataFrame, tpot_slo_ms: float | None = None, compact: bool = False) -> alt.Chart:
    """Thin lines per configuration, a thick line per engine along its frontier, the TPOT SLO as a rule.
    `compact` (a phone): the engine legend only (the caption says what thin, thick and dashed mean)."""
    extra_legend = None if compact else legend()
    x = alt.X("tok_s_per_gpu:Q", title="output tokens/s per GPU")
    y = alt.Y("tpot_ms:Q", title="mean TPOT, ms (lower is better)", scale=alt.Scale(type="log"))
    tooltip = [alt.Tooltip("series:N"), alt.Tooltip("concurrency:Q", format=",.0f"),
               alt.Tooltip("tok_s_per_gpu:Q", format=",.0f", title="tok/s per GPU"),
               alt.Tooltip("tpot_ms:Q", format=".1f"), alt.Tooltip("provenance:N"), alt.Tooltip("latency_basis:N")]
    # One colour encoding (with its legend) in both layers, and a legend for what thin and thick mean.
    colour = engine_color(table["engine"])
    width = alt.StrokeWidth("line:O", scale=alt.Scale(domain=list(FRONTIER_LINES), range=[1, 3]), title="line",
                          legend=extra_legend)
    configs = alt.Chart(table.assign(line=FRONTIER_LINES[0])).mark_line(opacity=0.35).encode(
        x=x, y=y, color=colour, strokeWidth=width, detail="series:N", order="concurrency:Q",
        strokeDash=alt.StrokeDash("provenance:N", scale=_dash(), title="curve is", legend=extra_legend),
        tooltip=tooltip)
    front = alt.Chart(table[table["frontier"]].assign(line=FRONTIER_LINES[1])).mark_line(point=True).encode(
        x=x, y=y, color=colour, strokeWidth=width, detail="engine:N", order="tok_s_per_gpu:Q", tooltip=tooltip)
    layers = [configs, front]
    if tpot_slo_ms and math.isfinite(tpot_slo_ms):
        slo = pd.DataFrame({"tpot_ms": [tpot_slo_ms], "label": [f"TPOT SLO {tpot_slo_ms:g} ms"]})
        layers.append(alt.Chart(slo).mark_rule(color="#c0392b", strokeDash=[3, 3]).encode(y="tpot_ms:Q"))
        layers.append(alt.Chart(slo).mark_text(align="left", dx=4, dy=-6, color="#c0392b").encode(
            y="tpot_ms:Q", text="label:N", x=alt.value(4)))
    return alt.layer(*layers).properties(height=CHART_HEIGHT)


# ---------------------------------------------------------------- Pareto per route (aiconfigurator's view)

MS_PER_S = 1000.0


def pareto_table(curves: Mapping, options: pd.DataFrame, route: str, model: str, input_len: float,
                 output_len: float, per_route: int = MAX_OPTIONS_PER_ROUTE) -> pd.DataFrame:
    """Per option of a route (its `per_route` cheapest feasible ones), tok/s per GPU against tok/s
    per user (1000 / mean TPOT) over concurrency, at the route's mean lengths, with the mean TTFT: each point is
    a benchmark's closed loop simulated request by request, as `predict --concurrency C --closed-loop rounds`
    runs it (planner.latency.closed_loop); `frontier` marks the points no other option beats on both axes. An
    option names no model: its curve is the one of the route's `model`."""
    by_label = {option_label(k): k for k in curves if k.model == model}
    chosen = _route_options(options, route, per_route)
    rows = []
    for option in chosen["option"]:
        key = by_label.get(option)
        if key is not None:
            rows += _pareto_rows(option, key, curves[key], input_len, output_len)
    table = pd.DataFrame(rows, columns=PARETO_COLUMNS)
    table["frontier"] = _dominates_none(table)
    return table


PARETO_COLUMNS = ["option", "engine", "gpu", "tp", "concurrency", "ttft_ms", "tpot_ms", "tok_s_per_user",
                  "tok_s_per_gpu", "provenance"]


def _pareto_rows(option: str, key: GroupKey, curve, input_len: float, output_len: float) -> list[dict]:
    """One option's points over concurrency, each the closed loop `predict --closed-loop rounds` simulates."""
    rows = []
    for c in sweep_loads(curve, input_len, output_len, "concurrency"):
        pred = rounds_answer(curve, benchmark_rounds(input_len, output_len, int(c))).prediction
        if not pred.tpot_ms or not pred.tpot_ms > 0:
            continue
        rows.append({"option": option, "engine": key.engine, "gpu": key.gpu, "tp": int(key.tp),
                     "concurrency": float(c), "ttft_ms": pred.ttft_ms, "tpot_ms": pred.tpot_ms,
                     "tok_s_per_user": MS_PER_S / pred.tpot_ms,
                     "tok_s_per_gpu": _per_gpu(pred.output_tok_per_s, key.tp),
                     "provenance": "extrapolated" if pred.extrapolated else "predicted"})
    return rows


def _route_options(options: pd.DataFrame, route: str, per_route: int) -> pd.DataFrame:
    ok = options[(options["route"] == route) & options["feasible"].astype(bool)]
    return ok.sort_values("total_usd_per_month", kind="stable").head(per_route)


def _dominates_none(table: pd.DataFrame) -> pd.Series:
    """True where no point has both more tok/s per user and more tok/s per GPU."""
    flags = pd.Series(False, index=table.index)
    best_gpu = -math.inf
    for index, per_gpu in table.sort_values(["tok_s_per_user", "tok_s_per_gpu"],
                                            ascending=[False, False])["tok_s_per_gpu"].items():
        if per_gpu > best_gpu:
            flags[index] = True
            best_gpu = per_gpu
    return flags


def operating_points(options: pd.DataFrame, plan: pd.DataFrame, route: str,
                     per_route: int = MAX_OPTIONS_PER_ROUTE) -> pd.DataFrame:
    """Where the plan runs each option of a route at the route's peak: the requests in flight per replica,
    the predicted TPOT at the SLO percentile and the output tok/s per GPU it serves (peak utilisation x the
    low end of a replica's capacity, as the plan sized it); `recommended` marks the plan's choice."""
    shown = _route_options(options, route, per_route)
    ok = plan[(plan["route"] == route) & (plan["status"] == "ok")].to_dict("records")
    choice = plan_option(ok[0]) if ok else None
    tpot = pd.to_numeric(shown["tpot_pred_ms"], errors="coerce")
    out = pd.DataFrame({
        "option": shown["option"].values, "engine": shown["engine"].values,
        "concurrency": pd.to_numeric(shown["in_flight_p99"], errors="coerce").values,
        "tpot_ms": tpot.values, "tok_s_per_user": (MS_PER_S / tpot).values,
        "tok_s_per_gpu": (pd.to_numeric(shown["peak_utilisation"], errors="coerce")
                          * pd.to_numeric(shown["replica_output_tok_per_s_low"], errors="coerce")
                          / shown["tp"].astype(float)).values,
        "total_usd_per_month": shown["total_usd_per_month"].astype(float).values,
        "recommended": (shown["option"] == choice).values})
    return out[np.isfinite(out["tok_s_per_user"]) & np.isfinite(out["tok_s_per_gpu"])].reset_index(drop=True)


def pareto_chart(table: pd.DataFrame, points: pd.DataFrame, tpot_slo_ms: float | None = None,
                 legend_columns: int = 2, compact: bool = False) -> alt.Chart:
    """One line per option (named in the legend), the Pareto frontier over all of them, each
    option's operating point, the chosen one ringed (and labelled, except on a phone, where the label would run
    off the page: the legend and tooltip name it), and the TPOT SLO as tok/s per user."""
    x = alt.X("tok_s_per_user:Q", title="output tokens/s per user (1000 / mean TPOT; faster →)",
              scale=alt.Scale(type="log"))
    y = alt.Y("tok_s_per_gpu:Q", title="output tokens/s per GPU")
    engine_of = {**dict(zip(points["option"], points["engine"], strict=True)),
                 **dict(zip(table["option"], table["engine"], strict=True))}
    colour = alt.Color("option:N", title="option", scale=series_scale(engine_of),
                       legend=legend(orient="bottom", columns=legend_columns,
                                     labelLimit=COMPACT_LEGEND_LIMIT if compact else 360))
    # On a phone the legends beside the options' one would line up past the page's edge: the caption says
    # what the band, the dots, the ring and the dashes mean.
    extra_legend = None if compact else legend()
    tooltip = [alt.Tooltip("option:N"), alt.Tooltip("concurrency:Q", format=",.0f"),
               alt.Tooltip("tpot_ms:Q", format=".1f", title="mean TPOT ms"),
               alt.Tooltip("tok_s_per_user:Q", format=",.1f", title="tok/s per user"),
               alt.Tooltip("tok_s_per_gpu:Q", format=",.0f", title="tok/s per GPU")]
    lines = alt.Chart(table).mark_line(strokeWidth=2, opacity=0.8).encode(
        x=x, y=y, color=colour, detail="option:N", order="concurrency:Q",
        strokeDash=alt.StrokeDash("provenance:N", scale=_dash(), title="curve is", legend=extra_legend),
        tooltip=[*tooltip, alt.Tooltip("ttft_ms:Q", format=",.1f", title="mean TTFT ms"), alt.Tooltip("provenance:N")])
    front = alt.Chart(table[table["frontier"]].assign(line="Pareto frontier")).mark_line(
        strokeWidth=5, opacity=0.25, color="black").encode(
        x=x, y=y, order="tok_s_per_user:Q", strokeWidth=alt.StrokeWidth(
            "line:O", scale=alt.Scale(domain=["Pareto frontier"], range=[6]), title="line", legend=extra_legend))
    marks = alt.Chart(points.assign(point=np.where(points["recommended"], "chosen", "other option"))).mark_point(
        filled=True).encode(
        x=x, y=y, color=colour,
        size=alt.Size("point:O", scale=alt.Scale(domain=["chosen", "other option"], range=[260, 50]),
                      title="operating point", legend=extra_legend),
        tooltip=[*tooltip, alt.Tooltip("total_usd_per_month:Q", format="$,.0f", title="$/month")])
    layers = [front, lines, marks]
    chosen = points[points["recommended"]]
    if not chosen.empty:
        layers.append(alt.Chart(chosen).mark_point(size=520, color="black", strokeWidth=2).encode(x=x, y=y))
    if not chosen.empty and not compact:
        layers.append(alt.Chart(chosen.assign(label=[f"chosen: {o}" for o in chosen["option"]])).mark_text(
            align="left", dx=16, dy=-14, fontWeight="bold", color="black").encode(x=x, y=y, text="label:N"))
    if tpot_slo_ms and math.isfinite(tpot_slo_ms):
        slo = pd.DataFrame({"tok_s_per_user": [MS_PER_S / tpot_slo_ms],
                            "label": [f"TPOT SLO {tpot_slo_ms:g} ms = {MS_PER_S / tpot_slo_ms:.3g} tok/s per user"]})
        layers.append(alt.Chart(slo).mark_rule(color="#c0392b", strokeDash=[3, 3]).encode(x="tok_s_per_user:Q"))
        layers.append(alt.Chart(slo).mark_text(align="left", dx=4, dy=8, color="#c0392b",
                                               limit=COMPACT_LEGEND_LIMIT if compact else 0).encode(
            x="tok_s_per_user:Q", y=alt.value(0), text="label:N"))
    return alt.layer(*layers).properties(height=CHART_HEIGHT + 60)


def pareto_note(table: pd.DataFrame, points: pd.DataFrame, passed: Mapping[str, str] | None = None) -> str:
    """Why the chosen operating point is off the Pareto frontier ('' when nothing beats it on both axes): the
    option above it was passed over for a reason of its own (`passed`: option -> why, from passed_over), or the
    frontier weighs throughput per GPU only while the plan chose on cost per month at the route's SLO and peak
    load."""
    chosen = points[points["recommended"]]
    if chosen.empty or table.empty:
        return ""
    c = chosen.iloc[0]
    better = table[(table["tok_s_per_user"] >= c["tok_s_per_user"]) & (table["tok_s_per_gpu"] > c["tok_s_per_gpu"])]
    if better.empty:
        return ""
    best = better.loc[better["tok_s_per_gpu"].idxmax()]
    where = (f"its own curve reaches {best['tok_s_per_gpu']:,.0f} tok/s per GPU at that speed per user (more "
             "requests in flight per replica)" if best["option"] == c["option"] else
             f"{best['option']} reaches {best['tok_s_per_gpu']:,.0f} tok/s per GPU at that speed per user")
    head = f"The chosen point ({c['option']}, {c['tok_s_per_gpu']:,.0f} tok/s per GPU) is below the frontier: {where}."
    why = (passed or {}).get(str(best["option"]))
    if why:
        return f"{head} It was {why}."
    return (f"{head} The frontier ignores what the choice was made on: the cheapest $/month (GPU price and "
            "engineering) that meets the route's SLO percentile at its peak load, with whole replicas, so a "
            "replica keeps headroom off-peak.")


# ---------------------------------------------------------------- cost per route by option

def option_costs_table(options: pd.DataFrame, plan: pd.DataFrame,
                       per_route: int = MAX_OPTIONS_PER_ROUTE) -> pd.DataFrame:
    """The cheapest feasible options per route (the recommendation flagged), GPU and engineering $ split."""
    ok = options[options["feasible"].astype(bool)].copy()
    ok = ok.sort_values(["route", "total_usd_per_month"], kind="stable").groupby("route").head(per_route)
    chosen = {(r["route"], plan_option(r)) for r in plan[plan["status"] == "ok"].to_dict("records")}
    ok["recommended"] = [(r, o) in chosen for r, o in zip(ok["route"], ok["option"], strict=True)]
    reasons = passed_over(options, plan)
    ok["passed_over"] = [reasons.get((r, o), "") for r, o in zip(ok["route"], ok["option"], strict=True)]
    parts = []
    for part, column in (("GPUs", "gpu_usd_per_month"), ("engineering", "eng_usd_per_month")):
        parts.append(ok.assign(part=part, usd_per_month=ok[column].astype(float)))
    out = pd.concat(parts, ignore_index=True)
    out["route"] = [printable(str(r)) for r in out["route"]]  # a chart label: control characters escaped
    return out[["route", "option", "engine", "gpu", "gpus", "part", "usd_per_month", "total_usd_per_month",
                "recommended", "passed_over", "provenance", "price_source"]]


# Why a feasible option cheaper than the recommendation ranks behind it (planner.planning.sim_check.rank_key).
UNVERIFIED_REASON = ("passed over: its TTFT/TPOT rest on no latency measurement, and options with one rank first "
                     "(allow_unverified_latency ranks by cost)")


def passed_over(options: pd.DataFrame, plan: pd.DataFrame) -> dict[tuple[str, str], str]:
    """Per (route, option) feasible and cheaper than the route's recommendation: why the plan passed it over."""
    chosen = {str(r["route"]): (plan_option(r), float(r["total_usd_per_month"]))
              for r in plan[plan["status"] == "ok"].to_dict("records")}
    out = {}
    feasible = options[options["feasible"].astype(bool)] if "feasible" in options.columns else options.iloc[:0]
    for r in feasible.to_dict("records"):
        route = str(r["route"])
        if route not in chosen or r["option"] == chosen[route][0] or not r["total_usd_per_month"] < chosen[route][1]:
            continue
        out[(route, str(r["option"]))] = (UNVERIFIED_REASON if r.get("latency_basis") == "unverified"
                                          else "passed over: ranked behind the recommendation")
    return out


def option_costs_chart(table: pd.DataFrame, width: int = 560, compact: bool = False) -> alt.Chart:
    """Horizontal stacked bars ($/month: GPUs + engineering) per option, one panel per route."""
    bars = alt.Chart(table).mark_bar().encode(
        y=alt.Y("option:N", sort=alt.EncodingSortField("total_usd_per_month", order="ascending"), title=None,
                axis=alt.Axis(labelLimit=260)),
        x=alt.X("sum(usd_per_month):Q", title="$ per month", axis=alt.Axis(format="$,.0f")),
        color=engine_color(table["engine"]),
        opacity=alt.Opacity("part:O", scale=alt.Scale(domain=["GPUs", "engineering"], range=[1.0, 0.45]),
                            title="cost"),
        # Solid black outline: the recommendation; dashed: a cheaper option passed over (its reason in the tooltip).
        stroke=alt.condition("datum.recommended || datum.passed_over != ''", alt.value("black"), alt.value(None)),
        strokeWidth=alt.condition("datum.recommended || datum.passed_over != ''", alt.value(2), alt.value(0)),
        strokeDash=alt.condition("datum.passed_over != ''", alt.value([4, 2]), alt.value([1, 0])),
        tooltip=[alt.Tooltip("route:N"), alt.Tooltip("option:N"), alt.Tooltip("passed_over:N", title="why not"),
                 alt.Tooltip("part:N"),
                 alt.Tooltip("usd_per_month:Q", format="$,.0f", title="this part $/month"),
                 alt.Tooltip("total_usd_per_month:Q", format="$,.0f", title="total $/month"),
                 alt.Tooltip("gpus:Q"), alt.Tooltip("recommended:N"), alt.Tooltip("provenance:N"),
                 alt.Tooltip("price_source:N")])
    # Compact (a phone): each route's name above its panel, not beside it, so the panel keeps the width.
    # A long route name is cut with an ellipsis (its full name is in the tooltip), never widening the page.
    header = (alt.Header(labelOrient="top", labelAnchor="start", labelFontWeight="bold", labelFontSize=13,
                         labelLimit=COMPACT_LABEL_LIMIT) if compact
              else alt.Header(labelAngle=0, labelAlign="left", labelFontWeight="bold", labelFontSize=13,
                              labelLimit=ROUTE_LABEL_LIMIT))
    return bars.properties(height=alt.Step(20), width=width).facet(
        row=alt.Row("route:N", title=None, header=header)
    ).resolve_scale(y="independent", x="independent")


# ---------------------------------------------------------------- break-even

def breakeven_table(options: pd.DataFrame, route: str, updates: Sequence[float]) -> pd.DataFrame:
    """Monthly total vs model updates/month for the cheapest feasible option of each engine on a route."""
    ok = options[(options["route"] == route) & options["feasible"].astype(bool)]
    best = ok.sort_values("total_usd_per_month", kind="stable").groupby("engine", sort=True).head(1)
    rows: list[dict[str, object]] = []
    for _, option in best.iterrows():
        totals = monthly_total_vs_updates(option, list(updates))
        rows.extend({"engine": option["engine"], "option": option["option"], "updates_per_month": float(u),
                     "total_usd_per_month": float(t), "provenance": option["provenance"]}
                    for u, t in zip(updates, totals, strict=True))
    return pd.DataFrame(rows, columns=["engine", "option", "updates_per_month", "total_usd_per_month", "provenance"])


def engine_breakeven(options: pd.DataFrame, route: str) -> float | None:
    """Updates/month where the two cheapest engines' lines cross on a route (None: they never do)."""
    ok = options[(options["route"] == route) & options["feasible"].astype(bool)]
    best = ok.sort_values("total_usd_per_month", kind="stable").groupby("engine").head(1).head(2)
    if len(best) < 2:
        return None
    a, b = best.iloc[0], best.iloc[1]
    return breakeven_updates(float(a["fixed_usd_per_month"]), float(a["usd_per_update"]),
                             float(b["fixed_usd_per_month"]), float(b["usd_per_update"]))


def breakeven_chart(table: pd.DataFrame, current_updates: float | None = None,
                    breakeven: float | None = None) -> alt.Chart:
    """One line per engine; a rule at today's updates/month and one where the lines cross."""
    x = alt.X("updates_per_month:Q", title="model updates per month")
    lines = alt.Chart(table).mark_line(strokeWidth=3).encode(
        x=x, y=alt.Y("total_usd_per_month:Q", title="$ per month", axis=alt.Axis(format="$,.0f")),
        color=engine_color(table["engine"]), detail="option:N",
        tooltip=[alt.Tooltip("option:N"), alt.Tooltip("updates_per_month:Q", format=".1f"),
                 alt.Tooltip("total_usd_per_month:Q", format="$,.0f"), alt.Tooltip("provenance:N")])
    layers = [lines]
    marks = []
    if current_updates is not None and math.isfinite(current_updates):
        marks.append({"updates_per_month": current_updates, "label": f"now: {current_updates:g}/month",
                      "kind": "now", "label_y": 10})
    if breakeven is not None and math.isfinite(breakeven):
        marks.append({"updates_per_month": breakeven, "label": f"break-even: {breakeven:.1f}/month",
                      "kind": "break-even", "label_y": 28})
    if marks:
        rules = pd.DataFrame(marks)
        layers.append(alt.Chart(rules).mark_rule(strokeDash=[4, 3], color="#555").encode(x=x))
        layers.append(alt.Chart(rules).mark_text(align="left", dx=4, color="#333", fontWeight="bold").encode(
            x=x, y=alt.Y("label_y:Q", scale=None), text="label:N"))
    return alt.layer(*layers).properties(height=CHART_HEIGHT)


# ---------------------------------------------------------------- recommendation table

RECOMMENDATION_COLUMNS = {
    "route": "route", "choice": "engine", "gpu": "GPU", "precision": "precision", "tp": "TP",
    "replicas": "replicas", "gpus": "GPUs", "total_usd_per_month": "$/month", "usd_per_1m_output_tok": "$ per 1M tok",
    "provenance": "numbers are", "runner_up": "runner-up", "savings_usd_per_month": "saves $/month",
    "breakeven_updates_per_month": "break-even updates/month", "tok_s": "replica tok/s (90% interval)",
    "notes": "notes",
}


def recommendation_table(plan: pd.DataFrame) -> pd.DataFrame:
    """The plan as the app shows it: one row per route, the recommendation first, provenance kept."""
    view = plan.copy()
    view["choice"] = [engine_label(r["engine"], r["engine_version"], r.get("engine_config")) if r["status"] == "ok"
                      else "infeasible" for r in view.to_dict("records")]
    view["tok_s"] = [_interval(m, lo, hi) for m, lo, hi in zip(view["replica_output_tok_per_s"],
                     view["replica_output_tok_per_s_low"], view["replica_output_tok_per_s_high"], strict=True)]
    return view[list(RECOMMENDATION_COLUMNS)].rename(columns=RECOMMENDATION_COLUMNS)


def _interval(mid: float, low: float, high: float) -> str:
    if pd.isna(mid):
        return ""
    return f"{mid:,.0f} ({low:,.0f}–{high:,.0f})"


# ---------------------------------------------------------------- sensitivity

def sensitivity_chart(table: pd.DataFrame, growth_now: float = 1.0, price_now: float = 1.0) -> alt.Chart:
    """Fleet $/month vs traffic growth, one line per GPU-price factor; today's setting ringed.

    `table` has traffic_growth, gpu_price_factor, total_usd_per_month, gpus, infeasible.
    """
    data = table.assign(price=[f"GPU price ×{f:g}" for f in table["gpu_price_factor"]])
    x = alt.X("traffic_growth:Q", title="traffic (× today's)", axis=alt.Axis(format=".2~f"))
    y = alt.Y("total_usd_per_month:Q", title="fleet $ per month", axis=alt.Axis(format="$,.0f"))
    colour = alt.Color("price:N", title="GPU price", sort=None, scale=alt.Scale(scheme="viridis"), legend=legend())
    tooltip = [alt.Tooltip("traffic_growth:Q", format=".2f"), alt.Tooltip("gpu_price_factor:Q", format=".2f"),
               alt.Tooltip("total_usd_per_month:Q", format="$,.0f"), alt.Tooltip("gpus:Q"),
               alt.Tooltip("infeasible:Q", title="infeasible routes")]
    lines = alt.Chart(data).mark_line(point=True, strokeWidth=2).encode(x=x, y=y, color=colour, tooltip=tooltip)
    now = data[np.isclose(data["traffic_growth"], growth_now) & np.isclose(data["gpu_price_factor"], price_now)]
    ring = alt.Chart(now).mark_point(size=300, color="black", strokeWidth=2).encode(x=x, y=y, tooltip=tooltip)
    return alt.layer(lines, ring).properties(height=CHART_HEIGHT)


# ---------------------------------------------------------------- fleet: GPUs over the day, $ by lever

GPU_COLOURS: Final = "tableau10"  # Final: its Literal type is one of the schemes alt.Scale accepts
# Waterfall bars: the totals grey, a step that lowers the total green, one that raises it red.
WATERFALL_KINDS = ("total", "saving", "cost", "no change")
WATERFALL_COLOURS = ("#7f7f7f", "#2ca02c", "#d62728", "#c7c7c7")
# A step that moves the total by less than half a cent does not change it (totals are rounded to cents).
NO_CHANGE_USD = 0.005
FLEET_TOTAL_STEP = "fleet total"


def hourly_gpus_table(hourly: pd.DataFrame) -> pd.DataFrame:
    """Online GPUs by type in each UTC hour 0-23 (planner.planning.fleet's hourly_gpus: hour, gpu, gpus), one row per
    (hour, GPU type): a type with no row in an hour has 0 GPUs online then (the fleet runs none)."""
    if hourly.empty:
        return pd.DataFrame(columns=["hour", "gpu", "gpus"])
    gpus = sorted(hourly["gpu"].astype(str).unique())
    grid = pd.MultiIndex.from_product([range(24), gpus], names=["hour", "gpu"])
    counts = hourly.assign(gpu=hourly["gpu"].astype(str)).groupby(["hour", "gpu"])["gpus"].sum()
    return counts.reindex(grid, fill_value=0).astype(int).reset_index()


def hourly_gpus_chart(table: pd.DataFrame) -> alt.Chart:
    """Stacked area of online GPUs by type over the 24 UTC hours (a step per hour: replicas change on the hour);
    hovering an hour gives each type's count."""
    x = alt.X("hour:O", title="hour of the day (UTC)", axis=alt.Axis(labelAngle=0))
    y = alt.Y("gpus:Q", title="GPUs online", stack="zero")
    colour = alt.Color("gpu:N", title="GPU", scale=alt.Scale(scheme=GPU_COLOURS), legend=legend())
    tooltip = [alt.Tooltip("hour:O", title="hour (UTC)"), alt.Tooltip("gpu:N", title="GPU"),
               alt.Tooltip("gpus:Q", title="GPUs online", format=",d")]
    area = alt.Chart(table).mark_area(interpolate="step", opacity=0.85).encode(x=x, y=y, color=colour,
                                                                               tooltip=tooltip)
    hover = alt.Chart(table).mark_bar(opacity=0).encode(x=x, y=y, color=colour, tooltip=tooltip)
    return alt.layer(area, hover).properties(height=CHART_HEIGHT)


def waterfall_bars(waterfall: pd.DataFrame) -> pd.DataFrame:
    """The bars of a $ by lever waterfall (planner.planning.fleet.lever_waterfall's table): the first step's total
    from 0, each later step from the total before it to its own (a saving or a cost), and a last bar from 0
    to the final total (FLEET_TOTAL_STEP)."""
    rows = []
    totals = [float(t) for t in waterfall["usd_per_month"]]
    for i, (step, total) in enumerate(zip(waterfall["step"], totals, strict=True)):
        before = 0.0 if i == 0 else totals[i - 1]
        change = total - before
        kind = "total" if i == 0 else _change_kind(change)
        rows.append({"step": str(step), "start": before, "end": total, "usd_per_month": total,
                     "change_usd_per_month": math.nan if i == 0 else change, "kind": kind,
                     "label": f"${total:,.0f}" if i == 0 else _signed_usd(change)})
    rows.append({"step": FLEET_TOTAL_STEP, "start": 0.0, "end": totals[-1], "usd_per_month": totals[-1],
                 "change_usd_per_month": math.nan, "kind": "total", "label": f"${totals[-1]:,.0f}"})
    return pd.DataFrame(rows)


def _change_kind(change: float) -> str:
    if abs(change) < NO_CHANGE_USD:
        return "no change"
    return "saving" if change < 0 else "cost"


def _signed_usd(change: float) -> str:
    if abs(change) < NO_CHANGE_USD:
        return "$0"
    return f"{'-' if change < 0 else '+'}${abs(change):,.0f}"


def waterfall_chart(bars: pd.DataFrame) -> alt.Chart:
    """Waterfall of $/month by lever: grey totals, green savings, red costs, the change written on each bar."""
    x = alt.X("step:N", sort=list(bars["step"]), title=None,
              axis=alt.Axis(labelAngle=-30, labelLimit=160, labelOverlap=False))
    kinds = [(k, c) for k, c in zip(WATERFALL_KINDS, WATERFALL_COLOURS, strict=True) if k in set(bars["kind"])]
    colour = alt.Color("kind:N", title=None, scale=alt.Scale(domain=[k for k, _ in kinds],
                                                             range=[c for _, c in kinds]), legend=legend())
    tooltip = [alt.Tooltip("step:N"), alt.Tooltip("usd_per_month:Q", title="$/month after this step",
                                                  format="$,.0f"),
               alt.Tooltip("change_usd_per_month:Q", title="change $/month", format="+$,.0f")]
    columns = alt.Chart(bars).mark_bar(size=42).encode(
        x=x, y=alt.Y("start:Q", title="$ per month", axis=alt.Axis(format="$,.0f")), y2="end:Q", color=colour,
        tooltip=tooltip)
    labels = alt.Chart(bars).transform_calculate(top="max(datum.start, datum.end)").mark_text(
        dy=-6, fontWeight="bold", color="#333").encode(x=x, y="top:Q", text="label:N", tooltip=tooltip)
    return alt.layer(columns, labels).properties(height=CHART_HEIGHT)


# ---------------------------------------------------------------- the route's SLO windows, minute by minute

WINDOW_PANEL_HEIGHT = 110
WINDOW_CHART_WIDTH = 640  # the timeline's and trade-off's plot width at 1440 px


def window_timeline_chart(timeline: pd.DataFrame, ttft_slo_ms: float | None, tpot_slo_ms: float | None,
                          percentile: float = 95.0, width: int = WINDOW_CHART_WIDTH) -> alt.VConcatChart:
    """Three panels over the planned load's windows (planner.planning.plan.window_timeline): arrivals per minute;
    TTFT and TPOT at the SLO percentile for the recommended fleet (solid) and one replica fewer (dashed), the SLO
    as a rule, windows in breach as red points."""
    shown = timeline
    if "replicas" in timeline.columns and timeline["recommended"].any():  # the recommended fleet and one fewer
        n = int(timeline.loc[timeline["recommended"], "replicas"].iloc[0])
        shown = timeline[timeline["replicas"].isin((n, n - 1))]
    data = shown.assign(fleet_label=[f"{f} (recommended)" if r else f for f, r in
                                     zip(shown["fleet"], shown["recommended"], strict=True)])
    recommended = data[data["recommended"]]
    x = alt.X("start_min:Q", title="minute of the planned load")
    rate = alt.Chart(recommended).mark_bar(color=OTHER_SHADES[2]).encode(
        x, alt.Y("requests_per_min:Q", title="requests/min"),
        tooltip=[alt.Tooltip("start_min:Q", format=".0f", title="minute"),
                 alt.Tooltip("requests_per_min:Q", format=".0f", title="requests/min")],
    ).properties(height=WINDOW_PANEL_HEIGHT, width=width)
    dash = alt.StrokeDash("fleet_label:N", title="fleet", legend=legend(orient="bottom"),
                          sort=sorted(data["fleet_label"].unique(), key=lambda f: "recommended" not in f))
    panels = [rate]
    for metric, name, slo in (("ttft_ms", "TTFT", ttft_slo_ms), ("tpot_ms", "TPOT", tpot_slo_ms)):
        title = f"{name} p{percentile:g}, ms"
        finite = data.assign(**{metric: data[metric].where(np.isfinite(data[metric]))})
        line = alt.Chart(finite).mark_line(color=ENGINE_COLOURS["vllm"]).encode(
            x, alt.Y(f"{metric}:Q", title=title), dash,
            tooltip=["fleet_label:N", alt.Tooltip("start_min:Q", format=".0f", title="minute"),
                     alt.Tooltip(f"{metric}:Q", format=".1f", title=title)])
        breach = alt.Chart(finite[finite["breach"]]).mark_point(color=ENGINE_SHADES["sglang"][0], filled=True,
                                                                 size=40).encode(x, alt.Y(f"{metric}:Q"))
        layers = [line, breach]
        if slo is not None and math.isfinite(slo):
            layers.append(alt.Chart(pd.DataFrame({"slo": [slo]})).mark_rule(
                color=ENGINE_SHADES["sglang"][0], strokeDash=[4, 3]).encode(y="slo:Q"))
        panels.append(alt.layer(*layers).properties(height=WINDOW_PANEL_HEIGHT, width=width))
    return alt.vconcat(*panels).resolve_scale(x="shared")


def fleet_tradeoff_chart(tradeoff: pd.DataFrame, width: int = WINDOW_CHART_WIDTH) -> alt.LayerChart:
    """$/month against SLO windows in breach, one point per fleet size (planner.planning.plan.fleet_tradeoff),
    from the whole-log count up to the recommendation: what fewer replicas save and what they break."""
    data = tradeoff.assign(label=[f"{n} replicas" + (" (recommended)" if r else "") for n, r in
                                  zip(tradeoff["replicas"], tradeoff["recommended"], strict=True)])
    base = alt.Chart(data).encode(
        alt.X("usd_per_month:Q", title="$/month", axis=alt.Axis(format="$,.0f"), scale=alt.Scale(zero=False)),
        alt.Y("windows_in_breach:Q", title="SLO windows in breach", axis=alt.Axis(tickMinStep=1)),
        tooltip=["label:N", alt.Tooltip("usd_per_month:Q", format="$,.0f", title="$/month"),
                 alt.Tooltip("windows_in_breach:Q", title="windows in breach"), alt.Tooltip("windows:Q"),
                 alt.Tooltip("worst_ttft_ms:Q", format=".0f", title="worst TTFT, ms"),
                 alt.Tooltip("worst_tpot_ms:Q", format=".1f", title="worst TPOT, ms")])
    line = base.mark_line(color=OTHER_SHADES[2])
    points = base.mark_point(filled=True, size=60, color=ENGINE_COLOURS["vllm"])
    text = base.mark_text(dy=-10).encode(text="label:N")
    return alt.layer(line, points, text).properties(height=180, width=width)
