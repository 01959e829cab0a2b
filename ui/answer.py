"""The page's one answer: what to buy (the optimised fleet, or the route-by-route plan when there is no fleet),
its change against the previous answer, the one-line bar that stays in view, and per route what the fleet
changes against the plan (pure: frames in, frames, records and text out).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fleetfacts.schema import PLAN as PLAN_SCHEMA
from planner.engine.curves import engine_label
from planner.planning.exports import markdown_text, printable
from planner.planning.fleet import FleetResult
from planner.sizing.plan_row import plan_rows

FLEET = "fleet"
PLAN = "plan"
# The fleet is optimised on every edit (no button) when the routes are at most this many: the example's four
# routes take about 2 s (plan check 1.2 s + fleet with its lever steps 1.7 s on one idle core, 2026-12-04).
FLEET_AUTO_MAX_ROUTES = 8
MONEY = ("gpus", "gpu_usd_per_month", "eng_usd_per_month", "total_usd_per_month")
# The innermost bracket of a price's source ("vast on-demand $2.40/GPU-h (https://... (transcribed ...), 2026-10-19)").
_INNER_BRACKET = re.compile(r"\s*\([^()]*\)")


@dataclass(frozen=True)
class Answer:
    """Totals of one answer: `kind` FLEET or PLAN, the routes it plans (`planned`) of all `routes`, and, for a
    plan, GPUs and $ per route (so a change compares routes planned in both)."""

    kind: str
    totals: Mapping[str, float]
    routes: tuple[str, ...]
    planned: tuple[str, ...]
    checked: bool
    per_route: Mapping[str, tuple[float, ...]] | None = None
    gpus_by_type: Mapping[str, int] | None = None
    # GPUs if every replica delivers the high / the low end of its throughput interval (None: not known), and
    # the GPUs on curves whose range is wide, with the widest ratio.
    gpu_range: tuple[int, int] | None = None
    wide: str = ""


def plan_answer(plan: pd.DataFrame, checked: bool) -> Answer:
    """The route-by-route plan as an answer (its ok routes' totals)."""
    ok = plan[plan["status"] == "ok"]
    per_route = {str(r): tuple(float(v) for v in values) for r, *values in zip(
        ok["route"], *(pd.to_numeric(ok[c], errors="coerce").fillna(0.0) for c in MONEY), strict=True)}
    totals = {name: sum(v[i] for v in per_route.values()) for i, name in enumerate(MONEY)}
    return Answer(PLAN, totals, tuple(str(r) for r in plan["route"]), tuple(per_route), checked,
                  per_route, None, *_gpu_range(ok, "gpus", "route"))


def fleet_answer(fleet: FleetResult, plan: pd.DataFrame) -> Answer:
    """The optimised fleet as an answer: GPUs at its busiest hour, GPU and engineering $/month; checked when
    every deployment was simulated (`summary['simulation_checked']`)."""
    s = fleet.summary
    totals = {"gpus": float(sum(s["gpus_by_type"].values())), "gpu_usd_per_month": float(s["gpu_usd_per_month"]),
              "eng_usd_per_month": float(s["eng_usd_per_month"]),
              "total_usd_per_month": float(s["total_usd_per_month"])}
    return Answer(FLEET, totals, tuple(str(r) for r in plan["route"]), tuple(str(r) for r in fleet.routes["route"]),
                  bool(s.get("simulation_checked")), None, dict(s["gpus_by_type"]),
                  *_gpu_range(fleet.deployments, "gpus_max", "routes"))


# A GPU range whose high end is above this many times its low end is wide (as ui.tables flags a route's).
WIDE_RATIO = 3.0


def _gpu_range(rows: pd.DataFrame, gpus: str, label: str) -> tuple[tuple[int, int] | None, str]:
    """(low, high) GPUs summed over rows with gpus_low / gpus_high (rows without them at their own count), and
    'N of M GPUs on a wide range (...)' naming the rows whose own range is wide; (None, '') when no row has one."""
    if rows.empty or "gpus_low" not in rows.columns or rows["gpus_low"].isna().all():
        return None, ""
    count = pd.to_numeric(rows[gpus], errors="coerce").fillna(0)
    low = pd.to_numeric(rows["gpus_low"], errors="coerce").fillna(count)
    high = pd.to_numeric(rows["gpus_high"], errors="coerce").fillna(count)
    wide = high > WIDE_RATIO * low.clip(lower=1)
    text = ""
    if wide.any():
        names = ", ".join(f"{markdown_text(str(r).split(' ')[0])} ×{h / max(lo, 1):,.0f}" for r, lo, h in
                          zip(rows.loc[wide, label], low[wide], high[wide], strict=True))
        text = f"{count[wide].sum():,.0f} of {count.sum():,.0f} GPUs on a wide throughput range ({names})"
    return (int(low.sum()), int(high.sum())), text


def answer_change(now: Answer, before: Answer | None) -> dict[str, float] | None:
    """The change from `before` like for like: `planned` the change in
    routes planned; the $ and GPUs over the routes planned in both for two plans (a route that turned
    infeasible is not a saving), for two fleets only when
    both plan the same routes (a fleet's shared deployments have no per-route $), else 0 with `common` 0.
    None when there is nothing to compare (no previous answer, or a fleet after a plan or back)."""
    if before is None or before.kind != now.kind:
        return None
    planned = float(len(now.planned) - len(before.planned))
    if now.per_route is not None and before.per_route is not None:
        common = [r for r in now.per_route if r in before.per_route]
        money = {n: sum(now.per_route[r][i] - before.per_route[r][i] for r in common) for i, n in enumerate(MONEY)}
    elif set(now.planned) == set(before.planned):
        common = list(now.planned)
        money = {n: now.totals[n] - before.totals[n] for n in MONEY}
    else:
        common, money = [], dict.fromkeys(MONEY, 0.0)
    return {**money, "planned": planned, "common": float(len(common))}


def coverage_text(answer: Answer) -> str:
    """'4 of 4 routes', '3 of 4 routes; chat infeasible' (as planner.planning.plan.plan_coverage words it)."""
    missing = [markdown_text(r) for r in answer.routes if r not in answer.planned]
    return f"{len(answer.planned)} of {len(answer.routes)} routes" + (
        f"; {', '.join(missing)} infeasible" if missing else "")


def bar_text(answer: Answer, alternative: Answer | None, compact: bool = False) -> str:
    """The one line that stays at the top of the page: the answer's total, GPUs, coverage and whether it was
    checked by simulation, then the alternative's total, labelled as such; `compact` (a phone): the total, GPUs
    and the check only."""
    t = answer.totals
    what = "optimised fleet" if answer.kind == FLEET else "route-by-route plan"
    gpus = f"{t['gpus']:,.0f} GPUs" + (f" ({', '.join(f'{n} {g}' for g, n in answer.gpus_by_type.items())})"
                                       if answer.gpus_by_type else "")
    check = "checked by simulation" if answer.checked else "**NOT checked by simulation**"
    low, high = answer.gpu_range or (0, 0)
    spread = f" ({low:,}–{high:,} at the ends of the throughput intervals)" if low != high else ""
    wide = f" · **{answer.wide}**" if answer.wide else ""
    if compact:
        short = f" ({low:,}–{high:,})" if spread else ""
        missing = len(answer.routes) - len(answer.planned)
        lost = f" · **{missing} of {len(answer.routes)} routes infeasible**" if missing else ""
        return (f"**Buy: {what}, ${t['total_usd_per_month']:,.0f}/month** · {t['gpus']:,.0f} GPUs{short} · "
                f"{check}{lost}{wide}")
    text = (f"**Buy: {what}, ${t['total_usd_per_month']:,.0f}/month** · {gpus}{spread}{wide} · {coverage_text(answer)} · "
            f"{check}")
    if alternative is not None:
        a = alternative.totals
        text += (f" · alternative: route by route ${a['total_usd_per_month']:,.0f}/month"
                 + ("" if alternative.checked else " (NOT checked)"))
    return text


# ---------------------------------------------------------------- plan -> fleet, per route

PLAN_FLEET_COLUMNS = ("route", "plan: engine / GPU", "plan: GPUs", "plan: $/month", "fleet: deployment",
                      "fleet: engine / GPU", "fleet: GPUs", "fleet: GPU $/month", "why they differ")


def plan_fleet_table(plan: pd.DataFrame, fleet: FleetResult) -> pd.DataFrame:
    """Per route: the plan's option, GPUs and $/month beside the fleet's deployment(s) serving it, their GPUs and
    GPU $/month (a shared deployment's whole GPUs and $, as it serves several routes), and why they differ."""
    deployments = {str(d["deployment"]): d for d in fleet.deployments.to_dict("records")}
    placed = {str(r["route"]): [n for n in str(r["deployments"]).split(";") if n] for r in fleet.routes.to_dict("records")}
    served: dict[str, list[str]] = {}
    for route, names in placed.items():
        for name in names:
            served.setdefault(name, []).append(route)
    rows = [_plan_fleet_row(r, [deployments[n] for n in placed.get(str(r["route"]), []) if n in deployments], served)
            for r in plan.to_dict("records")]
    return pd.DataFrame(rows, columns=list(PLAN_FLEET_COLUMNS))


def fleet_gpus_note(table: pd.DataFrame, fleet: FleetResult) -> str:
    """Why the per-route fleet GPU column of a plan_fleet_table adds up to more than the fleet's GPUs (a shared
    deployment's GPUs appear under every route it serves), with the figures; '' when it adds up."""
    listed = int(pd.to_numeric(table["fleet: GPUs"], errors="coerce").fillna(0).sum())
    total = int(pd.to_numeric(fleet.deployments["gpus_max"], errors="coerce").fillna(0).sum())
    if listed == total:
        return ""
    shared = [str(d["deployment"]) for d in fleet.deployments.to_dict("records") if d["kind"] == "shared"]
    return (f"The fleet GPUs column adds up to {listed} for a fleet of {total} GPUs: the GPUs of "
            f"{', '.join(shared) or 'a shared deployment'} appear under each route they serve.")


def why_text(table: pd.DataFrame) -> str:
    """The 'why they differ' column of a plan_fleet_table as markdown, one bullet per route that differs and one
    line naming the routes the fleet serves as planned."""
    same = [markdown_text(str(r)) for r, why in zip(table["route"], table["why they differ"], strict=True)
            if why == "same as the plan"]
    lines = [f"- **{markdown_text(str(r))}**: {markdown_text(str(why))}"
             for r, why in zip(table["route"], table["why they differ"], strict=True) if why != "same as the plan"]
    if same:
        lines.append(f"- same as the plan: {', '.join(same)}")
    return "\n".join(lines)


def deployment_terms_text(deployments: pd.DataFrame) -> str:
    """Per deployment, its pricing without sources and its notes, as markdown bullets (too long for a cell)."""
    lines = []
    for d in deployments.to_dict("records"):
        notes = "" if d.get("notes") is None or pd.isna(d.get("notes")) else str(d["notes"])
        lines.append(f"- **{printable(str(d['deployment']))}**: {printable(price_brief(str(d['pricing'])))}"
                     + (f"; {markdown_text(notes)}" if notes else ""))
    return "\n".join(lines)


def deployment_cards(deployments: pd.DataFrame) -> list[Card]:
    """Per deployment of a fleet (the compact layout): the routes it serves as the title, its GPUs, option and GPU
    $/month as the line, its kind, SLO held, pricing (without sources) and notes as the note."""
    cards = []
    for d in deployments.to_dict("records"):
        line = (f"**{_count(d['gpus_max'])} GPUs** · {_option(d)} · **${_count(d['gpu_usd_per_month'])}/month** in "
                f"GPUs")
        notes = "" if d.get("notes") is None or pd.isna(d.get("notes")) else str(d["notes"])
        note = " · ".join(str(x) for x in (d["kind"], d.get("slo") or "", price_brief(str(d["pricing"])), notes) if x)
        cards.append((markdown_text(f"{d['deployment']}: {d['routes']}"), printable(line), markdown_text(note)))
    return cards


def _float(value: object) -> float:
    return float(value)  # type: ignore[arg-type]


def _int(value: object) -> int:
    return int(float(value))  # type: ignore[arg-type]


def _option(row: Mapping[str, object]) -> str:
    config = row.get("engine_config")
    label = engine_label(str(row["engine"]), str(row["engine_version"]), None if config is None else str(config))
    return f"{label}/{row['gpu']}/{row['precision']}/tp{_int(row['tp'])}"


def _plan_fleet_row(row: Mapping[str, object], used: list[Mapping[str, object]],
                    served: Mapping[str, list[str]]) -> dict[str, object]:
    route = str(row["route"])
    ok = row.get("status") == "ok"
    out: dict[str, object] = {"route": route, "plan: engine / GPU": _option(row) if ok else "infeasible",
                              "plan: GPUs": row["gpus"] if ok else None,
                              "plan: $/month": row["total_usd_per_month"] if ok else None}
    out |= {"fleet: deployment": "; ".join(str(d["deployment"]) for d in used),
            "fleet: engine / GPU": "; ".join(_option(d) for d in used),
            "fleet: GPUs": sum(_int(d["gpus_max"]) for d in used) if used else None,
            "fleet: GPU $/month": sum(_float(d["gpu_usd_per_month"]) for d in used) if used else None,
            "why they differ": _why(row, used, served) if ok else "infeasible: no option meets this route's SLOs, in the plan or the fleet"}
    return out


def _why(row: Mapping[str, object], used: list[Mapping[str, object]], served: Mapping[str, list[str]]) -> str:
    """The reasons the fleet serves the route differently from its plan row ('same as the plan' when none)."""
    if not used:
        return "not in the fleet"
    route, reasons = str(row["route"]), []
    if len(used) > 1:
        reasons.append(f"split by request length over {len(used)} deployments (GPU mix)")
    for d in used:
        others = [printable(r) for r in served.get(str(d["deployment"]), []) if r != route]
        if others:
            reasons.append(f"shares {d['deployment']} with {', '.join(others)}"
                           + (f", held at the stricter SLO ({d['slo']})" if d.get("slo") else ""))
        if _option(d) != _option(row):
            reasons.append(f"another option in {d['deployment']}: {_option(d)}: the fleet's program, counting "
                           "engineering once per engine and model, found it cheaper overall")
        elif not others and _int(d["replicas_max"]) != _int(row["replicas"]):
            reasons.append(f"{d['replicas_max']} replicas instead of {_int(row['replicas'])}")
        if not others and abs(_float(d["gpu_usd_per_month"]) - _float(row["gpu_usd_per_month"])) >= 0.5:
            reasons.append(f"priced {price_brief(str(d['pricing']))}")
        if _int(d.get("replicas_min", 0)) != _int(d["replicas_max"]):
            reasons.append(f"autoscaled {d['replicas_min']}–{d['replicas_max']} replicas over the day")
    return "; ".join(reasons) or "same as the plan"


def price_brief(pricing: str) -> str:
    """A deployment's pricing without its sources: 'coreweave spot $2.6162/GPU-h'."""
    while _INNER_BRACKET.search(pricing):
        pricing = _INNER_BRACKET.sub("", pricing)
    return pricing.strip()


# ---------------------------------------------------------------- cards (the compact layout: one card per route)

PLAN_FLEET_FORMATS = {"plan: GPUs": "{:,.0f}", "plan: $/month": "${:,.0f}", "fleet: GPUs": "{:,.0f}",
                      "fleet: GPU $/month": "${:,.0f}"}
Card = tuple[str, str, str]  # title, the line to buy, a note


def _count(value: object) -> str:
    return "" if value is None or pd.isna(value) else f"{_float(value):,.0f}"


def plan_fleet_cards(table: pd.DataFrame) -> list[Card]:
    """Per route of a plan_fleet_table: the fleet's GPUs, deployment and GPU $/month as the line to buy, and the
    plan's beside it with why they differ as the note."""
    cards = []
    for r in table.to_dict("records"):
        route = markdown_text(str(r["route"]))
        if not r["fleet: deployment"]:
            cards.append((route, f"not in the fleet · plan: {r['plan: engine / GPU']}",
                          markdown_text(str(r["why they differ"]))))
            continue
        line = (f"**{_count(r['fleet: GPUs'])} GPUs** · {r['fleet: engine / GPU']} · "
                f"**${_count(r['fleet: GPU $/month'])}/month** in GPUs ({r['fleet: deployment']})")
        note = (f"route by route: {_count(r['plan: GPUs'])} GPUs · {r['plan: engine / GPU']} · "
                f"${_count(r['plan: $/month'])}/month — {r['why they differ']}")
        cards.append((route, printable(line), markdown_text(note)))
    return cards


def plan_cards(plan: pd.DataFrame) -> list[Card]:
    """Per route of a plan: GPUs, engine / GPU and $/month as the line to buy; the runner-up (or why the route is
    infeasible) as the note."""
    cards = []
    for r in plan.to_dict("records"):
        route = markdown_text(str(r["route"]))
        if r.get("status") != "ok":
            cards.append((route, "**infeasible**", markdown_text(str(r.get("notes") or ""))))
            continue
        line = f"**{_count(r['gpus'])} GPUs** · {_option(r)} · **${_count(r['total_usd_per_month'])}/month**"
        runner = r.get("runner_up")
        note = "" if runner is None or pd.isna(runner) or not str(runner) else f"runner-up: {runner}"
        verdict = window_verdicts(pd.DataFrame([r])).get(str(r["route"]), "")
        note = " · ".join(part for part in (verdict, note) if part)
        cards.append((route, printable(line), markdown_text(note)))
    return cards


def window_verdicts(plan: pd.DataFrame) -> dict[str, str]:
    """Per planned online route judged on its fleet: the line on its SLO windows (PlanRow.window_verdict)."""
    rows = plan_rows(plan.reindex(columns=PLAN_SCHEMA.names))
    return {r.route: text for r in rows if r.ok and (text := r.window_verdict())}


def sizing_choices(plan: pd.DataFrame, route: str) -> pd.DataFrame:
    """An online route's three priced ways to size its fleet, side by side: steady (the recommendation: holds
    every window), whole-log (sized on the whole run's percentile, as other planners size) and autoscaled (a
    warm floor plus scale-up); each with its replicas, $/month and SLO windows in breach.  Empty when the route
    was not judged window by window."""
    rows = [r for r in plan_rows(plan.reindex(columns=PLAN_SCHEMA.names)) if r.route == route and r.ok]
    if not rows or rows[0].windows is None:
        return pd.DataFrame(columns=["sizing", "replicas", "$/month", "windows in breach"])
    r = rows[0]
    out = [("steady (recommended)", str(r.replicas), r.total_usd_per_month, r.windows_in_breach)]
    if r.whole_log_replicas is not None:
        out.append(("whole-log p-value", str(r.whole_log_replicas), r.whole_log_usd_per_month,
                    r.whole_log_windows_in_breach))
    if r.autoscaled_floor is not None and r.autoscaled_floor < (r.replicas or 0):
        out.append(("autoscaled", f"{r.autoscaled_floor} to {r.replicas}", r.autoscaled_usd_per_month,
                    r.autoscaled_windows_in_breach))
    elif r.autoscaled_floor is not None:
        out.append(("autoscaled: cannot beat steady", str(r.replicas), r.total_usd_per_month, r.windows_in_breach))
    return pd.DataFrame([(name, n, f"${usd:,.0f}", f"{breach} of {r.windows}") for name, n, usd, breach in out],
                        columns=["sizing", "replicas", "$/month", "windows in breach"])


# What an option's curve was fitted on, in words (Option.data_source).
DATA_SOURCE_WORDS = {"measured": "measured by this project", "published": "published (vendor tables)",
                     "transferred": "transferred (predicted from other models and GPUs)"}


def option_sources(options: pd.DataFrame) -> dict[str, str]:
    """Per route, its feasible options grouped by what their curves rest on, cheapest first, each with its GPUs
    and the width of its throughput's 90% interval (high over low)."""
    if options.empty or "data_source" not in options.columns:
        return {}
    feasible = options[options["feasible"].astype(bool)].sort_values("total_usd_per_month", kind="stable")
    out = {}
    for route, rows in feasible.groupby("route", sort=False):
        parts = []
        for source, group in rows.groupby("data_source", sort=False):
            names = ", ".join(f"{r['option']} ({_gpus(r['gpus'])}{_interval(r)})" for r in group.to_dict("records"))
            parts.append(f"{DATA_SOURCE_WORDS.get(str(source), str(source) or 'unknown')}: {names}")
        out[str(route)] = "; ".join(parts)
    return out


def _gpus(count: float) -> str:
    return f"{count:.0f} GPU" + ("" if count == 1 else "s")


def _interval(row: Mapping[str, Any]) -> str:
    low, high = row.get("replica_output_tok_per_s_low"), row.get("replica_output_tok_per_s_high")
    if low is None or high is None or pd.isna(low) or pd.isna(high) or not float(low) > 0:
        return ""
    return f", 90% interval ×{float(high) / float(low):.1f}"
