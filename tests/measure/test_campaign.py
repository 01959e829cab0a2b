"""`measure campaign` without Ray: the file format, the dry-run schedule, and real runs against the CPU server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
import yaml

from fleetfacts.errors import InputError
from fleetfacts.extras import import_ray
from measure.campaign.command import EXIT_INCOMPLETE, EXIT_OK
from measure.campaign.driver import JobSink, StatusFile
from measure.campaign.plan import plan_jobs
from measure.campaign.spec import load_campaign
from measure.campaign.worker import DONE, ENV, ROW, Event
from measure.cli import main
from measure.stats import Measurement
from measure.sweep import build_row
from tests.conftest import REPO
from tests.measure.campaign_helpers import assert_complete_once, profile_rows, wait_for_rows, write_campaign

H200_CAMPAIGN = REPO / "examples" / "campaigns" / "h200-two-jobs.yaml"


def test_job_keys_become_the_profile_command(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"defaults": {"engine": "vllm", "model": "llama-3.1-8b"}, "jobs": [
        {"gpu": "H100", "precision": "fp8", "tp": 2, "engine_args": {"kv_cache_dtype": "fp8"}, "budget_s": 600,
         "record_hostname": True}]}, sort_keys=False))
    argv = load_campaign(path).jobs[0]
    assert argv[:1] == ("profile",)
    assert " ".join(argv[1:]) == ("--engine vllm --model llama-3.1-8b --gpu H100 --precision fp8 --tp 2 "
                                  "--engine-arg kv_cache_dtype=\"fp8\" --max-time 600 --record-hostname")


@pytest.mark.parametrize("text, message", [
    ("jobs: []", "non-empty 'jobs' list"),
    ("jobs: [{gpu: h100, model: llama-3.1-8b, engine: vllm, colour: red}]", "job 1: unknown job key 'colour'"),
    ("jobs: [{gpu: h100, model: llama-3.1-8b, engine: vllm, resume: true}]", "job 1: unknown job key 'resume'"),
    ("jobs: [{gpu: h100, model: llama-3.1-8b, engine: sglang}]", "job 1: argument --engine: invalid choice"),
    ("jobs: [{gpu: h100, engine: vllm}]", "job 1: the following arguments are required: --model"),
    ("jobs: [{gpu: h100, model: m, engine: vllm, engine_args: [a]}]", "engine_args: expected a mapping"),
    ("jobs: [{gpu: h100, model: m, engine: vllm, tp: 1000000000}]", "job 1: --tp must be in 1..72"),
    ("job: []", "non-empty 'jobs' list"),
    ("jobs: [1", "not valid YAML"),
    ("name: x\ncolour: red\njobs: [{gpu: h100}]", "unknown key(s) colour"),
])
def test_bad_campaign_files_are_one_line_errors(tmp_path, capsys, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert main(["campaign", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err and len(err.strip().splitlines()) == 1


def test_a_campaign_beyond_its_stated_job_limit_is_refused_before_any_job_is_planned(tmp_path, capsys):
    """Issue 25: a 10,000-job --dry-run took 25 s and printed 10,000 rows; past MAX_CAMPAIGN_JOBS the file is
    refused at once, in one line naming the limit and the fix."""
    from measure.campaign.spec import MAX_CAMPAIGN_JOBS
    defaults = "defaults: {gpu: h200, engine: vllm, model: m}\n"
    path = tmp_path / "big.yaml"
    path.write_text(defaults + "jobs:\n" + "".join(f"  - {{tag: t{i}}}\n" for i in range(MAX_CAMPAIGN_JOBS + 1)))
    assert main(["campaign", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"{MAX_CAMPAIGN_JOBS + 1:,} jobs" in err and f"at most {MAX_CAMPAIGN_JOBS:,}" in err and "split" in err
    assert len(err.strip().splitlines()) == 1
    path.write_text(defaults + "jobs:\n" + "".join(f"  - {{tag: t{i}}}\n" for i in range(MAX_CAMPAIGN_JOBS)))
    assert load_campaign(path).jobs  # the limit itself is accepted


def test_two_jobs_writing_one_folder_are_refused(tmp_path):
    path = tmp_path / "c.yaml"
    job = {"gpu": "h200", "engine": "vllm", "model": "llama-3.1-8b"}
    path.write_text(yaml.safe_dump({"out_root": str(tmp_path), "jobs": [job, job]}))
    with pytest.raises(InputError, match="write the same folder"):
        plan_jobs(load_campaign(path), resume=False)


def test_dry_run_schedules_the_h200_campaign_with_the_estimator(capsys):
    assert main(["campaign", str(H200_CAMPAIGN), "--dry-run"]) == EXIT_OK
    out = capsys.readouterr().out
    jobs = plan_jobs(load_campaign(H200_CAMPAIGN), resume=True)
    assert [j.pending for j in jobs] == [7, 7] and all(j.gpu_minutes > 0 for j in jobs)
    assert jobs[0].gpu_minutes >= jobs[1].gpu_minutes  # longest first
    total = sum(j.gpu_minutes for j in jobs)
    assert f"h200: 2 job(s) to run, {total:.1f} GPU-minutes" in out
    for job in jobs:
        assert f"{job.gpu_minutes:.1f}" in out
    assert out.index(jobs[0].label + " ") < out.index(jobs[1].label + " ")  # printed in the order they run


def test_dry_run_counts_tp_gpus_and_skips_measured_points(tmp_path):
    path = tmp_path / "c.yaml"
    base = {"gpu": "h200", "engine": "vllm", "model": "llama-3.1-8b", "shapes": "tensorrt-llm-published"}
    path.write_text(yaml.safe_dump({"out_root": str(tmp_path), "jobs": [base, {**base, "tp": 2}]}))
    one, two = sorted(plan_jobs(load_campaign(path), resume=True), key=lambda j: j.tp)
    # the same points on 2 GPUs run faster per point but use two GPUs at a time
    assert two.estimate_s < one.estimate_s and two.gpu_minutes == pytest.approx(two.estimate_s * 2 / 60)


def test_local_campaign_runs_every_job_against_the_real_server(tiny_server, tmp_path):
    path = write_campaign(tmp_path, tiny_server["url"], [{"gpu": "cpu-a", "shapes": "fast.csv"},
                                                         {"gpu": "cpu-b", "shapes": "fast.csv", "tp": 2}])
    assert main(["campaign", str(path)]) == EXIT_OK
    for gpu, folder in (("cpu-a", "openai-tiny-bf16-tp1"), ("cpu-b", "openai-tiny-bf16-tp2")):
        out = tmp_path / "profiles" / gpu / folder
        assert_complete_once(out, tmp_path / "fast.csv")
        rows = profile_rows(out)
        assert {r["gpu"] for r in rows} == {gpu} and float(rows[0]["output_tok_per_s"]) > 0
        assert rows[0]["source"].startswith("python -m measure profile ") and f"--gpu {gpu}" in rows[0]["source"]
        env = json.loads((out / "env.json").read_text())
        assert env["profile"]["gpu"] == gpu and len(env["runs"]) == 1 and env["runs"][0]["engine"] == "openai"
    status = json.loads(path.with_suffix(".status.json").read_text())
    assert [(j["state"], j["ok"], j["failed"]) for j in status["jobs"]] == [("done", 2, 0)] * 2
    # nothing is left: a resume plans no job and writes nothing
    before = (tmp_path / "profiles" / "cpu-a" / "openai-tiny-bf16-tp1" / "profile.csv").read_text()
    assert main(["campaign", str(path), "--resume"]) == EXIT_OK
    assert (tmp_path / "profiles" / "cpu-a" / "openai-tiny-bf16-tp1" / "profile.csv").read_text() == before
    # without --resume the existing folders are refused
    assert main(["campaign", str(path)]) == 2


def test_failing_job_is_recorded_and_the_campaign_goes_on(tiny_server, tmp_path, capsys):
    # ignore_eos makes the real server answer 422: that job's engine fails its warm-up
    path = write_campaign(tmp_path, tiny_server["url"], [{"gpu": "cpu-bad", "shapes": "fast.csv",
                                                          "no_ignore_eos": False},
                                                         {"gpu": "cpu-good", "shapes": "fast.csv"}])
    assert main(["campaign", str(path)]) == EXIT_INCOMPLETE
    status = {j["gpu"]: j for j in json.loads(path.with_suffix(".status.json").read_text())["jobs"]}
    assert status["cpu-bad"]["state"] == "failed" and "warm-up" in status["cpu-bad"]["error"]
    assert status["cpu-good"]["state"] == "done" and status["cpu-good"]["ok"] == 2
    assert_complete_once(tmp_path / "profiles" / "cpu-good" / "openai-tiny-bf16-tp1", tmp_path / "fast.csv")
    assert f"python -m measure campaign {path} --resume" in capsys.readouterr().err


@pytest.mark.slow
def test_killed_driver_loses_no_point_and_resume_finishes(tiny_server, tmp_path):
    path = write_campaign(tmp_path, tiny_server["url"], [{"gpu": "cpu-a", "shapes": "slow.csv"}])
    folder = tmp_path / "profiles" / "cpu-a" / "openai-tiny-bf16-tp1"
    driver = subprocess.Popen([sys.executable, "-m", "measure", "campaign", str(path)], cwd=REPO,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_rows(folder / "profile.csv", 1, timeout_s=120)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    written = len(profile_rows(folder))
    assert 1 <= written < 4
    assert main(["campaign", str(path), "--resume"]) == EXIT_OK
    assert_complete_once(folder, tmp_path / "slow.csv")
    assert len(json.loads((folder / "env.json").read_text())["runs"]) == 2


def test_without_ray_installed_the_message_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as when it is not installed
    path = tmp_path / "c.yaml"
    path.write_text(f"out_root: {tmp_path}\njobs: [{{gpu: h200, engine: openai, model: tiny, "
                    "base_url: 'http://127.0.0.1:9'}]\n")
    assert main(["campaign", str(path), "--ray", "auto"]) == 2
    assert capsys.readouterr().err.strip() == ("error: --ray needs Ray, which is not installed: pip install '.[ray]' "
                                               "(or: pip install 'ray[default]>=2.9')")
    with pytest.raises(ImportError):
        import_ray()


def test_sink_writes_each_point_once_and_the_node_environment(tmp_path):
    path = write_campaign(tmp_path, "http://127.0.0.1:9", [{"gpu": "cpu-a", "shapes": "fast.csv"}])
    payload = plan_jobs(load_campaign(path), resume=False)[0].payload
    status = StatusFile(tmp_path / "s.json", "ci", plan_jobs(load_campaign(path), resume=False))
    sink = JobSink(payload, status, progress=None)
    point = payload.points[0]
    measurement = Measurement(num_requests=2, duration_s=1.0, input_tokens=24, output_tokens=12,
                              ttft_ms=[10.0, 12.0], tpot_ms=[2.0, 2.5], itl_ms=[], e2e_ms=[20.0, 25.0])
    ok = build_row(payload.identity, "v1", point, None, measurement)
    failed = build_row(payload.identity, "v1", point, None, None, error="RuntimeError: boom")
    for event in (Event(ENV, {"engine": "openai", "gpus": []}), Event(ROW, failed), Event(ROW, ok), Event(ROW, ok)):
        sink.handle(event)
    rows = profile_rows(payload.request.out)
    assert [r["status"] for r in rows] == ["failed", "ok"]  # a retried failure is kept; the repeated ok is not
    assert (sink.state.ok, sink.state.failed, sink.state.duplicates) == (1, 1, 1)
    env = json.loads((payload.request.out / "env.json").read_text())
    assert env["runs"] == [{"engine": "openai", "gpus": []}] and env["profile"]["gpu"] == "cpu-a"
    sink.handle(Event(DONE, {"stopped_for_time": True, "remaining": 1}))
    saved = json.loads((tmp_path / "s.json").read_text())["jobs"][0]
    assert saved["state"] == "incomplete" and saved["error"] == "budget reached with 1 point(s) left"


def test_a_ray_address_nobody_answers_is_one_line_in_seconds(tmp_path):
    """`measure campaign --ray` checks the address before Ray is imported or asked to connect (ray.init retried an
    unreachable one past a minute): one line naming it, exit 2, no job started."""
    import subprocess
    import sys
    import time

    from tests.measure.campaign_helpers import write_campaign
    path = write_campaign(tmp_path, "http://127.0.0.1:9", [{"gpu": "h100", "shapes": "fast.csv"}])
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "measure", "campaign", str(path), "--ray", "127.0.0.1:9"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "no Ray cluster answers at 127.0.0.1:9" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert time.monotonic() - started < 30
    assert not (tmp_path / "profiles").exists() or not any((tmp_path / "profiles").rglob("profile.csv"))
