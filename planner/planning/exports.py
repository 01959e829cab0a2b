"""Plan exports for a capacity review: totals per route and fleet, the difference to a baseline
plan, and a multi-sheet workbook (.xlsx: plan, totals, assumptions, sources, and the baseline
difference when there is one).

    totals = plan_totals_table(result.rows)
    diff = baseline_diff(result.rows, plan_rows(read_plan("last_quarter.csv")[0]))
    Path("plan.xlsx").write_bytes(workbook_bytes(result, diff))

Every text cell of a workbook is written as a string (never a formula) and formula-escaped like
the CSV, so a route named `=HYPERLINK(...)` stays text in a spreadsheet; control characters (ESC,
NUL, ...), which a worksheet cannot hold, are written as visible escapes (`\\x1b`), see `printable`.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from typing import Any

import pandas as pd

from fleetfacts.schema import csv_cell, escape_formula
from planner.engine.curves import engine_label
from planner.planning.plan import PlanResult, plan_coverage
from planner.planning.plan_files import assumptions_document
from planner.sizing.plan_row import PlanRow, plan_frame

TOTAL_COLUMNS = ("route", "status", "gpus", "gpus_low", "gpus_high", "gpu_usd_per_month", "eng_usd_per_month",
                 "total_usd_per_month", "total_usd_per_month_low", "total_usd_per_month_high")
SUMMED = TOTAL_COLUMNS[2:]
FLEET = "fleet total"
# The totals row of a workbook that also holds the optimised fleet: the sum of each route on its own option.
ROUTE_BY_ROUTE_TOTAL = "route-by-route total"
# Control characters a worksheet cannot hold (and a table should not print raw): C0 except tab, line feed and
# carriage return, plus DEL and the C1 range.  A backslash is escaped too, so an escape reads back unambiguously.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
DIFF_COLUMNS = ("route", "change", "engine_before", "engine_now", "gpus_before", "gpus_now", "gpus_change",
                "usd_per_month_before", "usd_per_month_now", "usd_per_month_change")


def plan_totals_table(plan: Sequence[PlanRow]) -> pd.DataFrame:
    """One row per route and a fleet-total row over the planned routes; the fleet row's status says
    what it covers ('3 of 4 routes; chat infeasible')."""
    rows = plan_frame(plan, rounded=True).reindex(columns=list(TOTAL_COLUMNS))
    ok = rows[rows["status"] == "ok"]
    fleet = {"route": FLEET, "status": plan_coverage(plan),
             **{c: round(float(pd.to_numeric(ok[c], errors="coerce").sum()), 2) for c in SUMMED}}
    return pd.concat([rows, pd.DataFrame([fleet])], ignore_index=True)


# Characters markdown (and Streamlit's $-math and :colour[] directives) may read as syntax inside a line, and
# what makes text an autolink (a URL's ':', an e-mail's '@', 'www.'), so that a user's text never becomes a live
# link; '-', '+' and '.' mean something only at a line's start, where these strings never are.
_MARKDOWN_SYNTAX = re.compile(r"([\\`*_{}\[\]()<>#|~$!:@])")
_WWW = re.compile(r"(?i)\b(www)\.")


def markdown_text(text: str) -> str:
    """A user string (a route name, free text) to embed in markdown within a line: `printable`, then every
    markdown-syntax character backslash-escaped, so it shows as typed: no emphasis, link, math or autolinked URL."""
    return _WWW.sub(r"\1\\.", _MARKDOWN_SYNTAX.sub(r"\\\1", printable(text)))


def printable(text: str) -> str:
    """`text` with every control character (ESC, NUL, ...) as a visible `\\xNN` escape, and then every
    backslash of it doubled (so the escape is unambiguous); text without control characters is unchanged."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text.replace("\\", "\\\\"))


def _engine(row: PlanRow) -> str:
    if not row.ok:
        return "infeasible"
    return f"{engine_label(row.engine, row.engine_version, row.engine_config)} / {row.gpu}"


def _number(value: int | float | None) -> float:
    return math.nan if value is None or not math.isfinite(value) else float(value)


def baseline_diff(plan: Sequence[PlanRow], baseline: Sequence[PlanRow]) -> pd.DataFrame:
    """Per route (union of both plans): engine/GPU, GPUs and total $/month before and now, and the change.

    `change` is 'same', 'changed', 'new' (not in the baseline), 'removed', 'now infeasible' or
    'now feasible'; the fleet row compares totals only over the routes planned in both (its
    `change` says which routes it leaves out), never over different route sets silently.
    """
    before = {r.route: r for r in baseline}
    now = {r.route: r for r in plan}
    rows = [_diff_row(name, before.get(name), now.get(name)) for name in dict.fromkeys([*now, *before])]
    both = [r for r in rows if r["change"] in ("same", "changed")]
    left_out = [r["route"] for r in rows if r["change"] not in ("same", "changed")]
    sums = {key: round(sum(r[key] for r in both), 2)
            for key in ("gpus_before", "gpus_now", "usd_per_month_before", "usd_per_month_now")}
    fleet = {"route": FLEET, "change": f"over the {len(both)} routes planned in both"
             + (f"; not counted: {', '.join(left_out)}" if left_out else ""),
             "engine_before": "", "engine_now": "", **sums, "gpus_change": sums["gpus_now"] - sums["gpus_before"],
             "usd_per_month_change": round(sums["usd_per_month_now"] - sums["usd_per_month_before"], 2)}
    return pd.DataFrame([*rows, fleet], columns=list(DIFF_COLUMNS))


def _diff_row(name: str, before: PlanRow | None, now: PlanRow | None) -> dict[str, Any]:
    def side(row: PlanRow | None) -> tuple[str, float, float]:
        if row is None:
            return "", math.nan, math.nan
        if not row.ok:
            return "infeasible", math.nan, math.nan
        return _engine(row), _number(row.gpus), round(_number(row.total_usd_per_month), 2)

    (e0, g0, d0), (e1, g1, d1) = side(before), side(now)
    return {"route": name, "change": _change(before, now, (e0, g0, d0) != (e1, g1, d1)), "engine_before": e0,
            "engine_now": e1, "gpus_before": g0, "gpus_now": g1, "gpus_change": g1 - g0,
            "usd_per_month_before": d0, "usd_per_month_now": d1, "usd_per_month_change": round(d1 - d0, 2)}


def _change(before: PlanRow | None, now: PlanRow | None, differs: bool) -> str:
    if before is None:
        return "new"
    if now is None:
        return "removed"
    ok0, ok1 = before.ok, now.ok
    if ok0 != ok1:
        return "now feasible" if ok1 else "now infeasible"
    if not ok1:
        return "same"
    return "changed" if differs else "same"


def format_diff(diff: pd.DataFrame) -> list[str]:
    """The baseline difference as printable lines (one per route that changed, then the fleet)."""
    lines = []
    for r in diff.to_dict("records"):
        if r["change"] == "same":
            continue
        if r["route"] == FLEET:
            lines.append(f"fleet ({r['change']}): GPUs {r['gpus_before']:g} -> {r['gpus_now']:g} "
                         f"({r['gpus_change']:+g}), ${r['usd_per_month_before']:,.2f} -> "
                         f"${r['usd_per_month_now']:,.2f} ({_signed_money(r['usd_per_month_change'])}/month)")
            continue
        lines.append(f"{r['route']}: {r['change']}: {r['engine_before'] or '-'} -> {r['engine_now'] or '-'}, GPUs "
                     f"{_count(r['gpus_before'])} -> {_count(r['gpus_now'])}, $/month "
                     f"{_money(r['usd_per_month_before'])} -> {_money(r['usd_per_month_now'])}")
    return lines


def _count(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:g}"


def _money(value: float) -> str:
    return "-" if not math.isfinite(value) else f"${value:,.2f}"


def _signed_money(value: float) -> str:
    return f"{'+' if value >= 0 else '-'}${abs(value):,.2f}"


# ---------------------------------------------------------------- workbook

def workbook_bytes(result: PlanResult, diff: pd.DataFrame | None = None, fleet: pd.DataFrame | None = None) -> bytes:
    """The plan as an .xlsx: sheets plan, totals, assumptions, sources (and baseline when given); with `fleet`
    (the optimised fleet's deployments, schema FLEET: the recommendation where there is one) a first sheet
    "fleet", and the totals' last row says it sums the route-by-route plan, not that fleet."""
    from openpyxl import Workbook  # type: ignore[import-untyped]  # here: 74 ms of every CLI start otherwise

    book = Workbook()
    totals = plan_totals_table(result.rows)
    if fleet is not None:
        totals["route"] = totals["route"].replace({FLEET: ROUTE_BY_ROUTE_TOTAL})
    sheets: dict[str, pd.DataFrame] = {
        **({"fleet": fleet} if fleet is not None else {}),
        "plan": plan_frame(result.rows, rounded=True),
        "totals": totals,
        "assumptions": _assumptions_frame(result),
        "sources": result.sources,
    }
    minutes = minutes_frame(result)
    if not minutes.empty:
        sheets["minutes"] = minutes
    if diff is not None:
        sheets["baseline"] = diff
    book.remove(book.active)
    for name, frame in sheets.items():
        _write_sheet(book.create_sheet(name), frame)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


MINUTES_COLUMNS = ("route", "replicas", "recommended", "usd_per_month", "start_min", "requests_per_min", "ttft_ms",
                   "tpot_ms", "breach")


def minutes_frame(result: PlanResult) -> pd.DataFrame:
    """Every online route judged window by window, minute by minute (PlanResult.timelines): per window of the
    planned load, for the recommended fleet and down to the whole-log count, arrivals and TTFT / TPOT at the SLO
    percentile (ms), in breach or not; route names formula-safe as in the plan CSV."""
    frames = [t.assign(route=csv_cell(route)) for route, t in result.timelines.items() if not t.empty]
    if not frames:
        return pd.DataFrame(columns=list(MINUTES_COLUMNS))
    out = pd.concat(frames, ignore_index=True)[list(MINUTES_COLUMNS)]
    return out.round({"usd_per_month": 2, "start_min": 2, "requests_per_min": 1, "ttft_ms": 1, "tpot_ms": 2})


def _assumptions_frame(result: PlanResult) -> pd.DataFrame:
    doc = assumptions_document(result)
    rows = [{"name": name, "value": "" if value is None else str(value), "meaning": doc["assumption_notes"][name]}
            for name, value in doc["assumptions"].items()]
    rows.append({"name": "routes covered by the totals", "value": doc["coverage"], "meaning": ""})
    return pd.DataFrame(rows, columns=["name", "value", "meaning"])


# Spreadsheet number formats by column: dollars and counts with thousands separators; a change with its sign.
MONEY_FORMAT = '"$"#,##0.00'
COUNT_FORMAT = "#,##0"
SIGNED_MONEY_FORMAT = '+"$"#,##0.00;-"$"#,##0.00;"$"0.00'
SIGNED_COUNT_FORMAT = "+#,##0;-#,##0;0"
_COUNT_COLUMNS = ("gpus", "replicas", "gpus_max", "replicas_min", "replicas_max", "reserved_replicas")


def number_format(column: str) -> str | None:
    """The number format of a workbook column: money (`*usd*`), GPU and replica counts, their changes; else None."""
    signed = column.endswith("_change")
    if "usd" in column:
        return SIGNED_MONEY_FORMAT if signed else MONEY_FORMAT
    if column.startswith(("gpus", "replicas")) or column.endswith("_replicas") or column in _COUNT_COLUMNS:
        return SIGNED_COUNT_FORMAT if signed else COUNT_FORMAT
    return None


def _write_sheet(sheet: Any, frame: pd.DataFrame) -> None:
    """`frame` under a frozen header row, money and counts formatted, text never a formula, missing or
    non-finite numbers blank."""
    sheet.append([printable(str(c)) for c in frame.columns])
    for row in frame.astype(object).itertuples(index=False):
        sheet.append([_cell(v) for v in row])
    formats = [number_format(str(c)) for c in frame.columns]
    for row in sheet.iter_rows(min_row=1):
        for cell, fmt in zip(row, formats, strict=False):
            if isinstance(cell.value, str):
                cell.data_type = "s"  # text is text: openpyxl would otherwise store '=...' as a formula
            elif fmt is not None and isinstance(cell.value, (int, float)):
                cell.number_format = fmt
    sheet.freeze_panes = "A2"


def _cell(value: object) -> object:
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (int, float)):
        return value
    if hasattr(value, "item"):  # numpy scalar
        return _cell(value.item())
    return escape_formula(printable(str(value)))
