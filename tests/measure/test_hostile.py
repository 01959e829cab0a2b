"""Issue 25: `python -m measure` run by a careless or hostile user (concurrent runs, bad inputs, huge campaigns,
a server that fails everything).  Each case is a one-line `error: ...` or an honest message, never a traceback."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from measure.cli import EXIT_USAGE, main
from tests.conftest import REPO
from tests.measure.test_faults import profile_args, read_rows, shapes, stub  # noqa: F401 - fixtures


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    return err


# ------------------------------------------------------------------ 4. two runs on one folder

def test_a_second_run_on_a_folder_being_written_fails_at_once(stub, shapes, tmp_path, capsys):  # noqa: F811
    url, _ = stub({6: "hang"})
    out = tmp_path / "p"
    first = subprocess.Popen([sys.executable, "-m", "measure", *profile_args(shapes, out, url, "--request-timeout",
                                                                              "60")], cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not ((out / "profile.csv").is_file() and read_rows(out)) and time.monotonic() < deadline:
            time.sleep(0.1)
        rows = read_rows(out)
        assert len(rows) == 1  # the first run is on its second point, which hangs
        started = time.monotonic()
        assert main(profile_args(shapes, out, url, "--resume", "--request-timeout", "1")) == EXIT_USAGE
        assert time.monotonic() - started < 10
        err = _one_line_error(capsys)
        assert str(out) in err and "another" in err
        assert read_rows(out) == rows
    finally:
        first.kill()
        first.wait()


def test_the_folder_is_free_again_after_a_run(stub, shapes, tmp_path, capsys):  # noqa: F811
    url, _ = stub()
    out = tmp_path / "p"
    assert main(profile_args(shapes, out, url)) == 0
    assert main(profile_args(shapes, out, url, "--resume")) == 0
    assert "nothing to do" in capsys.readouterr().err


# ------------------------------------------------------------------ 7. verify's inputs

@pytest.fixture
def verify_files(tmp_path):
    from tests.measure.test_verify import _files  # noqa: PLC0415 - its plan and routes, no server needed

    fake = {"ttft_p95_ms": 100.0, "output_tok_per_s": 10.0, "tpot_p95_ms": 10.0, "e2e_p95_ms": 200.0}
    return _files(tmp_path, fake, 1.0, assumptions_line=False)


def _verify(routes, plan, *extra) -> int:
    return main(["verify", "--plan", str(plan), "--routes", str(routes), "--route", "tiny", "--base-url",
                 "http://127.0.0.1:9", "--prompt-format", "tokens", *extra])


@pytest.mark.parametrize("content", [b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01" * 50, b"[" * 100_000 + b"\n",
                                     b'{"a":' * 100_000 + b"\n"])
@pytest.mark.parametrize("name", ["log.jsonl", "log.csv"])
def test_verify_refuses_an_unreadable_log_in_one_line(verify_files, tmp_path, capsys, content, name):
    routes, plan = verify_files
    log = tmp_path / name
    log.write_bytes(content)
    assert _verify(routes, plan, "--log", str(log)) == EXIT_USAGE
    assert name in _one_line_error(capsys)


@pytest.mark.parametrize("flag, value", [("--duration", "nan"), ("--duration", "inf"), ("--duration", "-1"),
                                         ("--drain", "-1"), ("--drain", "nan"), ("--max-requests", "0")])
def test_verify_refuses_bad_numbers_in_one_line(verify_files, capsys, flag, value):
    routes, plan = verify_files
    assert _verify(routes, plan, flag, value) == EXIT_USAGE
    assert flag in _one_line_error(capsys)


# ------------------------------------------------------------------ 8. a campaign file that is not YAML text

@pytest.mark.parametrize("content", [b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" * 100, b"[" * 100_000, b"a: " * 50_000])
def test_a_binary_or_deep_campaign_file_is_one_line(tmp_path, capsys, content):
    path = tmp_path / "campaign.yaml"
    path.write_bytes(content)
    assert main(["campaign", str(path), "--dry-run"]) == EXIT_USAGE
    assert "campaign.yaml" in _one_line_error(capsys)
