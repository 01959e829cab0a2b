"""No flag is silently ignored (issue 47 §10): a flag the asked mode would not use is refused in one line, and so is
an output that would be written empty; a routes file whose `log` is a folder says so."""

from __future__ import annotations

import pandas as pd
import pytest

from planner.cli import main
from tests.conftest import REPO
from tests.planner.fakes import batch_route, online_route, write_synthetic_inputs

PREDICT = ["predict", "--gpu", "h200", "--engine", "vllm", "--model", "llama-3.1-8b"]
LOG = str(REPO / "examples" / "traces" / "azure_llm_2023_code.csv")


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("extra, named", [
    (["--request-rate", "8", "--log", LOG, "--router", "round-robin"], "--router: only with --replicas"),
    (["--request-rate", "8", "--log", LOG, "--closed-loop", "rounds"], "--closed-loop: only with --concurrency"),
    (["--request-rate", "8", "--log", LOG, "--num-requests", "50"], "--num-requests: only with --closed-loop rounds"),
    (["--request-rate", "8", "--input-len", "100", "--output-len", "50", "--router", "round-robin"],
     "--router: only with --replicas"),
    (["--concurrency", "8", "--input-len", "100", "--output-len", "50", "--share", "4"],
     "--share: only with --request-rate"),
    (["--batch-size", "8", "--input-len", "100", "--output-len", "50", "--share", "2"],
     "--share: only with --request-rate"),
    (["--concurrency", "8", "--input-len", "100", "--output-len", "50", "--num-requests", "50"],
     "--num-requests: only with --closed-loop rounds"),
    (["--batch-size", "8", "--input-len", "100", "--output-len", "50", "--closed-loop", "rounds"],
     "--closed-loop: only with --concurrency"),
    (["--concurrency", "8", "--input-len", "100", "--output-len", "50", "--replicas", "2"],
     "--replicas: only with --request-rate"),
    (["--concurrency", "8", "--input-len", "100", "--output-len", "50", "--arrival-cv", "2"],
     "--arrival-cv: only with --request-rate"),
])
def test_predict_refuses_a_flag_it_would_ignore(capsys, extra, named):
    assert main([*PREDICT, *extra]) == 2
    assert named in _one_line_error(capsys)


@pytest.mark.parametrize("extra", [
    ["--request-rate", "8", "--replicas", "2", "--log", LOG, "--router", "round-robin"],
    ["--concurrency", "8", "--input-len", "100", "--output-len", "50", "--closed-loop", "rounds",
     "--num-requests", "16"],
    ["--request-rate", "8", "--log", LOG, "--share", "2"],
])
def test_predict_still_takes_each_flag_where_it_is_used(capsys, extra):
    assert main([*PREDICT, *extra]) == 0, capsys.readouterr().err


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("ignored")
    paths = write_synthetic_inputs(root)
    routes = root / "routes.csv"
    pd.DataFrame([online_route("chat"), batch_route("nightly")]).to_csv(routes, index=False)
    return {**paths, "routes": routes, "root": root}


def test_plan_refuses_minutes_out_without_the_simulation(synthetic, tmp_path, capsys):
    minutes = tmp_path / "minutes.csv"
    assert main(["plan", "--routes", str(synthetic["routes"]), "--out", str(tmp_path / "plan.csv"), "--no-simulate",
                 "--minutes-out", str(minutes), "--profiles", str(synthetic["profiles"]), "--prices",
                 str(synthetic["prices"]), "--ops", str(synthetic["ops"])]) == 2
    err = _one_line_error(capsys)
    assert "--minutes-out" in err and "--no-simulate" in err
    assert not minutes.exists() and not (tmp_path / "plan.csv").exists()


def test_a_route_log_that_is_a_folder_says_so(synthetic, tmp_path, capsys):
    (tmp_path / "logs").mkdir()
    routes = tmp_path / "routes.csv"
    pd.DataFrame([{**online_route("chat"), "log": "logs"}]).to_csv(routes, index=False)
    assert main(["plan", "--routes", str(routes), "--out", str(tmp_path / "plan.csv"), "--no-simulate",
                 "--profiles", str(synthetic["profiles"])]) == 2
    err = _one_line_error(capsys)
    assert "'logs'" in err and "is a directory" in err and "not found" not in err
