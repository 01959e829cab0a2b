"""Tables as the app shows them: the decision columns apart from the details, human headers,
formatted numbers and empty cells instead of "None" (pure: frames in, frames or Stylers out).

The frames keep their numbers (a test or a download reads the values); `styled` only sets
how they are displayed, so sorting a column in the app still sorts numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
from pandas.io.formats.style import Styler

from fleetfacts.schema import escape_formula
from planner.engine.curves import engine_label
from planner.planning.exports import printable
from ui.charts import recommendation_table

# What a capacity review decides on; fits a 1440 px window beside the sidebar.
DECISION_COLUMNS = ("route", "engine", "GPU", "GPUs", "range", "$/month", "latency vs SLO", "runner-up",
                    "saves $/month", "break-even")
LATENCY_HELP = ("TTFT · TPOT in ms at the route's SLO percentile on the recommended fleet (its whole load), each / "
                "its SLO; online routes only. The 90% intervals and the worst SLO window are in the lines under the "
                "table.")
# A GPU range whose high end is more than this many times its low end is flagged "wide": the count is a guess
# until the curve behind it is measured (the cause and the measuring command are shown beside the table).
WIDE_RATIO = 3.0
WIDE_BADGE = "⚠ wide"
# Engines `python -m measure profile` runs in-process; any other is measured through its OpenAI-compatible server.
MEASURED_ENGINES = ("vllm", "trtllm")
# Everything else per route, behind an expander.
DETAIL_COLUMNS = ("route", "precision", "TP", "replicas", "GPUs range", "$/month range", "$ per 1M tok", "numbers are",
                  "replica tok/s (90% interval)", "TTFT ms at the SLO percentile (90%)", "TPOT ms (90%)",
                  "latency from", "notes")
BREAKEVEN_HELP = ("Break-even updates per month: model updates per month at which the runner-up would cost the same. 'never': the "
                  "recommendation stays cheaper at any update rate. 'same engine': the runner-up runs the same "
                  "engine build, so updates cost the same work and a break-even says nothing. Empty: no runner-up "
                  "(or the route is infeasible).")
RANGE_HELP = ("GPUs if replicas deliver the high or the low end of their throughput interval. '⚠ wide': the high "
              "end is over 3x the low end; below the table, why and the command that measures it.")
NEVER = "never"
SAME_ENGINE = "same engine"
# Display formats per header (str.format); a missing value shows as an empty cell.
DOLLARS = "${:,.0f}"
COUNT = "{:,.0f}"
FORMATS = {"GPUs": COUNT, "TP": COUNT, "replicas": COUNT, "$/month": DOLLARS, "saves $/month": DOLLARS,
           "$ per 1M tok": "${:,.2f}"}


def decision_table(plan: pd.DataFrame, routes: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per route: route, engine, GPU, GPUs, $/month, latency beside the SLO (the routes table gives the
    SLO), runner-up, savings and break-even (text)."""
    view = recommendation_table(plan)
    view["break-even"] = breakeven_text(plan)
    view["range"] = [gpu_range_text(r) for r in plan.to_dict("records")]
    slos = {} if routes is None else {str(r["name"]): r for r in routes.to_dict("records")}
    view["latency vs SLO"] = [latency_vs_slo(r, slos.get(str(r["route"]))) for r in plan.to_dict("records")]
    return view[list(DECISION_COLUMNS)]


def latency_vs_slo(row: Mapping[str, object], route: Mapping[str, object] | None, interval: bool = False) -> str:
    """'165 / 300 · 7.0 / 30': TTFT, then TPOT, at the SLO percentile, ms, each / its target, for a planned online
    route ('' otherwise); `interval`: each value with its 90% interval, '165 (113–241) / 300 · ...'."""
    if row.get("status") != "ok" or row.get("traffic") != "online":
        return ""
    route = route or {}
    parts = []
    for metric, target in (("ttft", route.get("ttft_slo_ms")), ("tpot", route.get("tpot_slo_ms"))):
        value = row.get(f"{metric}_pred_ms")
        if _missing(value):
            parts.append("–")
            continue
        text = _ms(value)
        low, high = row.get(f"{metric}_pred_ms_low"), row.get(f"{metric}_pred_ms_high")
        if interval and not (_missing(low) or _missing(high)):
            text += f" ({_ms(low)}–{_ms(high)})"
        parts.append(text + ("" if _missing(target) else f" / {_ms(target)}"))
    return " · ".join(parts)


def latency_line(row: Mapping[str, object], route: Mapping[str, object] | None) -> str:
    """'p95 TTFT · TPOT, ms (90% interval) / SLO: 165 (113–241) / 300 · 7.0 (5.5–9.1) / 30' ('' when none)."""
    text = latency_vs_slo(row, route, interval=True)
    pct = (route or {}).get("slo_percentile")
    head = "" if _missing(pct) else f"p{float(pct):g} "  # type: ignore[arg-type]
    return f"{head}TTFT · TPOT, ms (90% interval) / SLO: {text}" if text else ""


def _ms(value: object) -> str:
    number = float(value)  # type: ignore[arg-type]
    return f"{number:.1f}" if abs(number) < 10 else f"{number:,.0f}"


def _wide(row: Mapping[str, object]) -> bool:
    low, high = row.get("gpus_low"), row.get("gpus_high")
    if row.get("status") != "ok" or _missing(low) or _missing(high):
        return False
    return float(high) > WIDE_RATIO * max(float(low), 1.0)  # type: ignore[arg-type]


def gpu_range_text(row: Mapping[str, object]) -> str:
    """'4–316 ⚠ wide' (high over low above WIDE_RATIO), '1–2', or '' (no range: infeasible)."""
    span = _span(row.get("gpus_low"), row.get("gpus_high"), COUNT)
    return f"{span} {WIDE_BADGE}" if span and _wide(row) else span


# A curve: routes sized on the same one share its error (added in step); different curves were fitted apart.
CURVE_COLUMNS = ("engine", "engine_version", "engine_config", "gpu", "model", "precision", "tp")  # PLAN's names


def total_range(plan: pd.DataFrame, planned: str, low: str, high: str) -> tuple[float, float, float]:
    """(total, low, high) of column `planned` over the plan's rows: the ~90% range of the sum when each curve's
    throughput error is its own (routes on one curve move together, so their distances to `low` / `high` add;
    different curves' add in quadrature), not the sum of every route's extreme."""
    total = float(plan[planned].sum())
    curves = [c for c in CURVE_COLUMNS if c in plan.columns]
    by_curve = plan.assign(_down=plan[planned] - plan[low], _up=plan[high] - plan[planned]) \
        .groupby(curves, dropna=False)[["_down", "_up"]].sum()
    return (total, total - math.sqrt(float((by_curve["_down"] ** 2).sum())),
            total + math.sqrt(float((by_curve["_up"] ** 2).sum())))


def range_text(plan: pd.DataFrame) -> str:
    """'90% range 21–27 GPUs, $..–$../month (...)' over the planned routes whose range is not wide
    (total_range); the wide ones are named apart (their extremes would swamp the sum)."""
    ok = plan[plan["status"] == "ok"]
    if ok.empty:
        return "no range"
    wide = {w["route"] for w in wide_ranges(ok)}
    narrow = ok[~ok["route"].map(lambda r: printable(str(r))).isin(wide)]
    _, *gpus = total_range(narrow, "gpus", "gpus_low", "gpus_high")
    _, *usd = total_range(narrow, "total_usd_per_month", "total_usd_per_month_low", "total_usd_per_month_high")
    text = (f"90% range {gpus[0]:,.0f}–{gpus[1]:,.0f} GPUs, ${usd[0]:,.0f}–${usd[1]:,.0f}/month (each fitted "
            f"curve's throughput error its own; all at their ends: {narrow['gpus_low'].sum():,.0f}–"
            f"{narrow['gpus_high'].sum():,.0f} GPUs)") if not narrow.empty else "no narrow range"
    if wide:
        text += (f" ({len(narrow)} of {len(ok)} planned routes; wide, see the table: "
                 f"{', '.join(sorted(wide))})")
    return text


def wide_ranges(plan: pd.DataFrame) -> list[dict[str, str]]:
    """Per planned route with a wide GPU range: route, the range ('16 (4–316, ×79)'), its cause (the
    provenance and profile files the plan row carries) and its fix (the `python -m measure profile` command
    for that GPU, engine, model, precision and TP)."""
    return [{"route": printable(str(r["route"])), "range": _range_words(r), "cause": _range_cause(r),
             "fix": measure_command(r)} for r in plan.to_dict("records") if _wide(r)]


def _range_words(row: Mapping[str, object]) -> str:
    low, high = float(row["gpus_low"]), float(row["gpus_high"])  # type: ignore[arg-type]
    return f"{float(row['gpus']):,.0f} GPUs ({low:,.0f}–{high:,.0f}, ×{high / max(low, 1.0):,.0f})"  # type: ignore[arg-type]


def _range_cause(row: Mapping[str, object]) -> str:
    provenance = "" if _missing(row.get("provenance")) else str(row["provenance"])
    files = [f for f in ("" if _missing(row.get("profile")) else str(row["profile"])).split(";") if f]
    basis = f"fitted to {', '.join(files)}" if files else "no profile file named"
    what = {"extrapolated": "the throughput curve runs past its data",
            "published": "the throughput curve rests on published figures only",
            "predicted": "the throughput curve is a fit between measured points",
            "physics": "the prompts or outputs are longer than any measured: attention and KV reads follow the physics "
                       "model from the measured points"}.get(provenance, provenance)
    return f"its numbers are {provenance}: {what} ({basis}), so the replica throughput's interval is wide"


def measure_command(row: Mapping[str, object]) -> str:
    """The `python -m measure profile` command that measures the row's GPU, engine, model, precision and TP."""
    engine = str(row.get("engine"))
    args = [f"--gpu {row.get('gpu')}"]
    args += [f"--engine {engine}"] if engine in MEASURED_ENGINES else [
        f"--engine openai --base-url URL --engine-name {engine}"]
    tp = 1 if _missing(row.get("tp")) else int(float(row["tp"]))  # type: ignore[arg-type]
    args += [f"--model {row.get('model')}", f"--precision {row.get('precision')}", f"--tp {tp}"]
    return "python -m measure profile " + " ".join(args)


def details_table(plan: pd.DataFrame) -> pd.DataFrame:
    """One row per route: precision, TP, replicas, GPU and $/month ranges, $ per 1M output tokens,
    provenance, throughput, predicted TTFT/TPOT at the route's load with their intervals and tier, notes."""
    view = recommendation_table(plan)
    view["GPUs range"] = [_span(r.get("gpus_low"), r.get("gpus_high"), COUNT) for r in plan.to_dict("records")]
    view["$/month range"] = [_span(r.get("total_usd_per_month_low"), r.get("total_usd_per_month_high"), DOLLARS)
                             for r in plan.to_dict("records")]
    records = plan.to_dict("records")
    view["TTFT ms at the SLO percentile (90%)"] = [_latency(r, "ttft") for r in records]
    view["TPOT ms (90%)"] = [_latency(r, "tpot") for r in records]
    view["latency from"] = [("" if _missing(r.get("latency_tier")) else str(r.get("latency_tier"))) for r in records]
    return view[list(DETAIL_COLUMNS)]


def _latency(row: Mapping[str, object], metric: str) -> str:
    """'45.0 (31.3–64.6)': the plan's predicted latency at the route's load and its interval ('' when missing)."""
    value = row.get(f"{metric}_pred_ms")
    if _missing(value):
        return ""
    span = _span(row.get(f"{metric}_pred_ms_low"), row.get(f"{metric}_pred_ms_high"), "{:,.1f}")
    return f"{float(value):,.1f}" + (f" ({span})" if span else "")  # type: ignore[arg-type]


def _span(low: object, high: object, fmt: str) -> str:
    """'9–69' from the low and high ends of a range ('' when missing)."""
    if _missing(low) or _missing(high):
        return ""
    return f"{fmt.format(float(low))}–{fmt.format(float(high))}"  # type: ignore[arg-type]


def breakeven_text(plan: pd.DataFrame) -> list[str]:
    """Break-even updates/month as shown: '3.2', 'never' (a runner-up whose cost line never
    crosses), or '' (no runner-up, or an infeasible route)."""
    out = []
    for row in plan.to_dict("records"):
        runner = row.get("runner_up")
        if row.get("status") != "ok" or _missing(runner) or str(runner) == "":
            out.append("")
        elif _missing(row.get("breakeven_updates_per_month")):
            out.append(SAME_ENGINE if str(row.get("breakeven_note") or "").startswith("same engine") else NEVER)
        else:
            out.append(f"{float(row['breakeven_updates_per_month']):,.1f}")
    return out


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def styled(frame: pd.DataFrame, formats: Mapping[str, str] | None = None) -> Styler:
    """`frame` displayed with `formats` (header -> str.format pattern; default FORMATS for the
    headers present) and an empty cell wherever a value is missing, never "None".

    Text that would start a spreadsheet formula gets a leading apostrophe in the data itself
    (issue 14 §11): the table toolbar's "Download as CSV" exports the cell data, not what is shown.
    Control characters (a route named with ESC or NUL) show as visible escapes (`planner.planning.exports.printable`)."""
    formats = {k: v for k, v in (FORMATS if formats is None else formats).items() if k in frame.columns}
    safe = frame.copy()
    for column in safe.columns:
        if not pd.api.types.is_numeric_dtype(safe[column]) and not pd.api.types.is_bool_dtype(safe[column]):
            safe[column] = safe[column].map(_safe_text)
    return safe.style.format(na_rep="").format(formats, na_rep="")


def _safe_text(value: object) -> object:
    return escape_formula(printable(value)) if isinstance(value, str) else value


def comparison_formats(frame: pd.DataFrame) -> dict[str, str]:
    """Display formats of a scenario comparison (ui.scenario.compare_plans): GPUs and $/month."""
    return {c: DOLLARS if c.endswith("$/month") else COUNT for c in frame.columns
            if c.endswith("$/month") or c.endswith("GPUs")}


# Baseline difference (planner.planning.exports.baseline_diff) under human headers.
DIFF_HEADERS = {"route": "route", "change": "change", "engine_before": "engine / GPU before",
                "engine_now": "engine / GPU now", "gpus_before": "GPUs before", "gpus_now": "GPUs now",
                "gpus_change": "GPUs change", "usd_per_month_before": "$/month before",
                "usd_per_month_now": "$/month now", "usd_per_month_change": "$/month change"}
DIFF_FORMATS = {"GPUs before": COUNT, "GPUs now": COUNT, "GPUs change": "{:+,.0f}", "$/month before": DOLLARS,
                "$/month now": DOLLARS, "$/month change": "{:+,.0f}"}


def diff_table(diff: pd.DataFrame) -> pd.DataFrame:
    """A baseline difference as the app shows it."""
    return diff.rename(columns=DIFF_HEADERS)[list(DIFF_HEADERS.values())]


# The fleet's deployments (planner.planning.fleet FLEET rows) as the app shows them: which routes each serves first.
FLEET_HEADERS = {"deployment": "deployment", "routes": "routes (share of requests)", "kind": "kind",
                 "model": "model", "engine": "engine", "gpu": "GPU", "precision": "precision", "tp": "TP",
                 "replicas_min": "replicas (fewest)", "replicas_max": "replicas (most)",
                 "reserved_replicas": "reserved", "gpus_max": "GPUs (most)", "gpu_usd_per_month": "GPU $/month",
                 "sim_attainment": "simulated within SLO", "slo": "SLO held", "pricing": "pricing", "notes": "notes"}
FLEET_FORMATS = {"TP": COUNT, "replicas (fewest)": COUNT, "replicas (most)": COUNT, "reserved": COUNT,
                 "GPUs (most)": COUNT, "GPU $/month": DOLLARS, "simulated within SLO": "{:.1%}"}


# The fleet table in two parts that each fit a 1440 px window: what each deployment runs, then its terms.
FLEET_DECISION = ("deployment", "routes (share of requests)", "kind", "engine", "GPU", "TP",
                  "replicas (fewest)", "replicas (most)", "GPUs (most)", "GPU $/month", "simulated within SLO")
FLEET_TERMS = ("deployment", "model", "precision", "SLO held", "reserved")  # pricing and notes: a list below it


def fleet_table(deployments: pd.DataFrame) -> pd.DataFrame:
    """One row per deployment: the routes it serves, its engine (version and settings), GPU, replicas over the
    day, reserved replicas, GPUs, GPU $/month, simulated attainment, SLO held, pricing and notes."""
    view = deployments.copy()
    view["engine"] = [engine_label(r["engine"], r["engine_version"], r.get("engine_config"))
                      for r in deployments.to_dict("records")]
    view["sim_attainment"] = pd.to_numeric(view["sim_attainment"], errors="coerce")
    return view[list(FLEET_HEADERS)].rename(columns=FLEET_HEADERS)
