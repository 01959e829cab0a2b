"""Benchmark: what planning all routes together saves over route by route, lever by lever, and how long it takes.

    .venv/bin/python benchmarks/fleet.py [--orgs examples,synthetic] [--routes N] [--seed N]
                                         [--check all|all-levers] [--time-limit S] [--out FILE]

Two organisations: (a) the bundled examples/routes.csv, (b) a synthetic organisation (default 50 routes,
6 models) from `synthetic_organisation(seed)`: SYNTHETIC EXAMPLE TRAFFIC, NOT A MEASUREMENT (rates,
lengths, SLOs and day/night shapes are drawn from the ranges written below).  For each, the route-by-route
plan (planner.planning.plan.make_plan, simulation-checked) is made once and every fleet (planner.planning.fleet.make_fleet)
is compared with it: no levers (engineering counted once per engine and model, which every fleet does),
each lever alone (share, mix, autoscale, pricing) and all together.  Figures: wall time and the fleet's
solve_s (program + simulation rounds), MIP gap, fleet total vs the route-by-route total, savings, the
savings of each lever over no levers, and the lowest simulated SLO attainment.

Prints a table to stdout (progress to stderr) and writes the same figures, the command, the date and the
machine to --out (default benchmarks/results/fleet.md), and the synthetic routes beside it.  Not a timed
test: it prints, it does not assert.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fleetfacts.errors import FleetplanError, InputError  # noqa: E402
from fleetfacts.schema import ROUTES  # noqa: E402
from planner.engine.transfer_check import TRANSFER_MODES  # noqa: E402
from planner.planning.catalog import Catalog, load_inputs  # noqa: E402
from planner.planning.fanout import ProcessMap  # noqa: E402
from planner.planning.fleet import FleetResult, make_fleet  # noqa: E402
from planner.planning.fleet_units import ALL_LEVERS, NO_LEVERS, Levers  # noqa: E402
from planner.planning.plan import PlanResult, make_plan  # noqa: E402
from planner.planning.route_table import load_routes  # noqa: E402
from planner.sizing.assumptions import Assumptions  # noqa: E402

log = logging.getLogger("benchmarks.fleet")

EXAMPLES = REPO / "examples" / "routes.csv"
DEFAULT_OUT = REPO / "benchmarks" / "results" / "fleet.md"
SYNTHETIC_ROUTES = "benchmarks/results/fleet-synthetic-routes.csv"
SYNTHETIC_LABEL = "synthetic example traffic, not a measurement"
# The lever rows: (label, levers).  "none" is the baseline of the single-lever rows.
LEVER_ROWS: tuple[tuple[str, Levers], ...] = (
    ("none", NO_LEVERS),
    ("share", Levers(share=True, mix=False, autoscale=False, pricing=False)),
    ("mix", Levers(share=False, mix=True, autoscale=False, pricing=False)),
    ("autoscale", Levers(share=False, mix=False, autoscale=True, pricing=False)),
    ("pricing", Levers(share=False, mix=False, autoscale=False, pricing=True)),
    ("all", ALL_LEVERS),
)
# Transfer mode (planner.planning.catalog.load_inputs) by default, as `planner fleet` plans: every model of both
# organisations has fitted curves, which span 5+ GPU types over the synthetic organisation's models.
# `--transfer all` adds transferred options on every GPU type (far slower: see benchmarks/results/fleet.md).
DEFAULT_TRANSFER = "auto"


# ---------------------------------------------------------------- the synthetic organisation

@dataclass(frozen=True)
class Archetype:
    """A kind of route: traffic, median lengths (lognormal spread), SLO, rate range (req/s, daily mean)."""

    kind: str
    traffic: str
    input_p50: float
    input_sigma: float
    output_p50: float
    output_sigma: float
    ttft_ms: float | None
    tpot_ms: float | None
    e2e_ms: float | None
    rate_rps: tuple[float, float]
    arrival_cv: tuple[float, float]
    shape: str  # day/night shape of an online route (SHAPES)
    slo_percentile: float = 95.0


# Length medians and spreads are typical of each use, not measured: chat short prompts and medium answers,
# RAG long retrieved prompts, code completion long context and few tokens out, extraction short JSON out,
# agents long tool-laden prompts, batch summarisation long documents.
ARCHETYPES = {
    "chat": Archetype("chat", "online", 600, 0.8, 220, 0.7, 800, 50, None, (0.5, 8.0), (1.0, 1.5), "consumer"),
    "support": Archetype("support", "online", 900, 0.6, 180, 0.6, 600, 40, None, (0.3, 4.0), (1.0, 1.3),
                         "business", slo_percentile=99.0),
    "rag": Archetype("rag", "online", 3000, 0.5, 250, 0.6, 1500, 60, None, (0.3, 5.0), (1.0, 1.5), "business"),
    "code": Archetype("code", "online", 1500, 0.7, 40, 0.9, 400, 30, None, (0.5, 6.0), (1.5, 3.0), "business"),
    "extract": Archetype("extract", "online", 1000, 0.5, 50, 0.5, None, None, 4000, (0.5, 10.0), (1.0, 2.0),
                         "global"),
    "agent": Archetype("agent", "online", 2500, 0.6, 350, 0.7, 2000, 45, None, (0.2, 3.0), (1.2, 2.0), "business"),
}
# Batch archetypes: (kind, prompt p50, sigma, output p50, sigma, documents a job, deadline hours, jobs a month).
BATCH = {
    "summarise": (4000, 0.5, 300, 0.4, (20_000, 200_000), (6.0, 12.0), 30.0),
    "classify": (800, 0.5, 20, 0.3, (100_000, 1_000_000), (8.0, 24.0), 30.0),
    "eval": (1200, 0.6, 400, 0.6, (5_000, 30_000), (12.0, 24.0), 8.0),
}
# The organisation: (model, route kind, routes), 50 routes over 6 models, several per model so that
# sharing matters.  Models with bundled configs and fitted or transferred curves (`python -m planner models`).
ORGANISATION = (
    ("llama-3.1-8b", "chat", 3), ("llama-3.1-8b", "code", 2), ("llama-3.1-8b", "extract", 2),
    ("llama-3.1-8b", "rag", 1), ("llama-3.1-8b", "summarise", 2),
    ("qwen2.5-7b", "chat", 3), ("qwen2.5-7b", "rag", 2), ("qwen2.5-7b", "extract", 2), ("qwen2.5-7b", "classify", 1),
    ("llama-3.3-70b", "support", 2), ("llama-3.3-70b", "rag", 3), ("llama-3.3-70b", "agent", 1),
    ("llama-3.3-70b", "summarise", 2),
    ("qwen3-30b-a3b", "code", 4), ("qwen3-30b-a3b", "chat", 2), ("qwen3-30b-a3b", "agent", 2),
    ("qwen3-30b-a3b", "eval", 1),
    ("gpt-oss-20b", "agent", 3), ("gpt-oss-20b", "chat", 2), ("gpt-oss-20b", "extract", 2),
    ("gpt-oss-20b", "eval", 1),
    ("gpt-oss-120b", "agent", 2), ("gpt-oss-120b", "rag", 2), ("gpt-oss-120b", "support", 2),
    ("gpt-oss-120b", "classify", 1),
)
# Large models serve fewer requests in this organisation: their rate ranges are scaled by this.
LARGE_MODEL_RATE_FACTOR = {"llama-3.3-70b": 0.4, "gpt-oss-120b": 0.6}
# Day/night shapes (synthetic): floor (quietest hour over busiest), width of the busy hump (hours, a Gaussian
# on the circular hour), and regions whose local afternoon sets the busiest UTC hour.
SHAPES = {"business": (0.12, 3.5), "consumer": (0.3, 4.5), "global": (0.6, 6.0)}
REGION_PEAK_UTC = {"europe": 13, "americas": 19, "asia": 6}
UPDATES_PER_MONTH = (0.5, 1.0, 2.0)
Z95, Z99 = 1.6449, 2.3263
# Longest prompt p99 drawn (tokens): within every chosen model's context with room for the output.
MAX_PROMPT_P99 = 16_000


def diurnal_shape(shape: str, peak_utc: int) -> np.ndarray:
    """24 hourly multipliers (busiest hour 1): floor + (1 - floor) x a Gaussian hump at peak_utc (synthetic)."""
    floor, width = SHAPES[shape]
    hours = np.arange(24)
    distance = np.minimum(np.abs(hours - peak_utc), 24 - np.abs(hours - peak_utc))
    return floor + (1 - floor) * np.exp(-0.5 * (distance / width) ** 2)


def _lengths(prefix: str, p50: float, sigma: float, cap: float = np.inf) -> dict[str, float]:
    """mean / p50 / p95 / p99 of a lognormal with this median and sigma, p99 capped at `cap` tokens."""
    p99 = min(p50 * np.exp(Z99 * sigma), cap)
    return {f"{prefix}_mean": round(p50 * np.exp(sigma**2 / 2)), f"{prefix}_p50": round(p50),
            f"{prefix}_p95": round(min(p50 * np.exp(Z95 * sigma), p99)), f"{prefix}_p99": round(p99)}


def _log_uniform(gen: np.random.Generator, low: float, high: float) -> float:
    return float(np.exp(gen.uniform(np.log(low), np.log(high))))


def _online_row(gen: np.random.Generator, model: str, arch: Archetype) -> dict[str, Any]:
    factor = LARGE_MODEL_RATE_FACTOR.get(model, 1.0)
    rate = round(_log_uniform(gen, arch.rate_rps[0] * factor, arch.rate_rps[1] * factor), 3)
    region = str(gen.choice(list(REGION_PEAK_UTC)))
    shape = diurnal_shape(arch.shape, REGION_PEAK_UTC[region] + int(gen.integers(-1, 2)))
    jitter = float(gen.uniform(0.9, 1.1))  # prompt / output medians vary a little route to route
    row = {"traffic": "online", "rate_rps": rate, "peak_to_mean": round(float(shape.max() / shape.mean()), 3),
           "arrival_cv": round(float(gen.uniform(*arch.arrival_cv)), 2), "slo_percentile": arch.slo_percentile,
           "ttft_slo_ms": arch.ttft_ms, "tpot_slo_ms": arch.tpot_ms, "e2e_slo_ms": arch.e2e_ms,
           "diurnal": ";".join(f"{v:.3f}" for v in shape),
           **_lengths("input_len", arch.input_p50 * jitter, arch.input_sigma, MAX_PROMPT_P99),
           **_lengths("output_len", arch.output_p50 * jitter, arch.output_sigma)}
    row["notes"] = (f"{SYNTHETIC_LABEL} (benchmarks/fleet.py): {arch.kind}, mean {rate:g} req/s, synthetic "
                    f"{arch.shape} day/night shape peaking in {region} afternoon")
    return row


def _batch_row(gen: np.random.Generator, kind: str) -> dict[str, Any]:
    in_p50, in_sigma, out_p50, out_sigma, documents, deadline, jobs = BATCH[kind]
    n = int(round(_log_uniform(gen, *documents), -3))
    hours = float(round(gen.uniform(*deadline)))
    row = {"traffic": "batch", "num_requests": n, "deadline_hours": hours, "jobs_per_month": jobs,
           **_lengths("input_len", in_p50, in_sigma, MAX_PROMPT_P99), **_lengths("output_len", out_p50, out_sigma)}
    row["notes"] = f"{SYNTHETIC_LABEL} (benchmarks/fleet.py): {kind} job, {n} requests within {hours:g} h"
    return row


def synthetic_organisation(seed: int = 0, n_routes: int | None = None) -> pd.DataFrame:
    """The synthetic organisation's routes (ROUTES columns), drawn deterministically from `seed`:
    ORGANISATION's routes (the first n_routes of them when given).  Synthetic example traffic, not a measurement.
    """
    gen = np.random.default_rng(seed)
    rows = []
    for model, kind, count in ORGANISATION:
        for i in range(count):
            row = _online_row(gen, model, ARCHETYPES[kind]) if kind in ARCHETYPES else _batch_row(gen, kind)
            row.update(name=f"{model}-{kind}-{i + 1}", model=model,
                       model_updates_per_month=float(gen.choice(UPDATES_PER_MONTH)))
            rows.append(row)
    frame = pd.DataFrame(rows[:n_routes] if n_routes else rows)
    return frame.reindex(columns=[c for c in ROUTES.names if c in frame.columns or c == "diurnal"])


# ---------------------------------------------------------------- running the fleets

@dataclass(frozen=True)
class Row:
    """One fleet run's figures (USD per month), as kept in the runs file."""

    org: str
    levers: str
    checked: bool
    wall_s: float
    summary: dict[str, Any]

    def get(self, key: str) -> Any:
        return self.summary.get(key)


class Runs:
    """The rows done so far, one JSON line each in the runs file (read back with --resume)."""

    def __init__(self, path: Path, setup: dict[str, Any], resume: bool):
        self.path, self.setup = path, setup
        self.done: dict[tuple[str, str, bool], Row] = {}
        if resume and path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                item = json.loads(line)
                if item["setup"] == setup:
                    row = Row(**item["row"])
                    self.done[(row.org, row.levers, row.checked)] = row
        elif path.exists():
            path.unlink()

    def add(self, row: Row) -> None:
        self.done[(row.org, row.levers, row.checked)] = row
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"setup": self.setup, "row": asdict(row)}) + "\n")


@dataclass
class Org:
    """One organisation: its routes, catalog and (made on first need) route-by-route plan."""

    name: str
    routes: pd.DataFrame
    transfer: str
    workers: int
    catalog: Catalog | None = None
    baseline: PlanResult | None = None
    plan_s: float = 0.0

    def inputs(self) -> Catalog:
        if self.catalog is None:
            start = time.perf_counter()
            self.catalog = load_inputs(transfer=self.transfer)
            log.info("%s: curves fitted in %.1f s (not in the timings)", self.name, time.perf_counter() - start)
        return self.catalog

    def plan(self, a: Assumptions) -> PlanResult:
        if self.baseline is None:
            catalog = self.inputs()
            log.info("%s: %d routes, route-by-route plan with its simulation check (%d worker(s)) ...", self.name,
                     len(self.routes), self.workers)
            start = time.perf_counter()
            mapper = ProcessMap(self.workers) if self.workers > 1 else map
            self.baseline = make_plan(self.routes, catalog, a, check_by_simulation=True, map_routes=mapper)
            self.plan_s = time.perf_counter() - start
            log.info("%s: route-by-route plan in %.1f s (%s)", self.name, self.plan_s,
                     self.baseline.plan["status"].value_counts().to_dict())
        return self.baseline


def run_fleet(org: Org, label: str, levers: Levers, check: bool, a: Assumptions, time_limit_s: float) -> Row:
    """One make_fleet call on the organisation's route-by-route plan, timed."""
    baseline = org.plan(a)
    log.info("%s: fleet, levers %s, simulation check %s ...", org.name, label, "on" if check else "off")
    start = time.perf_counter()
    result = make_fleet(org.routes, org.inputs(), a, levers, baseline=baseline, check=check,
                        time_limit_s=time_limit_s)
    wall = time.perf_counter() - start
    s = result.summary
    log.info("%s: %s in %.1f s: $%.0f/month (route by route $%.0f), gap %s, lowest attainment %s%s", org.name,
             label, wall, s["total_usd_per_month"], s["per_route_usd_per_month"], s["mip_gap"], s["sim_attainment"],
             ", every route kept route by route" if s["kept_route_by_route"] else "")
    return Row(org.name, label, check, wall, _summary(result))


def _summary(result: FleetResult) -> dict[str, Any]:
    """The summary's figures plus how many deployments of each kind the fleet has."""
    summary = {k: v for k, v in result.summary.items() if k != "solver"}
    summary["solver"] = str(result.summary["solver"])
    summary["kinds"] = result.deployments["kind"].value_counts().to_dict() if len(result.deployments) else {}
    return summary


# ---------------------------------------------------------------- the table

HEADER = ("org", "levers", "sim check", "wall s", "solve s", "MIP gap", "fleet $/month", "route-by-route $/month",
          "saves vs route-by-route", "saves vs no levers", "lowest sim attainment", "GPUs at busiest hour",
          "deployments")


def _money(value: float) -> str:
    return f"{value:,.0f}"


def _pct(part: float, whole: float) -> str:
    return f" ({part / whole:.1%})" if whole else ""


def _none_row(rows: list[Row], row: Row) -> Row | None:
    """The organisation's no-levers row, checked like `row` when there is one, else any."""
    same = [r for r in rows if r.org == row.org and r.levers == "none"]
    return next((r for r in same if r.checked == row.checked), same[0] if same else None)


def table_rows(rows: list[Row]) -> list[tuple[str, ...]]:
    """The figures of every run as table cells."""
    out = []
    for row in rows:
        total, per_route = row.get("total_usd_per_month"), row.get("per_route_usd_per_month")
        none = _none_row(rows, row)
        over_none = ""
        if none is not None and row.levers != "none":
            base = none.get("total_usd_per_month")
            over_none = _money(base - total) + _pct(base - total, base) + ("" if none.checked == row.checked
                                                                           else " (none unchecked)")
        gap, attained = row.get("mip_gap"), row.get("sim_attainment")
        kinds = ", ".join(f"{n} {k}" for k, n in row.get("kinds").items())
        if row.get("kept_route_by_route"):
            kinds += " (program's fleet not cheaper once checked: every route kept)"
        out.append((row.org, row.levers, "yes" if row.checked else "no", f"{row.wall_s:.1f}",
                    f"{row.get('solve_s'):.1f}", "" if gap is None else f"{gap:.4f}", _money(total), _money(per_route),
                    _money(per_route - total) + _pct(per_route - total, per_route), over_none,
                    "" if attained is None else f"{attained:.1%}",
                    ", ".join(f"{n} {g}" for g, n in row.get("gpus_by_type").items()), kinds))
    return out


def markdown_table(rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    return lines + ["| " + " | ".join(cells) + " |" for cells in rows]


def org_lines(org: Org) -> list[str]:
    """One paragraph per organisation: what it is and the route-by-route plan's figures."""
    routes = org.routes
    online = int((routes["traffic"] == "online").sum())
    what = (f"`{EXAMPLES.relative_to(REPO)}` (example traffic, not a measurement)" if org.name == "examples" else
            f"**{SYNTHETIC_LABEL}**: `synthetic_organisation(seed)` in benchmarks/fleet.py, routes written to "
            f"`{SYNTHETIC_ROUTES}` (online routes carry a synthetic day/night `diurnal` shape)")
    line = (f"- **{org.name}**: {what}; {len(routes)} routes ({online} online, {len(routes) - online} batch), "
            f"{routes['model'].nunique()} models ({', '.join(sorted(routes['model'].unique()))}); transfer "
            f"`{org.transfer}`")
    if org.baseline is None:
        return [line + " (every row resumed: route-by-route plan not re-made)."]
    plan = org.baseline.plan
    ok = plan[plan["status"] == "ok"]
    offered = org.baseline.options[org.baseline.options["feasible"].astype(bool)]["gpu"].nunique()
    lines = [line + f": feasible options on {offered} GPU types; route-by-route plan (simulation-checked, "
             f"{org.workers} worker(s)) in {org.plan_s:.1f} s, {len(ok)} routes planned, "
             f"${ok['total_usd_per_month'].sum():,.0f}/month on {', '.join(sorted(ok['gpu'].astype(str).unique()))}."]
    failed = plan[plan["status"] != "ok"]
    if len(failed):
        lines.append(f"  Not planned (no feasible option): {', '.join(failed['route'].astype(str))}.")
    return lines


# ---------------------------------------------------------------- main

CHECK_MODES = ("auto", "all", "all-levers")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orgs", default="examples,synthetic", help="comma-separated: examples, synthetic")
    parser.add_argument("--levers", default=",".join(label for label, _ in LEVER_ROWS),
                        help="comma-separated lever rows to run (default all)")
    parser.add_argument("--routes", type=int, default=None, help="synthetic: only the first N routes (default all)")
    parser.add_argument("--seed", type=int, default=0, help="synthetic organisation's seed")
    parser.add_argument("--check", choices=CHECK_MODES, default="auto",
                        help="which fleets are simulation-checked: all, only the all-levers one, or auto (every "
                             "examples fleet, the synthetic all-levers one)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="solver time limit per solve, seconds")
    parser.add_argument("--transfer", choices=TRANSFER_MODES, default=DEFAULT_TRANSFER,
                        help="transferred options, as for `planner fleet --transfer`")
    parser.add_argument("--workers", type=int, default=1, help="processes for the route-by-route plans")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="results markdown (runs file and synthetic routes "
                        "beside it)")
    parser.add_argument("--resume", action="store_true", help="keep the rows of the runs file made with the same "
                        "settings; run only the others")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    logging.getLogger("planner").setLevel(logging.WARNING)
    try:
        return run(args, argv if argv is not None else sys.argv[1:])
    except FleetplanError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _check_on(mode: str, org: str, label: str) -> bool:
    return mode == "all" or label == "all" or (mode == "auto" and org == "examples")


def _org(name: str, args: argparse.Namespace, out: Path) -> Org:
    if name == "examples":
        return Org(name, load_routes(EXAMPLES), args.transfer, args.workers)
    if name == "synthetic":
        routes = synthetic_organisation(args.seed, args.routes)
        routes.to_csv(out.parent / Path(SYNTHETIC_ROUTES).name, index=False)
        return Org(name, routes, args.transfer, args.workers)
    raise InputError(f"--orgs {name!r}: expected examples or synthetic")


def run(args: argparse.Namespace, argv: list[str]) -> int:
    started = time.perf_counter()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    levers = dict(LEVER_ROWS)
    wanted = [label for label in args.levers.split(",") if label]
    for label in wanted:
        if label not in levers:
            raise InputError(f"--levers {label!r}: expected some of {', '.join(levers)}")
    setup = {"seed": args.seed, "routes": args.routes, "time_limit": args.time_limit, "transfer": args.transfer}
    runs = Runs(out.with_suffix(".jsonl"), setup, args.resume)
    a = Assumptions()
    orgs = [_org(name, args, out) for name in args.orgs.split(",") if name]
    rows: list[Row] = []
    for org in orgs:
        for label in wanted:
            check = _check_on(args.check, org.name, label)
            row = runs.done.get((org.name, label, check))
            if row is None:
                row = run_fleet(org, label, levers[label], check, a, args.time_limit)
                runs.add(row)
            rows.append(row)
            _write(out, args, argv, orgs, rows, time.perf_counter() - started, done=False)
    table = markdown_table(table_rows(rows))
    print("\n".join(table))
    total_s = time.perf_counter() - started
    _write(out, args, argv, orgs, rows, total_s, done=True)
    log.info("all done in %.1f s; written %s", total_s, out)
    return 0


def _write(out: Path, args: argparse.Namespace, argv: list[str], orgs: list[Org], rows: list[Row], total_s: float,
           done: bool) -> None:
    """The results markdown as far as the run has got (a partial one says so and how to resume)."""
    about = [line for org in orgs for line in org_lines(org)]
    lines = _report(argv, about, markdown_table(table_rows(rows)), total_s)
    if not done:
        lines[1:1] = ["", "**Partial: the run has not finished.** Resume with the same command and `--resume`."]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _report(argv: list[str], about: list[str], table: list[str], total_s: float) -> list[str]:
    command = " ".join([".venv/bin/python benchmarks/fleet.py", *argv])
    machine = f"{os.cpu_count()} cores ({platform.machine()}), Python {platform.python_version()}"
    return [
        "# Fleet benchmark: planning all routes together vs route by route",
        "",
        f"Command: `{command}`  ",
        f"Date: {datetime.date.today().isoformat()}  ",
        f"Machine: {machine}, shared with other jobs while it ran  ",
        f"Wall time of this invocation: {total_s:.0f} s (curves fitted once per organisation, not in the row "
        "timings; rows resumed from the runs file keep their own timings)",
        "",
        *about,
        "",
        "Each row is one `make_fleet` call on the organisation's route-by-route plan (made once, passed as "
        "`baseline`). *wall s*: the call; *solve s*: the fleet's `solve_s` (program solves + simulation rounds). "
        "*saves vs route-by-route*: the route-by-route plan's total minus the fleet's. *saves vs no levers*: the "
        "`none` fleet's total minus this one's, what the lever adds. Every fleet, `none` included, counts "
        "engineering once per engine and model, so `none`'s saving vs route-by-route is that alone. *lowest sim "
        "attainment*: the lowest simulated share of requests within SLO over the deployments checked (target "
        f"{Assumptions().slo_attainment:.0%}); blank when the fleet was not simulation-checked. Costs in USD per "
        "month from the bundled price table.",
        "",
        *table,
    ]


if __name__ == "__main__":
    sys.exit(main())
