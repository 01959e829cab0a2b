"""The plan uses a route's prefix structure (issue 49 item 3): the bundled examples/routes-prefix.csv planned,
its predicted hit rate checked against `predict --replicas N --router R`, against the same route cold, and
through `deploy`."""

from __future__ import annotations

import json
import math
import shlex
import shutil
from pathlib import Path

import pandas as pd
import pytest

from fleetfacts.schema import load_plan_rows
from planner.cli import main
from planner.planning.sim_check import router_in_notes
from planner.sizing.plan_row import plan_rows
from planner.traffic.routes import Route
from planner.traffic.workload import route_load, route_log_load
from tests.conftest import cli_fits_bundled_once

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_ROUTES = ROOT / "examples" / "routes-prefix.csv"
EXAMPLE_LOG = ROOT / "examples" / "traces" / "synthetic_chat_prefix.jsonl"
# The example's routes four times as busy: the log compressed (peak_to_mean), so fleets of more than one replica
# (a router matters) and the prefix cache's savings can show in the replica counts.
BUSY = 4.0


def _plan(folder: Path, routes: pd.DataFrame, name: str = "plan") -> dict:
    routes.to_csv(folder / f"{name}-routes.csv", index=False)
    out = folder / f"{name}.csv"
    with cli_fits_bundled_once():
        assert main(["plan", "--routes", str(folder / f"{name}-routes.csv"), "--out", str(out)]) == 0
    return {r.route: r for r in plan_rows(load_plan_rows(out))}


def _copy_example(folder: Path) -> pd.DataFrame:
    shutil.copytree(ROOT / "examples" / "traces", folder / "traces")
    return pd.read_csv(EXAMPLE_ROUTES)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    folder = tmp_path_factory.mktemp("example")
    return folder, _plan(folder, _copy_example(folder))


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    """The busier example with its prefixes, and the same routes cold: the log without hash_ids, no
    shared_prefix_tokens."""
    folder = tmp_path_factory.mktemp("busy")
    routes = _copy_example(folder)
    routes["peak_to_mean"] = BUSY
    routes["gpus"], routes["engines"] = "h100", "vllm"  # one option warm and cold: their replica counts compare
    warm = _plan(folder, routes)
    log = pd.read_json(folder / "traces" / "synthetic_chat_prefix.jsonl", lines=True)
    pd.DataFrame({"timestamp": log["timestamp"] / 1000.0, "input_len": log["input_length"],
                  "output_len": log["output_length"]}).to_csv(folder / "traces" / "cold.csv", index=False)
    routes.loc[routes["name"] == "chat-prefix", "log"] = "traces/cold.csv"
    routes["shared_prefix_tokens"] = None
    cold = _plan(folder, routes, "cold")
    return folder, warm, cold


def test_the_example_plans_with_a_predicted_hit_rate(example):
    _, rows = example
    for name in ("chat-prefix", "chat-system-prompt"):
        row = rows[name]
        assert row.ok
        assert 0.0 < row.prefix_hit_rate_pred < 1.0
        assert row.router in ("least-outstanding", "prefix-affinity")
        assert f"{row.prefix_hit_rate_pred:.1%} of prompt tokens found cached" in row.window_verdict()


def test_the_hit_rate_is_predict_s_for_the_same_fleet(example, capsys):
    """`predict --log LOG --replicas N --router R` at the log's own rate gives the plan's hit rate."""
    folder, rows = example
    row = rows["chat-prefix"]
    rate = (len(pd.read_json(EXAMPLE_LOG, lines=True)) - 1) / 3596.0  # the log's span: routes-prefix.csv's notes
    capsys.readouterr()
    assert main(["predict", "--gpu", row.gpu, "--engine", row.engine, "--engine-version", row.engine_version,
                 "--precision", row.precision, "--tp", str(row.tp), "--model", row.model, "--log", str(EXAMPLE_LOG),
                 "--format", "mooncake", "--request-rate", f"{rate:.9g}", "--replicas", str(row.replicas),
                 "--router", row.router, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["prefix_hit_rate"] == pytest.approx(row.prefix_hit_rate_pred, abs=1e-3)


def test_the_system_prompt_route_gets_shared_blocks(example):
    folder, _ = example
    route = Route.from_row(_row(folder, "chat-system-prompt"))
    load = route_load(route, *route_log_load(route))
    assert load.blocks is not None and len(load.blocks) == load.arrival_s.size
    shared = 1800 // load.blocks.block_size
    for ids, tokens in zip(load.blocks.hash_ids[:50], load.input_len[:50], strict=True):
        full = min(shared, int(tokens) // load.blocks.block_size)  # a prompt shorter than the system prompt
        assert list(ids[:full]) == list(range(full))
        assert not set(ids[full:]) & set(range(shared))


def _row(folder: Path, name: str) -> dict:
    routes = pd.read_csv(folder / "plan-routes.csv")
    row = routes[routes["name"] == name].iloc[0].to_dict()
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


def test_prefixes_never_need_more_replicas_than_cold(busy):
    _, warm, cold = busy
    for name in ("chat-prefix", "chat-system-prompt"):
        assert warm[name].ok and cold[name].ok
        assert (warm[name].gpu, warm[name].tp) == (cold[name].gpu, cold[name].tp)
        assert warm[name].replicas <= cold[name].replicas
        assert warm[name].total_usd_per_month <= cold[name].total_usd_per_month
        assert math.isnan(cold[name].prefix_hit_rate_pred)
        assert 0.0 < warm[name].prefix_hit_rate_pred < 1.0


def test_the_other_router_is_priced_in_the_notes(busy):
    _, warm, _ = busy
    for name in ("chat-prefix", "chat-system-prompt"):
        row = warm[name]
        other = "prefix-affinity" if row.router == "least-outstanding" else "least-outstanding"
        assert f"behind {other}: " in row.notes
        # the note reads back as the app reads it (planner.planning.sim_check writes and parses it, one format)
        priced = router_in_notes(row.notes)
        assert priced is not None and priced.router == other
        assert priced.reason or (priced.replicas >= 1 and priced.usd_per_month > 0)


def test_deploy_writes_the_router_and_the_cached_tokens_flag(busy, tmp_path):
    folder, warm, _ = busy
    out = tmp_path / "deploy"
    plan = folder / "plan.csv"
    assert main(["deploy", "--plan", str(plan), "--format", "vllm", "--out", str(out)]) == 0
    for name in ("chat-prefix", "chat-system-prompt"):
        text = next(out.glob(f"{name}*.vllm.sh")).read_text()
        argv = shlex.split(next(line for line in text.splitlines() if line.startswith("exec vllm")))
        assert "--enable-prompt-tokens-details" in argv
        assert not any("prefix-caching" in a or "prefix_caching" in a for a in argv)
        if warm[name].replicas >= 2:
            assert f"behind a {warm[name].router} load balancer" in text
    assert main(["deploy", "--plan", str(plan), "--format", "k8s", "--out", str(tmp_path / "k8s")]) == 0
    manifest = next((tmp_path / "k8s").glob("chat-prefix*.yaml")).read_text()
    assert f"fleetplan.io/router: {warm['chat-prefix'].router}" in manifest
