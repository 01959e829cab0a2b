"""Requests with no second token (0 or 1 output tokens) have no TPOT (issue 47 §8): they are judged on TTFT and
end-to-end latency, left out of the TPOT percentiles, and `predict --log`, `simulate` and `plan` agree on one log."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planner.cli import main
from tests.planner.fakes import write_synthetic_inputs

REQUESTS = 600
# A TPOT target no decode meets (1 ms a token): a log whose requests have no second token must not be judged on it.
TPOT_SLO_MS = "1"
TTFT_SLO_MS = "5000"


def _log(path: Path, outputs: np.ndarray) -> Path:
    gen = np.random.default_rng(7)
    t = np.cumsum(gen.exponential(0.5, REQUESTS))
    stamps = pd.to_datetime(t, unit="s", origin="2024-01-01").strftime("%Y-%m-%dT%H:%M:%S.%f")
    pd.DataFrame({"timestamp": stamps, "prompt_tokens": gen.integers(200, 2000, REQUESTS),
                  "completion_tokens": outputs}).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module", params=["zero", "one"])
def files(request, tmp_path_factory) -> dict[str, Path]:
    """Synthetic profiles, a log whose every request has 0 (or 1) output tokens, its route, and a plan of it."""
    root = tmp_path_factory.mktemp(request.param)
    paths = write_synthetic_inputs(root)
    log = _log(root / f"{request.param}.csv", np.full(REQUESTS, 0 if request.param == "zero" else 1))
    routes = root / "routes.csv"
    assert main(["traffic", "--log", str(log), "--out", str(routes), "--model", "llama-3.1-8b",
                 "--ttft-slo-ms", TTFT_SLO_MS, "--tpot-slo-ms", TPOT_SLO_MS]) == 0
    return {**paths, "log": log, "routes": routes, "plan": root / "plan.csv"}


def _data(files: dict[str, Path]) -> list[str]:
    return ["--profiles", str(files["profiles"]), "--prices", str(files["prices"]), "--ops", str(files["ops"])]


@pytest.mark.parametrize("simulate", [False, True])
def test_plan_sizes_a_log_with_no_second_token_on_ttft(files, tmp_path, capsys, simulate):
    out = tmp_path / "plan.csv"
    assert main(["plan", "--routes", str(files["routes"]), "--out", str(out), *_data(files),
                 *([] if simulate else ["--no-simulate"])]) == 0
    printed = capsys.readouterr().out
    row = pd.read_csv(out).iloc[0]
    assert row["status"] == "ok", printed
    assert "TPOT not judged" in str(row["notes"]) and "misses" not in str(row["notes"])
    assert math.isnan(row["tpot_pred_ms"])


def test_predict_log_reports_no_tpot_and_judges_nothing_on_it(files, capsys):
    assert main(["predict", "--gpu", "h100", "--engine", "vllm", "--model", "llama-3.1-8b", "--request-rate", "2",
                 "--log", str(files["log"]), "--json", "--profiles", str(files["profiles"])]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["tpot_p95_ms"] is None and record["ttft_p95_ms"] is not None


def test_simulate_agrees_with_plan(files, capsys):
    assert main(["plan", "--routes", str(files["routes"]), "--out", str(files["plan"]), *_data(files)]) == 0
    capsys.readouterr()
    assert main(["simulate", "--routes", str(files["routes"]), "--plan", str(files["plan"]), "--json",
                 "--profiles", str(files["profiles"])]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["tpot_p95_ms"] is None and record["attainment"] >= 0.99, record
    assert record["windows_in_breach"] == 0, record
