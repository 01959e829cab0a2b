"""`measure profile` against a misbehaving OpenAI-compatible server (measure/stub_openai.py on
127.0.0.1), bad inputs, secrets and escape codes: every point ends as a row, nothing is lost or
duplicated, every stop is resumable, no key and no raw escape code leaves the process."""

from __future__ import annotations

import csv
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fleetfacts.errors import InputError
from fleetfacts.schema import PROFILE, load_table
from measure import stub_openai
from measure.cli import EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE, main
from measure.loadgen import LoadSpec, RequestSpec, run_load_sync
from measure.stub_openai import free_port, start_stub
from planner.engine.curves import load_profiles

# Output lengths of the shapes below: each point gets its own, so a fault can be aimed at one point.
OUTPUTS = (5, 6, 7, 8, 9)


@pytest.fixture
def stub():
    procs = []

    def start(faults=None, port=None, api_key=None):
        url, proc = start_stub(faults, port, api_key)
        procs.append(proc)
        return url, proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.fixture
def shapes(tmp_path):
    path = tmp_path / "shapes.csv"
    lines = ["mode,input_len,output_len,concurrency,num_requests,purpose"]
    lines += [f"concurrency,8,{o},2,4,fault test" for o in OUTPUTS]
    path.write_text("\n".join(lines) + "\n")
    return path


def profile_args(shapes, out, url, *extra):
    return ["profile", "--gpu", "h200", "--engine", "openai", "--model", "llama-3.1-8b", "--shapes", str(shapes),
            "--out", str(out), "--base-url", url, "--no-ignore-eos", *extra]


def read_rows(out) -> list[dict]:
    with open(Path(out) / "profile.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def ok_outputs(out) -> list[int]:
    return sorted(int(r["output_len"]) for r in read_rows(out) if r["status"] == "ok")


# ------------------------------------------------------------------ 5: a failed point is a row, the sweep goes on

@pytest.mark.parametrize("fault,reason", [("500", "HTTP 500"), ("drop", "stream cut|ClientPayloadError"),
                                          ("hang", "TimeoutError"), ("garbage:nonobject", "malformed stream")])
def test_a_point_whose_every_request_fails_is_a_failed_row_and_the_sweep_goes_on(stub, shapes, tmp_path, capsys,
                                                                                    fault, reason):
    url, _ = stub({6: fault})
    out = tmp_path / "p"
    code = main(profile_args(shapes, out, url, "--request-timeout", "1"))
    err = capsys.readouterr().err
    assert code == EXIT_OK, err
    rows = read_rows(out)
    assert [int(r["output_len"]) for r in rows] == list(OUTPUTS)        # every point, once, in order
    failed = [r for r in rows if r["status"] == "failed"]
    assert [int(r["output_len"]) for r in failed] == [6]
    assert failed[0]["num_requests"] == "4" and failed[0]["output_tok_per_s"] == ""
    assert re.search(reason, failed[0]["error"]), failed[0]["error"]
    assert "--retry-failed" in err and "Traceback" not in err
    load_table(out / "profile.csv", PROFILE)                             # the planner reads it


def test_a_dead_server_stops_the_sweep_after_n_failures_with_the_resume_command(stub, shapes, tmp_path, capsys):
    port = free_port()
    url, proc = stub({7: "die"}, port=port)
    out = tmp_path / "profiles" / "p"
    code = main(profile_args(shapes, out, url, "--stop-after-failures", "2"))
    err = capsys.readouterr().err
    assert code == EXIT_INCOMPLETE and "2 failed points in a row" in err and "Traceback" not in err
    assert [(int(r["output_len"]), r["status"]) for r in read_rows(out)] == [(5, "ok"), (6, "ok"), (7, "failed"),
                                                                           (8, "failed")]
    resume = err.split("resume with:\n")[-1].strip().splitlines()[0]
    assert "--resume" in resume and "--retry-failed" in resume and "--out" in resume
    proc.wait(timeout=5)
    stub(port=port)                                                      # the server is back
    assert main(resume.split()[3:]) == EXIT_OK                            # the printed command, as given
    assert ok_outputs(out) == list(OUTPUTS)                              # every point ok exactly once
    assert len(load_profiles(tmp_path / "profiles")) == len(OUTPUTS)


# ------------------------------------------------------------------ 6: malformed SSE is a counted failure

@pytest.mark.parametrize("kind", ["nonobject", "binary", "usage", "choices"])
def test_malformed_stream_events_are_counted_failures_not_lost_requests(stub, kind):
    url, _ = stub({6: f"garbage:{kind}"})
    spec = LoadSpec(base_url=url, requests=(RequestSpec(8, 6),) * 3 + (RequestSpec(8, 5),), concurrency=1,
                    ignore_eos=False)
    result = run_load_sync(spec)
    assert result.cancelled == 0 and len(result.results) == 4            # every request ended, none dropped
    bad = [r for r in result.results if not r.ok]
    assert len(bad) == 3 and all(r.error.startswith("error in stream: malformed stream event") for r in bad)
    assert [r.output_tokens for r in result.results if r.ok] == [5]      # the worker lived on to send the last


def test_a_malformed_stream_point_is_not_reported_as_cut_by_a_time_limit(stub, shapes, tmp_path, capsys):
    url, _ = stub({6: "garbage:choices"})
    assert main(profile_args(shapes, tmp_path / "p", url)) == EXIT_OK
    row = next(r for r in read_rows(tmp_path / "p") if r["output_len"] == "6")
    assert row["status"] == "failed" and "all 4 requests failed" in row["error"]
    assert "time limit" not in row["notes"]


# ------------------------------------------------------------------ 8: a torn last row

def test_resume_sets_a_torn_last_row_aside_and_the_planner_reads_the_result(stub, shapes, tmp_path, capsys):
    url, _ = stub()
    out = tmp_path / "profiles" / "p"
    assert main(profile_args(shapes, out, url)) == EXIT_OK
    csv_path = out / "profile.csv"
    data = csv_path.read_bytes()
    last_start = data.rstrip(b"\r\n").rfind(b"\n") + 1
    torn = data[:last_start + (len(data) - last_start) // 2]             # the last row cut mid-write
    csv_path.write_bytes(torn)
    assert main(profile_args(shapes, out, url, "--resume")) == EXIT_OK
    assert ok_outputs(out) == list(OUTPUTS)                              # the torn point ran again, once
    assert (out / "profile.csv.torn").read_bytes().rstrip(b"\n") == torn[last_start:]
    assert len(load_profiles(tmp_path / "profiles")) == len(OUTPUTS)


def test_the_planner_names_the_one_bad_profile_file(stub, shapes, tmp_path):
    url, _ = stub()
    root = tmp_path / "profiles"
    assert main(profile_args(shapes, root / "good", url)) == EXIT_OK
    bad = root / "bad" / "profile.csv"
    bad.parent.mkdir()
    text = (root / "good" / "profile.csv").read_text()
    bad.write_text(text.rstrip("\r\n")[:-20] + text.splitlines()[1] + "\n")  # a row appended onto a torn one
    with pytest.raises(InputError) as err:
        load_profiles(root)
    assert str(bad) in str(err.value) and "good" not in str(err.value)


# ------------------------------------------------------------------ 9: one-line errors before any point runs

BAD_INPUTS = {
    "env.json truncated": (lambda d: (d / "env.json").write_text('{"profile": {"gpu": '), ["--resume"], "env.json"),
    "env.json a list": (lambda d: (d / "env.json").write_text("[]"), ["--resume"], "env.json"),
    "env.json binary": (lambda d: (d / "env.json").write_bytes(b"\xff\xfe\x00garbage"), ["--resume"], "env.json"),
    "profile.csv binary": (lambda d: (d / "profile.csv").write_bytes(b"\x89PNG\r\n\x1a\n\xff\x00"), ["--resume"],
                           "profile.csv"),
    "--gpu not a slug": (None, ["--gpu", "h 200!"], "--gpu"),
    "--tag not a slug": (None, ["--tag", "../x"], "--tag"),
    "--request-timeout 0": (None, ["--request-timeout", "0"], "--request-timeout"),
    "--point-timeout 0": (None, ["--point-timeout", "0"], "--point-timeout"),
    "--point-timeout nan": (None, ["--point-timeout", "nan"], "--point-timeout"),
    "--stop-after-failures -1": (None, ["--stop-after-failures", "-1"], "--stop-after-failures"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_inputs_are_one_line_errors_and_touch_nothing(stub, shapes, tmp_path, capsys, case):
    prepare, extra, named = BAD_INPUTS[case]
    url, _ = stub()
    out = tmp_path / "p"
    out.mkdir()
    if prepare:
        prepare(out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code = main(profile_args(shapes, out, url, *extra))
    err = capsys.readouterr().err
    assert code == EXIT_USAGE, err
    assert err.startswith("error: ") and err.count("\n") == 1 and named in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("kind", ["binary", "folder", "out-is-a-file", "comma-in-purpose", "unknown-column"])
def test_bad_shapes_and_out_paths_are_one_line_errors(stub, shapes, tmp_path, capsys, kind):
    url, _ = stub()
    out = tmp_path / "p"
    named = {"comma-in-purpose": "shape row 2: more cells than the header's 9 columns",
             "unknown-column": "unknown column(s) batch"}.get(kind, "")
    if named:
        header = "mode,input_len,output_len,batch_size,concurrency,request_rate,arrival,num_requests,purpose\n"
        if kind == "unknown-column":
            header = header.replace("batch_size", "batch")
        shapes = tmp_path / "s.csv"
        shapes.write_text(header + "offline,64,4,4,,,,,warm-up\noffline,64,4,16,,,,,warm-up, at 16\n")
    elif kind == "binary":
        shapes = tmp_path / "bin.csv"
        shapes.write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00")
    elif kind == "folder":
        shapes = tmp_path
    else:
        out.write_text("a file")
    code = main(profile_args(shapes, out, url))
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and err.startswith("error: ") and err.count("\n") == 1, err
    assert named in err


# ------------------------------------------------------------------ 10: no key on any channel

def _everything_written(out: Path, captured) -> str:
    files = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file() and p.name != "server.log")
    if isinstance(captured, subprocess.CompletedProcess):
        return files + captured.stdout + captured.stderr
    return files + captured.out + captured.err


def test_a_key_in_server_cmd_argv_is_redacted(shapes, tmp_path, capsys):
    secret = "sk-servercmd-1234"
    out = tmp_path / "p"
    cmd = f"{sys.executable} {stub_openai.__file__} {{port}} --api-key {secret}"
    code = main(profile_args(shapes, out, "", "--server-cmd", cmd, "--port", str(free_port()),
                             "--api-key", secret, "--server-start-timeout", "20"))
    captured = capsys.readouterr()
    assert code == EXIT_OK, captured.err
    assert ok_outputs(out) == list(OUTPUTS)
    env = json.loads((out / "env.json").read_text())
    assert "--api-key" in env["runs"][0]["effective_engine_args"]["command"]
    assert secret not in _everything_written(out, captured)


def test_a_key_in_an_engine_arg_is_redacted(stub, shapes, tmp_path, capsys):
    secret = "sk-engarg-5678"
    url, _ = stub()
    out = tmp_path / "p"
    assert main(profile_args(shapes, out, url, "--engine-arg", f"api_key={secret}")) == EXIT_OK
    captured = capsys.readouterr()
    assert secret not in _everything_written(out, captured)
    assert json.loads((out / "env.json").read_text())["profile"]["engine_args"] == {"api_key": "***"}
    assert main(profile_args(shapes, out, url, "--engine-arg", f"api_key={secret}", "--resume")) == EXIT_OK


def test_a_password_in_the_base_url_is_redacted(stub, shapes, tmp_path, capsys):
    secret = "pw-userinfo-9012"
    url, _ = stub()
    out = tmp_path / "p"
    assert main(profile_args(shapes, out, url.replace("://", f"://bench:{secret}@"))) == EXIT_OK
    captured = capsys.readouterr()
    assert ok_outputs(out) == list(OUTPUTS)
    assert secret not in _everything_written(out, captured)


def test_a_server_error_body_echoing_the_key_is_redacted(stub, shapes, tmp_path):
    secret = "sk-echoed-3456"
    url, _ = stub({6: "500"})
    out = tmp_path / "p"
    # A real process, so that its log lines (-v: debug, with tracebacks) reach the stderr checked here.
    done = run_measure(["-v", *profile_args(shapes, out, url)], env={**os.environ, "OPENAI_API_KEY": secret})
    assert done is not None and done.returncode == EXIT_OK, done.stderr
    row = next(r for r in read_rows(out) if r["output_len"] == "6")
    assert row["status"] == "failed" and "Authorization" in row["error"] and "DEBUG" in done.stderr
    assert secret not in _everything_written(out, done)


# ------------------------------------------------------------------ 11: no raw terminal escape codes

def test_escape_codes_from_a_server_and_a_shapes_file_are_not_printed_raw(stub, tmp_path, capsys):
    url, _ = stub({6: "escape"})
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("mode,input_len,output_len,concurrency,num_requests,purpose\n"
                      "concurrency,8,5,1,1,\x1b]8;;http://evil\x07link\n"
                      "concurrency,8,6,1,1,x\n")
    assert main(profile_args(shapes, tmp_path / "p", url, "--dry-run")) == EXIT_OK
    assert main(profile_args(shapes, tmp_path / "p", url)) == EXIT_OK
    captured = capsys.readouterr()
    assert "\x1b" not in captured.out + captured.err and "\x07" not in captured.out + captured.err
    assert "\\x1b" in captured.out                                       # shown, as an escape


# ------------------------------------------------------------------ the fault suite: kills and a full disk

# Random SIGKILLs of measure per test run (seeded), and the longest a killed-and-resumed sweep may take.
KILLS, SEED = 3, 14
SUBPROCESS_TIMEOUT_S = 60
REPO = Path(__file__).resolve().parents[2]


def run_measure(argv, preexec=None, kill_after_s=None, env=None) -> subprocess.CompletedProcess | None:
    """`python -m measure ...` in a subprocess; SIGKILLed after `kill_after_s` (returns None then)."""
    proc = subprocess.Popen([sys.executable, "-m", "measure", *argv], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=preexec, env=env)
    try:
        out, err = proc.communicate(timeout=kill_after_s or SUBPROCESS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        if kill_after_s is None:
            raise
        return None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def assert_complete_once(out: Path) -> None:
    """Every point has exactly one ok row, no row is torn or duplicated, and the planner reads the file."""
    rows = read_rows(out)
    assert ok_outputs(out) == list(OUTPUTS)
    keys = [(r["output_len"], r["status"], r["date"], r["duration_s"]) for r in rows]
    assert len(keys) == len(set(keys))
    load_table(out / "profile.csv", PROFILE)


def test_sigkill_at_random_points_then_resume_loses_and_duplicates_nothing(stub, shapes, tmp_path):
    url, _ = stub()
    out = tmp_path / "p"
    rng = random.Random(SEED)
    for _ in range(KILLS):   # killed somewhere between start-up and the last point
        run_measure(profile_args(shapes, out, url, "--resume"), kill_after_s=rng.uniform(0.5, 4.0))
    done = run_measure(profile_args(shapes, out, url, "--resume"))
    assert done is not None and done.returncode == EXIT_OK, done and done.stderr
    assert "Traceback" not in done.stderr
    assert_complete_once(out)


def test_a_full_disk_stops_cleanly_and_resume_repairs_the_torn_row(stub, shapes, tmp_path):
    url, _ = stub()
    out = tmp_path / "p"
    first = run_measure(profile_args(shapes, out, url, "--stop-after-failures", "0"))
    assert first is not None and first.returncode == EXIT_OK
    rows = read_rows(out)
    csv_path = out / "profile.csv"
    lines = csv_path.read_bytes().splitlines(keepends=True)
    csv_path.write_bytes(b"".join(lines[:4]))                                     # 3 of 5 points kept
    env = json.loads((out / "env.json").read_text())
    (out / "env.json").write_text(json.dumps({**env, "runs": []}))                # env.json stays below the limit
    limit = csv_path.stat().st_size + len(lines[-1]) // 2                        # the next row is cut halfway

    def full_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    cut = run_measure(profile_args(shapes, out, url, "--resume"), preexec=full_disk)
    assert cut is not None and cut.returncode != EXIT_OK and "Traceback" not in cut.stderr
    assert "resume with:" in cut.stderr and "File too large" in cut.stderr
    assert not csv_path.read_bytes().endswith(b"\n")                            # the disk tore the row
    assert len(rows) == len(OUTPUTS)
    done = run_measure(profile_args(shapes, out, url, "--resume"))
    assert done is not None and done.returncode == EXIT_OK, done.stderr
    assert_complete_once(out)
    assert (out / "profile.csv.torn").is_file()


def test_failures_in_a_row_stop_http_sweeps_by_default_and_never_in_process_ones():
    from measure.cli import DEFAULT_STOP_AFTER_FAILURES_HTTP, _stop_after, build_parser  # noqa: PLC0415
    from measure.engines.base import EngineConfig  # noqa: PLC0415

    base = ["profile", "--gpu", "h200", "--engine", "vllm", "--model", "llama-3.1-8b"]
    http, local = EngineConfig("openai", "m", "m", server=True), EngineConfig("vllm", "m", "m")
    assert _stop_after(build_parser().parse_args(base), http) == DEFAULT_STOP_AFTER_FAILURES_HTTP
    assert _stop_after(build_parser().parse_args(base), local) is None
    assert _stop_after(build_parser().parse_args([*base, "--stop-after-failures", "0"]), http) is None
    assert _stop_after(build_parser().parse_args([*base, "--stop-after-failures", "5"]), local) == 5


def test_a_server_failing_every_request_is_not_said_to_have_saved_points(stub, shapes, tmp_path, capsys):
    url, _ = stub({o: "500" for o in (4, *OUTPUTS)})  # the warm-up asks for 4 tokens
    out = tmp_path / "p"
    assert main(profile_args(shapes, out, url)) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "warm-up request" in err and "no point was completed" in err and "are saved" not in err
    assert not (out / "profile.csv").exists()
