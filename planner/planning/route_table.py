"""The route table: load_routes reads a routes CSV (its request logs resolved beside it), validate_routes checks
the per-traffic rules, each error naming the line and the column."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fleetfacts.errors import InputError
from fleetfacts.schema import (
    ROUTES,
    escape_controls,
    load_table,
    row_lines,
    split_list,
    validate_frame,
)
from planner.traffic.routes import parse_diurnal


def load_routes(path: str | Path) -> pd.DataFrame:
    """Load a ROUTES file and check the columns each traffic kind needs; raises InputError.

    `log` paths are resolved against the routes file's folder.
    """
    table = load_table(path, ROUTES)
    lines = row_lines(table)
    routes = validate_routes(table, str(path))
    base = Path(path).resolve().parent
    given = list(routes["log"])
    routes["log"] = [str(base / p) if p and not Path(p).is_absolute() else p for p in given]
    for line, log, resolved in zip(lines, given, routes["log"], strict=True):
        if log and Path(resolved).is_dir():
            raise InputError(f"{path}, line {line}, column 'log': request log {log!r} is a directory (expected "
                             "a request log file)")
        if log and not Path(resolved).is_file():
            raise InputError(f"{path}, line {line}, column 'log': request log {log!r} not found "
                             f"(a path relative to the routes file's folder)")
    return routes


def validate_routes(routes: pd.DataFrame, where: str = "routes") -> pd.DataFrame:
    """Schema-check a routes frame (typed or raw) plus per-traffic rules; returns the typed frame.

    Online routes need rate_rps and at least one latency SLO; batch routes need
    num_requests and deadline_hours; route names must be unique.  A name's control characters (line breaks,
    tabs, ESC, NUL, ...) become visible escapes (fleetfacts.schema.escape_controls), so every output (CSV,
    workbook, deployment files, console) carries the same printable name.
    """
    present = [c for c in routes.columns if c in ROUTES.names]
    cells = routes[present].astype(object)
    typed = validate_frame(cells.where(routes[present].notna(), None), ROUTES, where)
    typed["name"] = typed["name"].map(escape_controls)
    seen: set[str] = set()
    for line, row in zip(row_lines(routes), typed.to_dict("records"), strict=True):
        _check_route_row(row, f"{where}, line {line}", seen)
    return typed


# Requests/s below which an online route is refused: the latency prediction and the simulation check replay a
# fixed number of arrivals, so their span grows as 1/rate; below a request every ~12 days that span nears 1e9 s,
# where float timestamps keep only microseconds and a millisecond latency no longer rests on firm digits.
MIN_RATE_RPS = 1e-6


def _check_route_row(row: dict, at: str, seen: set[str]) -> None:
    if row["name"] in seen:
        raise InputError(f"{at}, column 'name': duplicate route name {row['name']!r}")
    seen.add(row["name"])
    needs = {"online": ("rate_rps",), "batch": ("num_requests", "deadline_hours")}[row["traffic"]]
    for column in needs:
        if pd.isna(row[column]):
            raise InputError(f"{at}, column {column!r}: a value is required for a {row['traffic']} route "
                             f"({ROUTES.column(column).doc})")
    if row["traffic"] == "online":
        _check_online_row(row, at)
    _check_shared_prefix(row, at)
    if row["slo_percentile"] >= 100:
        raise InputError(f"{at}, column 'slo_percentile': expected a percentile below 100, "
                         f"got {row['slo_percentile']!r}")
    try:
        parse_diurnal(row.get("diurnal"))
    except ValueError as err:
        raise InputError(f"{at}, column 'diurnal': {err}") from None
    for column in ("tps",):
        for item in split_list(row[column]):
            if not item.isdigit() or int(item) < 1:
                raise InputError(f"{at}, column {column!r}: expected whole numbers >= 1 separated by ';', "
                                 f"got {row[column]!r}")


def _check_shared_prefix(row: dict, at: str) -> None:
    """shared_prefix_tokens: only on a route without a log (a log carries its own prefixes), and no longer than
    the shortest prompt length the row gives (every request starts with it)."""
    shared = row.get("shared_prefix_tokens")
    if shared is None or pd.isna(shared):
        return
    if row.get("log"):
        raise InputError(f"{at}, column 'shared_prefix_tokens': the route replays a log ({row['log']}), whose "
                         "prefixes come from the log itself (hash_ids or session_id); leave it blank")
    given = {c: row[c] for c in ("input_len_mean", "input_len_p50", "input_len_p95", "input_len_p99")
             if not pd.isna(row[c])}
    column = min(given, key=lambda c: given[c])
    if shared > given[column]:
        raise InputError(f"{at}, column 'shared_prefix_tokens': {shared} tokens is longer than {column} "
                         f"{given[column]:g}; every request starts with the shared prefix, so it is at most the "
                         "shortest prompt")


def _check_online_row(row: dict, at: str) -> None:
    if row["rate_rps"] < MIN_RATE_RPS:
        raise InputError(f"{at}, column 'rate_rps': {row['rate_rps']:g} requests/s is below the {MIN_RATE_RPS:g} "
                         "the planner simulates with millisecond precision (MIN_RATE_RPS); one replica serves "
                         f"such a route: plan it at {MIN_RATE_RPS:g}")
    if all(pd.isna(row[c]) for c in ("ttft_slo_ms", "tpot_slo_ms", "e2e_slo_ms")):
        raise InputError(f"{at}, column 'ttft_slo_ms': an online route needs at least one latency SLO "
                         f"(ttft_slo_ms, tpot_slo_ms or e2e_slo_ms)")
