"""Logs that carry prefixes: the Mooncake trace, a generic log's hash_ids and session_id, their one-line errors,
`planner traffic`'s reuse report, the routes' shared_prefix_tokens, and the synthetic example (real files in
tmp_path, the real CLI)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys

import pandas as pd
import pytest

from fleetfacts.errors import InputError
from planner.cli import main
from planner.planning.route_table import load_routes, validate_routes
from planner.traffic.logs import read_log
from planner.traffic.routes import Route
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "traces" / "synthetic_chat_prefix.jsonl"
EXAMPLE_ROUTES = REPO / "examples" / "routes-prefix.csv"


def jsonl(tmp_path, name: str, records: list[dict]):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def mooncake(timestamp: int, tokens: int, ids: list, output: int = 10) -> dict:
    return {"timestamp": timestamp, "input_length": tokens, "output_length": output, "hash_ids": ids}


TRACE = [mooncake(0, 1100, [0, 1, 2]), mooncake(1500, 1024, [0, 1]), mooncake(2500, 600, [0, 5])]


def ids(log) -> list[list[int]]:
    return [list(map(int, a)) for a in log.requests["hash_ids"]]


def cli(capsys, *args: object) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main([str(a) for a in args])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- reading

def test_a_mooncake_trace_is_detected_by_its_keys(tmp_path):
    path = jsonl(tmp_path, "trace.jsonl", TRACE)
    log = read_log(path, block_size=512)
    assert log.format == "mooncake" and log.block_size == 512
    assert log.requests["t_s"].tolist() == [0.0, 1.5, 2.5]  # milliseconds -> seconds
    assert log.requests["input_len"].tolist() == [1100, 1024, 600] and ids(log) == [[0, 1, 2], [0, 1], [0, 5]]
    lengths_only = read_log(path)  # without a block size: times and lengths, as simulate and verify read it
    assert lengths_only.format == "mooncake" and lengths_only.block_size is None
    assert "hash_ids" not in lengths_only.requests.columns
    with pytest.raises(InputError, match="missing column.*for a generic log"):  # --format still wins
        read_log(path, fmt="generic")


def test_a_generic_log_carries_hash_ids_in_csv_and_jsonl(tmp_path):
    csv = tmp_path / "gw.csv"
    csv.write_text("timestamp,prompt_tokens,completion_tokens,hash_ids\n1700000000,8,1,1;2\n1700000001,9,1,1;2;3\n",
                   encoding="utf-8")
    assert ids(read_log(csv, block_size=4)) == [[1, 2], [1, 2, 3]]
    records = [{"timestamp": 1700000000 + k, "input_len": 8, "output_len": 1, "hash_ids": [7, k]} for k in range(2)]
    log = read_log(jsonl(tmp_path, "gw.jsonl", records), block_size=4)
    assert log.format == "generic" and ids(log) == [[7, 0], [7, 1]]


def test_session_turns_share_the_previous_turns_blocks(tmp_path):
    path = tmp_path / "sessions.csv"
    path.write_text("timestamp,prompt_tokens,completion_tokens,session_id\n"
                    "1700000000,6,3,a\n"      # a: blocks of 4 -> ids [0, 1]
                    "1700000001,5,1,b\n"      # b: [2, 3]
                    "1700000002,13,2,a\n"     # a, turn 2 (6 + 3 + 4 new tokens): [0, 1, 4, 5]
                    "1700000003,9,1,\n"       # no session: shares nothing, [6, 7, 8]
                    "1700000004,6,1,b\n", encoding="utf-8")   # b, turn 2 (5 + 1 + 0 new): [2, 3]
    assert ids(read_log(path, block_size=4)) == [[0, 1], [2, 3], [0, 1, 4, 5], [6, 7, 8], [2, 3]]


@pytest.mark.parametrize(("cell", "message"), [
    ('["a", 1]', r"line 2, column 'hash_ids': expected a list of integer block hashes"),
    ("[1.5, 2]", r"line 2, column 'hash_ids': expected a list of integer block hashes"),
    ("[true, 2]", r"line 2, column 'hash_ids': expected a list of integer block hashes"),
    ('"1,2"', r"line 2, column 'hash_ids': expected a list of integer block hashes"),
    ("[1, 2, 3, 4]", r"line 2, column 'hash_ids': 4 hash ids for a 1024-token prompt; blocks of 512 tokens "
                     r"need 2 .*--trace-block-size"),
    (f"[1, {2**64}]", r"line 2, column 'hash_ids': expected a list of integer block hashes"),
])
def test_a_bad_hash_list_is_a_one_line_error_naming_file_and_line(tmp_path, cell, message):
    path = tmp_path / "bad.jsonl"
    good = json.dumps(mooncake(0, 1024, [0, 1]))
    path.write_text(good + "\n" + good.replace("[0, 1]", cell).replace('"timestamp": 0', '"timestamp": 9') + "\n",
                    encoding="utf-8")
    with pytest.raises(InputError, match=message) as err:
        read_log(path, block_size=512)
    assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)


@pytest.mark.parametrize(("line", "message"), [
    ('{"timestamp": 9, "input_length": 5', r"line 2: unreadable JSON line \(a Mooncake trace is read strictly\)"),
    ('{"timestamp": 9, "input_length": "x", "output_length": 1, "hash_ids": [0]}',
     r"line 2, column 'input_length': non-numeric token count"),
    ('{"timestamp": -5, "input_length": 5, "output_length": 1, "hash_ids": [0]}',
     r"line 2, column 'timestamp': bad timestamp \(expected milliseconds from the trace's start"),
    ('{"timestamp": 9, "input_length": 5, "hash_ids": [0]}', r"line 2, column 'output_length': missing token count"),
])
def test_a_malformed_mooncake_line_is_refused_in_one_line(tmp_path, line, message):
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps(mooncake(0, 5, [0])) + "\n" + line + "\n" + json.dumps(mooncake(20, 5, [0])) + "\n",
                    encoding="utf-8")
    with pytest.raises(InputError, match=message) as err:
        read_log(path)  # refused even when only times and lengths are read
    assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)


def test_a_session_whose_prompt_drops_the_history_is_refused(tmp_path):
    path = tmp_path / "sessions.csv"
    path.write_text("timestamp,prompt_tokens,completion_tokens,session_id\n"
                    "1700000000,100,50,a\n1700000001,120,5,a\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"sessions.csv, line 3, column 'session_id': session 'a' has a 120-token "
                                         r"prompt after a turn of 150 tokens of prompt and output \(line 2\)"):
        read_log(path, block_size=16)


# ---------------------------------------------------------------- the CLI

def test_traffic_reports_reuse_and_the_block_size_is_settable(tmp_path, capsys):
    path = jsonl(tmp_path, "trace.jsonl", TRACE)
    code, out, _ = cli(capsys, "traffic", "--log", path, "--route", "chat", "--out", tmp_path / "r.csv",
                       "--cache-tokens", 512)
    # Unbounded, 1520 of 2724 prompt tokens: the second request is the first's first 1024 tokens, all cached but
    # its last token (1008 in 16-token engine blocks); the third shares block 0.  An LRU of one 512-token block
    # keeps only block 0 (a chain's head outlives its tail): 512 + 512 = 1024.
    assert code == 0 and "chat: prefix reuse: 55.8% of prompt tokens" in out
    assert "reuse distance p50 0, p90 0 tokens" in out and "an LRU cache of 512 tokens serves 37.6%" in out
    notes = pd.read_csv(tmp_path / "r.csv")["notes"].iloc[0]
    assert "prefix reuse: 55.8%" in notes and "prefills only the uncached tokens" in notes
    # the same ids read as 256-token blocks do not fit the prompts: one line, exit 2
    code, out, err = cli(capsys, "traffic", "--log", path, "--out", tmp_path / "r2.csv", "--trace-block-size", 256)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {path}, line 1, column 'hash_ids': 3 hash ids for a 1100-token prompt; "
                          "blocks of 256 tokens need 5")


def test_a_log_without_prefixes_reports_no_reuse(tmp_path, capsys):
    path = tmp_path / "plain.csv"
    path.write_text("timestamp,prompt_tokens,completion_tokens\n1700000000,10,1\n1700000005,20,2\n", encoding="utf-8")
    code, out, _ = cli(capsys, "traffic", "--log", path, "--out", tmp_path / "r.csv")
    assert code == 0 and "prefix reuse" not in out


def test_the_example_report_from_the_real_cli(tmp_path):
    done = subprocess.run([sys.executable, "-m", "planner", "traffic", "--log", EXAMPLE, "--out",
                           tmp_path / "routes.csv", "--cache-tokens", "100000"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "mooncake log, 2610 requests over 3596 s" in done.stdout
    share = token_level_reuse([json.loads(line) for line in EXAMPLE.read_text().splitlines()])
    assert f"prefix reuse: {100 * share:.1f}% of prompt tokens repeat an earlier request's prefix" in done.stdout
    lru = re.search(r"an LRU cache of 100k tokens serves ([\d.]+)%", done.stdout)
    assert lru and 0 < float(lru.group(1)) < 100 * share


def token_level_reuse(rows: list[dict], engine_block: int = 16) -> float:
    """The share of prompt tokens an unbounded vLLM prefix cache serves, replayed token by token: block id h is
    512 tokens (h, 0) .. (h, 511); the engine hashes each full 16-token block chained behind its prefix, caches
    it, and a prompt hits its leading cached blocks, never its last token."""
    cached: set[int] = set()
    hit = total = 0
    for row in sorted(rows, key=lambda r: r["timestamp"]):
        n = row["input_length"]
        tokens = [(h, k) for h in row["hash_ids"] for k in range(512)][:n]
        key, hitting = 0, True
        for j in range(n // engine_block):
            key = hash((key, tuple(tokens[j * engine_block:(j + 1) * engine_block])))
            hitting = hitting and key in cached and (j + 1) * engine_block <= n - 1
            hit += engine_block if hitting else 0
            cached.add(key)
        total += n
    return hit / total


# ---------------------------------------------------------------- the example and the routes

def test_the_example_is_what_the_generator_writes(tmp_path):
    spec = importlib.util.spec_from_file_location("make_prefix_example", REPO / "scripts" / "make_prefix_example.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--out", str(tmp_path / "x.jsonl")]) == 0
    assert (tmp_path / "x.jsonl").read_bytes() == EXAMPLE.read_bytes()


def test_the_example_routes_load_and_declare_a_shared_prefix():
    routes = load_routes(EXAMPLE_ROUTES).set_index("name")
    assert Route.from_row(routes.reset_index().iloc[1]).shared_prefix_tokens == 1800
    assert routes.loc["chat-prefix", "log"].endswith("synthetic_chat_prefix.jsonl")
    assert pd.isna(routes.loc["chat-prefix", "shared_prefix_tokens"])


ROUTE = {"name": "r", "model": "m", "traffic": "online", "rate_rps": 1.0, "input_len_mean": 1000.0,
         "input_len_p50": 800.0, "output_len_mean": 100.0, "ttft_slo_ms": 500.0}


@pytest.mark.parametrize(("cells", "message"), [
    ({"shared_prefix_tokens": 900}, r"line 2, column 'shared_prefix_tokens': 900 tokens is longer than "
                                    r"input_len_p50 800; every request starts with the shared prefix"),
    ({"shared_prefix_tokens": -1}, r"line 2, column 'shared_prefix_tokens': expected a value >= 0"),
    ({"shared_prefix_tokens": 1.5}, r"line 2, column 'shared_prefix_tokens': expected a whole number"),
    ({"shared_prefix_tokens": 10, "log": "x.jsonl"}, r"column 'shared_prefix_tokens': the route replays a log"),
])
def test_shared_prefix_tokens_is_checked(cells, message):
    with pytest.raises(InputError, match=message):
        validate_routes(pd.DataFrame([{**ROUTE, **cells}]), "routes.csv")


def test_shared_prefix_tokens_up_to_the_shortest_prompt_is_kept():
    for shared in (0, 800):
        row = validate_routes(pd.DataFrame([{**ROUTE, "shared_prefix_tokens": shared}])).iloc[0]
        assert row["shared_prefix_tokens"] == shared
    blank = validate_routes(pd.DataFrame([ROUTE])).iloc[0]
    assert pd.isna(blank["shared_prefix_tokens"]) and Route.from_row(blank).shared_prefix_tokens == 0
