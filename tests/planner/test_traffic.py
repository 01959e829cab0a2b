"""Request logs -> routes: the bundled Azure trace, generic CSV/JSONL, malformed logs, and the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from fleetfacts.errors import InputError
from fleetfacts.schema import ROUTES, write_table
from planner.cli import main
from planner.planning.route_table import load_routes
from planner.traffic import logs as traffic
from planner.traffic import workload
from tests.conftest import REPO

AZURE = REPO / "examples" / "traces" / "azure_llm_2023_code.csv"
EXAMPLE_ROUTES = REPO / "examples" / "routes.csv"


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


GENERIC = """timestamp,route,prompt_tokens,completion_tokens
2026-01-05T10:00:00Z,chat,100,20
2026-01-05T10:00:01Z,chat,200,30
2026-01-05T10:00:02.5Z,search,50,5
2026-01-05T10:00:04Z,chat,300,40
2026-01-05T10:00:05Z,search,70,7
2026-01-05T10:00:10Z,chat,400,50
"""


def test_bundled_azure_trace_matches_the_example_route():
    log = traffic.read_log(AZURE)
    assert log.format == "azure" and len(log.requests) == 8819 and log.skipped.count == 0
    (stats,), left_out = traffic.route_traffic(log)
    assert left_out == [] and stats.route == "azure_llm_2023_code"
    example = pd.read_csv(EXAMPLE_ROUTES).set_index("name").loc["code-completion"]
    assert stats.rate_rps == pytest.approx(example.rate_rps, rel=1e-4)
    assert stats.arrival_cv == pytest.approx(example.arrival_cv, rel=1e-4)
    for prefix, lengths in (("input_len", stats.input), ("output_len", stats.output)):
        for stat in ("mean", "p50", "p95", "p99"):
            assert getattr(lengths, stat) == pytest.approx(example[f"{prefix}_{stat}"], rel=1e-4)
    assert stats.peak_to_mean == 1.0 and stats.diurnal is None  # one hour: it carries its own bursts, no diurnal profile


def test_routes_frame_is_a_valid_routes_table(tmp_path):
    log = traffic.read_log(AZURE, route="code")
    stats, _ = traffic.route_traffic(log)
    frame = traffic.routes_frame(stats, log, model="llama-3.1-8b", ttft_slo_ms=300, tpot_slo_ms=30)
    out = tmp_path / "routes.csv"
    write_table(frame, out, ROUTES)
    routes = load_routes(out)
    row = routes.iloc[0]
    assert (row["name"], row["traffic"], row["ttft_slo_ms"]) == ("code", "online", 300.0)
    assert "CC-BY" in row["notes"] and "azure_llm_2023_code.csv" in row["notes"]


def test_generic_csv_per_route_rates_and_lengths(tmp_path):
    log = traffic.read_log(write(tmp_path, "gw.csv", GENERIC))
    assert log.format == "generic"
    stats = {s.route: s for s in traffic.route_traffic(log)[0]}
    assert set(stats) == {"chat", "search"}
    log_rate = 5 / 10.0  # (6 - 1) requests over 10 s
    assert stats["chat"].rate_rps == pytest.approx(log_rate * 4 / 6)
    assert stats["search"].rate_rps == pytest.approx(log_rate * 2 / 6)
    assert stats["chat"].input.mean == pytest.approx(250.0) and stats["chat"].output.p50 == pytest.approx(35.0)
    assert stats["search"].arrival_cv == 1.0 and stats["search"].notes  # two requests: CV assumed
    assert stats["chat"].peak_to_mean == 1.0  # shorter than a minute


def test_epoch_seconds_and_jsonl_with_nested_usage(tmp_path):
    lines = [json.dumps({"timestamp": 1_700_000_000 + k * 2, "route": "r", "usage": {"prompt_tokens": 10 + k,
                                                                                     "completion_tokens": 3}})
             for k in range(5)]
    lines.insert(2, "{not json")
    log = traffic.read_log(write(tmp_path, "gw.jsonl", "\n".join(lines) + "\n"))
    assert len(log.requests) == 5 and log.skipped.lines == {"unreadable JSON line": (3,)}
    assert log.span_s == 8.0 and list(log.requests["input_len"]) == [10, 11, 12, 13, 14]
    assert log.start == pd.Timestamp(1_700_000_000, unit="s", tz="UTC")


def test_malformed_rows_are_skipped_counted_and_reported(tmp_path):
    rows = ["timestamp,route,prompt_tokens,completion_tokens"]
    for k in range(2, 14):  # file lines 2..13
        prompt, completion, stamp = 100, 10, f"2026-01-05T10:00:{k:02d}Z"
        if k in (5, 9):
            completion = -3
        if k == 12:
            stamp = "yesterday"
        if k == 7:
            prompt = ""
        rows.append(f"{stamp},chat,{prompt},{completion}")
    log = traffic.read_log(write(tmp_path, "bad.csv", "\n".join(rows) + "\n"))
    assert log.skipped.describe() == ("skipped 4 rows: 2 negative token counts (lines 5, 9), "
                                      "1 bad timestamp (line 12), 1 missing token count (line 7)")
    assert len(log.requests) == 8


def test_strict_mode_names_the_file_line_and_column(tmp_path):
    path = write(tmp_path, "bad.csv", GENERIC.replace("300,40", "300,4.5"))
    with pytest.raises(InputError, match=r"bad\.csv, line 5, column 'completion_tokens': fractional token count"):
        traffic.read_log(path, strict=True)


def test_unsorted_rows_are_sorted_and_reported(tmp_path):
    lines = GENERIC.strip().splitlines()
    shuffled = [lines[0], lines[3], lines[1], lines[6], lines[2], lines[5], lines[4]]
    log = traffic.read_log(write(tmp_path, "shuffled.csv", "\n".join(shuffled) + "\n"))
    sorted_log = traffic.read_log(write(tmp_path, "sorted.csv", GENERIC))
    assert log.skipped.out_of_order == 3 and "first at line 3" in log.skipped.describe_order()
    assert list(log.requests["t_s"]) == list(sorted_log.requests["t_s"])
    assert traffic.route_traffic(log)[0] == traffic.route_traffic(sorted_log)[0]


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("timestamp,route,prompt_tokens,completion_tokens\n", "no data rows"),
    ("timestamp,route,prompt_tokens,completion_tokens\n2026-01-05T10:00:00Z,chat,1,1\n", "a rate needs at least 2"),
    ("timestamp,route,prompt_tokens,completion_tokens\n1,chat,1,1\n1,chat,2,2\n", "same timestamp"),
    ("timestamp,route,prompt_tokens,completion_tokens\nx,chat,1,1\ny,chat,2,2\n", "0 usable requests"),
    ("timestamp,route,prompt_tokens,completion_tokens\n1700000000000,c,1,1\n1700000001000,c,1,1\n",
     "look like milliseconds"),
    ("when,what\n1,2\n", "not a request log"),
    ("timestamp,prompt_tokens,completion_tokens,extra\n", "no data rows"),
])
def test_unusable_logs_raise_a_one_line_input_error(tmp_path, text, message):
    path = write(tmp_path, "log.csv", text)
    with pytest.raises(InputError, match=message) as err:
        traffic.read_log(path)
    assert "log.csv" in str(err.value) and "\n" not in str(err.value)


def test_missing_column_for_the_forced_format(tmp_path):
    with pytest.raises(InputError, match="missing column"):
        traffic.read_log(write(tmp_path, "gw.csv", GENERIC), fmt="azure")


def test_diurnal_profile_recovered_from_a_two_day_log(tmp_path):
    multipliers = np.array([0.5] * 8 + [1.5] * 8 + [1.0] * 8)
    t = workload.diurnal(0.5, multipliers, 10 * 86_400.0, seed=4)
    frame = pd.DataFrame({"timestamp": 1_767_225_600 + t, "prompt_tokens": 100, "completion_tokens": 10})
    path = tmp_path / "days.csv"
    frame.to_csv(path, index=False)
    stats = traffic.route_traffic(traffic.read_log(path))[0][0]
    assert stats.diurnal is not None
    assert np.mean(stats.diurnal[:8]) == pytest.approx(0.5, rel=0.05)
    assert np.mean(stats.diurnal[8:16]) == pytest.approx(1.5, rel=0.05)


def test_peak_minute_rate():
    t = np.concatenate([np.linspace(0, 59, 60), np.linspace(60, 119.9, 240), [150.0]])
    assert traffic.peak_minute_rps(t, 150.0) == pytest.approx(4.0)
    assert traffic.peak_minute_rps(t[:10], 9.0) is None


def test_length_histogram_counts_everything():
    hist = traffic.length_histogram(np.array([1, 2, 3, 100, 1000, 1000]), bins=5)
    assert hist["count"].sum() == 6 and math.isclose(hist["share"].sum(), 1.0)


def test_cli_traffic_prints_skips_and_writes_routes(tmp_path, capsys):
    path = write(tmp_path, "gw.csv", GENERIC + "2026-01-05T10:00:11Z,chat,-1,5\n")
    out = tmp_path / "routes.csv"
    assert main(["traffic", "--log", str(path), "--out", str(out), "--ttft-slo-ms", "500"]) == 0
    printed = capsys.readouterr().out
    assert "skipped 1 row: 1 negative token count (line 8)" in printed and "set the 'model' column" in printed
    assert set(load_routes(out)["name"]) == {"chat", "search"}


def test_cli_traffic_error_exits_2(tmp_path, capsys):
    assert main(["traffic", "--log", str(write(tmp_path, "e.csv", "")), "--out", str(tmp_path / "r.csv")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_a_log_with_input_len_output_len_columns_reads_as_documented(tmp_path, capsys):
    """`measure verify --help` and the planner's own request tables name the counts input_len, output_len."""
    path = write(tmp_path, "own.csv", "timestamp,input_len,output_len\n1,100,10\n2,120,12\n3,100,10\n")
    assert main(["traffic", "--log", str(path), "--out", str(tmp_path / "r.csv"), "--ttft-slo-ms", "500"]) == 0
    (row,) = load_routes(tmp_path / "r.csv").itertuples()
    assert row.input_len_mean == pytest.approx(320 / 3, rel=1e-4) and row.output_len_mean == pytest.approx(32 / 3, rel=1e-4)


def test_a_log_too_sparse_to_plan_on_is_one_line_naming_why(tmp_path, capsys):
    path = write(tmp_path, "sparse.csv", "timestamp,input_len,output_len\n1900-01-01T00:00:00,100,10\n"
                 "2000-01-01T00:00:00,100,10\n2100-01-01T00:00:00,100,10\n")
    assert main(["traffic", "--log", str(path), "--out", str(tmp_path / "r.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "3 requests over 200 years" in err and "too sparse to plan on" in err


def test_cli_simulate_replays_the_trace_on_a_plan(tmp_path, capsys, bundled_fitted_once):
    routes, plan = tmp_path / "routes.csv", tmp_path / "plan.csv"
    assert main(["traffic", "--log", str(AZURE), "--route", "code", "--model", "llama-3.1-8b",
                 "--ttft-slo-ms", "300", "--tpot-slo-ms", "30", "--out", str(routes)]) == 0
    assert main(["plan", "--routes", str(routes), "--out", str(plan)]) == 0
    capsys.readouterr()
    assert main(["simulate", "--routes", str(routes), "--plan", str(plan), "--log", str(AZURE), "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["route"] == "code" and record["requests"] == 8819 and 0 <= record["attainment"] <= 1
    assert record["ttft_p50_ms"] <= record["ttft_p95_ms"] <= record["ttft_p99_ms"]
    assert main(["simulate", "--routes", str(routes), "--plan", str(plan)]) == 0
    assert "SLO verdict: holds every 60 s window" in capsys.readouterr().out
    row = pd.read_csv(plan).iloc[0]  # the log's bursts count once: replayed at its own rate, every window held
    assert row.windows_in_breach == 0 and row.windows >= 30 and row.slo_attainment >= 0.99


# ---------------------------------------------------------------- issue 14 items 3 and 4

def test_a_row_with_a_huge_token_count_is_skipped_with_its_line_not_overflowed(tmp_path):
    from planner.traffic.logs import read_log
    log = tmp_path / "huge.csv"
    log.write_text("timestamp,prompt_tokens,completion_tokens\n"
                   + "".join(f"{1000 + i},{500},{50}\n" for i in range(5))
                   + "1005,100000000000000000000,50\n")
    traffic = read_log(log)
    assert traffic.skipped.lines == {"implausibly large token count": (7,)}
    assert traffic.requests["input_len"].tolist() == [500] * 5
    with pytest.raises(InputError, match=r"huge.csv, line 7, column 'prompt_tokens': implausibly large"):
        read_log(log, strict=True)


def test_log_errors_name_the_physical_line_across_blank_lines_and_quoted_newlines(tmp_path):
    from planner.traffic.logs import read_log
    log = tmp_path / "quoted.csv"
    log.write_text('timestamp,prompt_tokens,completion_tokens,route\n\n1000,10,5,"chat\nbot"\n\n'
                   "1001,10,5,chat\n1002,ten,5,chat\n1003,10,5,chat\n1004,10,5,chat\n")
    with pytest.raises(InputError, match=r"quoted.csv, line 7, column 'prompt_tokens'"):
        read_log(log, strict=True)


def test_routes_errors_name_the_physical_line_after_comments_blank_lines_and_quoted_newlines(tmp_path):
    from planner.planning.route_table import load_routes
    routes = tmp_path / "routes.csv"
    routes.write_text("# our routes\n# second comment\n\n"
                      "name,model,traffic,rate_rps,input_len_mean,output_len_mean,ttft_slo_ms,notes\n"
                      'a,llama-3.1-8b,online,1,10,10,100,"two\nlines"\n\n'
                      "b,llama-3.1-8b,online,-1,10,10,100,\n"
                      "a,llama-3.1-8b,online,1,10,10,100,\n")
    with pytest.raises(InputError, match=r"routes.csv, line 8, column 'rate_rps'"):
        load_routes(routes)
    routes.write_text(routes.read_text().replace(",-1,", ",2,"))
    with pytest.raises(InputError, match=r"routes.csv, line 9, column 'name': duplicate"):
        load_routes(routes)


def test_a_log_routes_control_characters_match_the_routes_derived_from_it(tmp_path):
    """Issue 25: route names load with their control characters escaped; a log naming the same route with a
    raw ESC must still replay onto it (traffic derives the routes, plan replays the log onto them)."""
    rows = [json.dumps({"timestamp": 1_700_000_000 + k, "route": "ch\x1bat", "prompt_tokens": 100 + k,
                        "completion_tokens": 20}) for k in range(6)]
    log_path = write(tmp_path, "gw.jsonl", "\n".join(rows) + "\n")
    write_table(traffic.log_to_routes(log_path, ttft_slo_ms=500)[0], tmp_path / "routes.csv", ROUTES)
    routes = load_routes(tmp_path / "routes.csv")
    assert list(routes["name"]) == ["ch\\x1bat"]
    replayed = workload.replay_requests(log_path, routes)
    assert list(replayed) == ["ch\\x1bat"] and len(replayed["ch\\x1bat"].arrival_s) == 6


@pytest.mark.parametrize("text, strict, where", [
    ("root:x:0:0:root:/root:/bin/bash\n", False, "log.csv, line 1:"),
    (GENERIC.replace("300,40", "300,root:x:0:0"), True, "log.csv, line 5, column 'completion_tokens':"),
    (GENERIC.replace("2026-01-05T10:00:04Z", "root:x:0:0"), True, "log.csv, line 5, column 'timestamp':"),
])
def test_log_errors_name_the_file_and_line_and_never_echo_its_content(tmp_path, text, strict, where):
    """Issue 47 item 1: a log error quoted the file's first line, so the app showed any server file's first line."""
    with pytest.raises(InputError) as err:
        traffic.read_log(write(tmp_path, "log.csv", text), strict=strict)
    assert where in str(err.value) and "root:x" not in str(err.value), err.value
