"""Property-based fuzzing of every input format (issue 14, "Keep it that way").

Each test mutates a valid file of one format (truncation, deletion, insertion of
hostile text: control characters, quotes, newlines, huge and non-finite numbers,
deep nesting) and loads it the way the planner does.  The documented outcomes:
the file loads (possibly with rows skipped and reported), or an InputError (a
FleetplanError) whose message is one line naming the file; never any other
exception.  The CLI test also checks exit 2 and an untouched output file.

Examples per test: FUZZ_EXAMPLES (default 15, the CI budget); scripts/fuzz.sh runs many more.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetfacts.errors import FleetplanError
from fleetfacts.schema import ENGINE_OPS, PRICES, load_table
from tests.conftest import REPO

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "15"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("FUZZ_RANDOM") != "1",
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

HOSTILE = ["", ",", '"', '""', "\n", "\r\n", "\x00", "\x1b[31m", "\u202e", "#", "=cmd|' /C calc'!A0", "-1", "0",
           "1e308", "1e309", "-1e309", "nan", "inf", "9" * 400, "1e30", "1e20", "0.5", "[" * 2000, "{" * 2000,
           "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "\ufeff", "\xff\xfe", "online", "batch", "llama-3.1-8b",
           "\t=1+1", "😀", "a" * 5000]
MUTATION = st.tuples(st.sampled_from(["insert", "delete", "truncate", "replace"]), st.floats(0, 1),
                     st.one_of(st.sampled_from(HOSTILE), st.text(max_size=20)), st.integers(1, 40))


def mutate(text: str, mutations: list[tuple[str, float, str, int]]) -> str:
    """Apply (kind, position share, text, span) mutations in order."""
    for kind, share, piece, span in mutations:
        at = int(share * len(text))
        if kind == "insert":
            text = text[:at] + piece + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + span:]
        elif kind == "truncate":
            text = text[:at]
        else:
            text = text[:at] + piece + text[at + span:]
    return text


def check_error(err: FleetplanError, path: Path) -> None:
    message = str(err)
    assert "\n" not in message.strip(), message
    assert path.name in message or str(path) in message, message


def fuzz_file(tmp: Path, name: str, seed: Path, mutations: list, binary: bytes | None = None) -> Path:
    path = tmp / name
    if binary is not None:
        path.write_bytes(binary)
    else:
        path.write_text(mutate(seed.read_text(encoding="utf-8"), mutations), encoding="utf-8", errors="surrogatepass")
    return path


def _each(load, seed: Path, name: str, mutations: list, beside: Path | None = None) -> None:
    """Fuzz `seed` into a temporary folder (with a copy of the folder `beside`, e.g. the logs a routes file
    names) and load it: it loads, or fails with one line naming the file."""
    with tempfile.TemporaryDirectory() as folder:
        if beside is not None:
            shutil.copytree(beside, Path(folder) / beside.name)
        try:
            path = fuzz_file(Path(folder), name, seed, mutations)
        except UnicodeEncodeError:
            return  # a lone surrogate cannot be a file's text
        try:
            load(path)
        except FleetplanError as err:
            check_error(err, path)


def catalog():
    from tests.conftest import bundled_catalog
    return bundled_catalog()


ROUTES = REPO / "examples" / "routes.csv"
PLAN_ROUTES = ROUTES


@FUZZ
@given(st.lists(MUTATION, min_size=1, max_size=4))
def test_fuzzed_routes_plan_or_fail_with_one_line(mutations):
    from planner.planning.plan import make_plan
    from planner.planning.route_table import load_routes
    _each(lambda p: make_plan(load_routes(p), catalog()), ROUTES, "routes.csv", mutations,
          beside=REPO / "examples" / "traces")


@FUZZ
@given(st.lists(MUTATION, min_size=1, max_size=4))
def test_fuzzed_prices_load_or_fail_with_one_line(mutations):
    _each(lambda p: load_table(p, PRICES), REPO / "planner" / "data" / "prices.csv", "prices.csv", mutations)


@FUZZ
@given(st.lists(MUTATION, min_size=1, max_size=4))
def test_fuzzed_engine_ops_load_or_fail_with_one_line(mutations):
    _each(lambda p: load_table(p, ENGINE_OPS), REPO / "planner" / "data" / "engine_ops.csv", "engine_ops.csv",
          mutations)


PROFILE = REPO / "profiles" / "measured" / "h200" / "vllm-llama-3.1-8b-bf16-tp1" / "profile.csv"


@FUZZ
@given(st.lists(MUTATION, min_size=1, max_size=4))
def test_fuzzed_profiles_fit_or_fail_with_one_line(mutations):
    from planner.engine.curves import fit_curves, load_profiles

    def load(path: Path) -> None:
        fit_curves(load_profiles(path.parent))
    _each(load, PROFILE, "profile.csv", mutations)


@FUZZ
@given(st.lists(MUTATION, min_size=1, max_size=4))
def test_fuzzed_plans_read_or_fail_with_one_line(mutations):
    from planner.planning.plan import make_plan
    from planner.planning.plan_files import read_plan, write_plan
    from planner.planning.route_table import load_routes
    seed_dir = Path(tempfile.mkdtemp())
    try:
        seed = seed_dir / "plan.csv"
        write_plan(make_plan(load_routes(ROUTES), catalog()), seed)
        _each(read_plan, seed, "plan.csv", mutations)
    finally:
        shutil.rmtree(seed_dir)


LOG = REPO / "examples" / "traces" / "azure_llm_2023_code.csv"


@FUZZ
@given(st.lists(MUTATION, min_size=1, max_size=4))
def test_fuzzed_traffic_logs_read_or_fail_with_one_line(mutations):
    from planner.traffic.logs import log_to_routes
    short = Path(tempfile.mkdtemp())
    try:
        seed = short / "seed.csv"
        seed.write_text("".join(LOG.read_text().splitlines(keepends=True)[:200]))
        _each(lambda p: log_to_routes(p, model="llama-3.1-8b", ttft_slo_ms=1000.0), seed, "log.csv", mutations)
    finally:
        shutil.rmtree(short)


# Gaps between bursts of a log (issue 47 item 4): none, within a window, at a window's edge, hours, a year, three
# years.  A log of 1 request and then 100 a year later never finished planning.
YEAR_S = 365 * 86400.0
GAPS_S = [0.0, 0.001, 59.999, 60.0, 3600.0, 86400.0, YEAR_S, 3 * YEAR_S]
# Fleet simulations a plan of one such route (one option, at most 4 bursts of 30) may run; walking a year's
# windows ran half a million (the plans here run 5-30).
FUZZ_MAX_SIMULATIONS = 200


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(GAPS_S), st.integers(1, 30)), min_size=1, max_size=4),
       st.sampled_from([0.0, 0.5, 59.0]))
def test_fuzzed_year_spanning_logs_plan_in_bounded_work(bursts, spread_s):
    """Bursts (each `count` requests over `spread_s`) after gaps up to years, replayed by a route at the log's own
    rate (`traffic` refuses most such logs as too sparse; a routes file may still name one): `plan` sizes it,
    counting its simulations (a plan or an infeasible row with its reason), or refuses it in one line naming the
    file."""
    from planner.latency import door
    from planner.planning.plan import make_plan
    from planner.planning.route_table import MIN_RATE_RPS, load_routes

    rows, t = [], 1.7e9
    for gap, count in bursts:
        t += gap
        rows += [(t + spread_s * k / count, 100 + 37 * k % 900, 1 + 13 * k % 200) for k in range(count)]
        t += spread_s
    span = rows[-1][0] - rows[0][0]
    rate = max((len(rows) - 1) / span if span > 0 else 1.0, MIN_RATE_RPS)
    runs = []
    real = door.simulate

    def counted(*args, **kwargs):
        runs.append(1)
        assert len(runs) <= FUZZ_MAX_SIMULATIONS, f"over {FUZZ_MAX_SIMULATIONS} simulations: {bursts}"
        return real(*args, **kwargs)

    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        routes = Path(folder) / "routes.csv"
        pd.DataFrame(rows, columns=["timestamp", "prompt_tokens", "completion_tokens"]).to_csv(
            Path(folder) / "odd.csv", index=False)
        pd.DataFrame([{"name": "odd", "model": "llama-3.1-8b", "traffic": "online", "rate_rps": rate,
                       "input_len_mean": 500, "output_len_mean": 100, "ttft_slo_ms": 1000, "tpot_slo_ms": 100,
                       "engines": "vllm", "gpus": "h200", "precisions": "fp8", "tps": "1", "configs": "default",
                       "log": "odd.csv"}]).to_csv(routes, index=False)
        patch.setattr(door, "simulate", counted)
        try:
            plan = make_plan(load_routes(routes), catalog(), check_by_simulation=True)
        except FleetplanError as err:  # one line naming the routes file or the log it names (a log is never
            # replaced by made-up arrivals: its own error stops the plan)
            message = str(err)
            assert "\n" not in message.strip() and ("odd.csv" in message or "routes.csv" in message), message
            return
        assert len(plan.rows) == 1  # planned or infeasible with its reason: an answer, in bounded work


JSONL_SEED = "".join(f'{{"timestamp": {1000 + i}, "route": "chat", "prompt_tokens": {100 + i}, '
                     f'"completion_tokens": {10 + i}}}\n' for i in range(30))


@FUZZ
@given(st.lists(MUTATION, min_size=1, max_size=4))
def test_fuzzed_jsonl_logs_read_or_fail_with_one_line(mutations):
    from planner.traffic.logs import read_log
    with tempfile.TemporaryDirectory() as folder:
        seed = Path(folder) / "seed.jsonl"
        seed.write_text(JSONL_SEED)
        _each(read_log, seed, "log.jsonl", mutations)


# A Mooncake trace with prefix structure (blocks of 4 tokens): a shared first block, a session growing by turns.
MOONCAKE_SEED = "".join(f'{{"timestamp": {500 * i}, "input_length": {9 + i % 4}, "output_length": 3, '
                        f'"hash_ids": [0, {1 + i % 3}, {100 + i}]}}\n' for i in range(30))


@FUZZ
@given(st.lists(MUTATION, min_size=1, max_size=4))
def test_fuzzed_mooncake_traces_read_or_fail_with_one_line(mutations):
    from planner.traffic.logs import log_to_routes
    with tempfile.TemporaryDirectory() as folder:
        seed = Path(folder) / "seed.jsonl"
        seed.write_text(MOONCAKE_SEED)
        _each(lambda p: log_to_routes(p, model="llama-3.1-8b", block_size=4, cache_tokens=16, ttft_slo_ms=1000.0),
              seed, "trace.jsonl", mutations)


@FUZZ
@given(st.lists(MUTATION, min_size=1, max_size=4))
def test_fuzzed_scenarios_load_or_fail_with_one_line(mutations):
    from ui.scenario import Scenario, Settings, scenario_from_json, scenario_to_json
    seed_text = scenario_to_json(Scenario("s", pd.read_csv(ROUTES), Settings()))
    text = mutate(seed_text if isinstance(seed_text, str) else seed_text.decode(), mutations)
    try:
        scenario_from_json(text.encode("utf-8", errors="surrogatepass"), "scenario.json")
    except FleetplanError as err:
        check_error(err, Path("scenario.json"))


@FUZZ
@given(st.lists(MUTATION, min_size=1, max_size=4))
def test_fuzzed_shapes_load_or_fail_with_one_line(mutations):
    from measure.points import load_shapes
    _each(lambda p: load_shapes(str(p)), REPO / "measure" / "shapes" / "default.csv", "shapes.csv", mutations)


@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n\x00\x00\xff", b"", b"\n\n\n", b"#\n#\n"])
@pytest.mark.parametrize("fmt", ["routes", "prices", "ops", "plan", "log"])
def test_binary_and_empty_files_fail_with_one_line_and_leave_the_output_alone(tmp_path, capsys, fmt, content):
    from planner.cli import main
    bad = tmp_path / "input.csv"
    bad.write_bytes(content)
    out = tmp_path / "out.csv"
    out.write_text("sentinel\n")
    args = {"routes": ["plan", "--routes", str(bad), "--out", str(out), "--no-simulate"],
            "prices": ["plan", "--routes", str(ROUTES), "--prices", str(bad), "--out", str(out), "--no-simulate"],
            "ops": ["plan", "--routes", str(ROUTES), "--ops", str(bad), "--out", str(out), "--no-simulate"],
            "plan": ["simulate", "--routes", str(ROUTES), "--plan", str(bad)],
            "log": ["traffic", "--log", str(bad), "--out", str(out)]}[fmt]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "input.csv" in err, err
    assert out.read_text() == "sentinel\n"
