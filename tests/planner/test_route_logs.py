"""Issue 47 item 3: a route is never sized on another route's traffic (`python -m planner plan` on real files)."""

from __future__ import annotations

import pandas as pd
import pytest

from fleetfacts.schema import ROUTES
from planner.cli import main

PER_ROUTE = 1500
OWN_PROMPT, OUTPUT = 400, 100
ROUTE_ROW = {"model": "llama-3.1-8b", "traffic": "online", "rate_rps": 2.5, "peak_to_mean": 1.0, "arrival_cv": 1.0,
             "input_len_mean": 400.0, "output_len_mean": 100.0, "slo_percentile": 95.0, "ttft_slo_ms": 2000.0,
             "tpot_slo_ms": 100.0, "log": "log.csv"}


def two_route_log(folder, routes=("chat", "code")) -> None:
    """PER_ROUTE requests of each route, interleaved 0.2 s apart: the first route's prompts OWN_PROMPT tokens,
    the others' 10 times longer (plan's max_model_len is the longest request it replays)."""
    rows = ["timestamp,route,prompt_tokens,completion_tokens"]
    for i in range(PER_ROUTE * len(routes)):
        k = i % len(routes)
        rows.append(f"{1_700_000_000 + 0.2 * i:.1f},{routes[k]},{OWN_PROMPT * (10 if k else 1)},{OUTPUT}")
    (folder / "log.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")


def routes_file(folder, name: str):
    path = folder / "routes.csv"
    pd.DataFrame([{"name": name, **ROUTE_ROW}]).reindex(columns=ROUTES.names).to_csv(path, index=False)
    return path


def plan_and_simulate(tmp_path, name: str, capsys) -> tuple[int, str, str]:
    """`plan` on one route named `name` replaying log.csv, then `simulate` on that plan: (exit status, what was
    replayed, stderr).  What was replayed: plan's max_model_len (its longest request) and simulate's load line."""
    routes, out = routes_file(tmp_path, name), tmp_path / "plan.csv"
    status = main(["plan", "--routes", str(routes), "--out", str(out)])
    err = capsys.readouterr().err
    if status != 0:
        return status, "", err
    assert main(["simulate", "--routes", str(routes), "--plan", str(out)]) == 0
    load = capsys.readouterr().out.splitlines()[0]
    return status, f"max_model_len {pd.read_csv(out)['max_model_len'].iloc[0]}; {load}", err


@pytest.mark.parametrize("name", ["chat", "Chat"])
def test_a_route_replays_only_its_own_rows_of_a_multi_route_log(tmp_path, capsys, bundled_fitted_once, name):
    """The campaign's case: `Chat` on a log of `chat` and `code` replayed all 3,000 requests."""
    two_route_log(tmp_path)
    status, replayed, err = plan_and_simulate(tmp_path, name, capsys)
    assert status == 0, err
    assert f"max_model_len {OWN_PROMPT + OUTPUT};" in replayed, replayed
    assert f"the route's log ({PER_ROUTE} requests" in replayed, replayed


def test_a_multi_route_log_without_the_routes_name_is_refused_naming_its_routes(tmp_path, capsys,
                                                                                 bundled_fitted_once):
    two_route_log(tmp_path)
    status, _, err = plan_and_simulate(tmp_path, "search", capsys)
    assert status == 2
    line = err.strip()
    assert "\n" not in line and "Traceback" not in line, err
    assert "'search'" in line and "chat, code" in line and "log.csv" in line, line


def test_a_log_with_two_spellings_of_the_name_is_refused_as_ambiguous(tmp_path, capsys, bundled_fitted_once):
    two_route_log(tmp_path, routes=("chat", "CHAT", "code"))
    status, _, err = plan_and_simulate(tmp_path, "Chat", capsys)
    assert status == 2 and "CHAT, chat" in err and "'Chat'" in err, err


def test_a_one_route_log_is_the_routes_own_whatever_its_route_column_says(tmp_path, capsys, bundled_fitted_once):
    two_route_log(tmp_path, routes=("gateway",))
    status, replayed, err = plan_and_simulate(tmp_path, "Chat", capsys)
    assert status == 0, err
    assert f"the route's log ({PER_ROUTE} requests" in replayed, replayed


def test_the_fleet_check_replays_each_route_its_own_rows_of_a_shared_log(tmp_path):
    """Two routes on one multi-route log at the same peak_to_mean: the fleet check's log cache was keyed on the
    file and the peak alone, so the second route replayed the first one's rows."""
    from planner.planning import fleet_check
    from planner.traffic.routes import Route

    two_route_log(tmp_path)
    prompts = {}
    for name in ("chat", "code"):
        route = Route.from_row({"name": name, **ROUTE_ROW, "log": str(tmp_path / "log.csv")})
        load = fleet_check._log(route)
        prompts[name] = (len(load.arrival_s), set(load.input_len.tolist()))
    assert prompts == {"chat": (PER_ROUTE, {OWN_PROMPT}), "code": (PER_ROUTE, {10 * OWN_PROMPT})}
