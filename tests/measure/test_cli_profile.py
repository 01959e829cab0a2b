"""`python -m measure profile` end to end with a fake vllm (our sweep logic): rows, env, resume, failures."""

from __future__ import annotations

import csv
import json

import pytest

from fleetfacts.schema import PROFILE, load_table
from measure.cli import EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE, main

SHAPES = """mode,input_len,output_len,batch_size,concurrency,request_rate,arrival,num_requests,purpose
offline,16,8,2,,,,,a
offline,40,8,4,,,,,b
offline,48,4,2,,,,,c
concurrency,16,8,,2,,,4,skipped in process
"""


@pytest.fixture
def shapes(tmp_path):
    path = tmp_path / "shapes.csv"
    path.write_text(SHAPES)
    return path


def args(shapes, out, *extra):
    return ["profile", "--gpu", "h200", "--engine", "vllm", "--model", "llama-3.1-8b", "--shapes", str(shapes),
            "--out", str(out), *extra]


def rows(out):
    with open(out / "profile.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_full_run_writes_valid_profile_and_env(fake_vllm, shapes, tmp_path, capsys):
    out = tmp_path / "prof"
    assert main(args(shapes, out, "--engine-arg", "gpu_memory_utilization=0.9")) == EXIT_OK
    table = load_table(out / "profile.csv", PROFILE)
    assert len(table) == 3 and set(table["status"]) == {"ok"}
    assert list(table["batch_size"]) == [2, 4, 2] and table["kv_cache_tokens"].iloc[0] == 16000
    assert (table["cuda_graph_max_batch"] == 512).all()  # the engine's compilation_config, recorded per row
    assert (table["output_tok_per_s"] > 0).all() and table["ttft_p50_ms"].notna().all()
    assert table["engine_version"].iloc[0] == "0.0-fake" and "gpu_memory_utilization" in table["notes"].iloc[0]
    env = json.loads((out / "env.json").read_text())
    run = env["runs"][0]
    assert run["engine_args"] == {"gpu_memory_utilization": 0.9} and run["kv_cache_tokens"] == 16000
    assert run["cuda_graph_max_batch"] == 512
    assert run["effective_engine_args"]["load_format"] == "dummy" and "python -m measure profile" in run["command"]
    assert run["cpu"]["logical_cores"] >= 1 and run["cpu"]["model"]  # beyond-graph steps follow the host CPU
    assert "skipped 1 point" in capsys.readouterr().err


def test_failure_recorded_and_sweep_goes_on_then_retry(fake_vllm, shapes, tmp_path):
    out = tmp_path / "prof"
    fake_vllm.LLM.fail_input_len = 40
    assert main(args(shapes, out)) == EXIT_OK
    got = rows(out)
    assert [r["status"] for r in got] == ["ok", "failed", "ok"]
    assert "out of memory" in got[1]["error"] and got[1]["output_tok_per_s"] == ""
    # plain resume: nothing to do (failed points are kept), --retry-failed runs only the failed one
    assert main(args(shapes, out, "--resume")) == EXIT_OK and len(rows(out)) == 3
    fake_vllm.LLM.fail_input_len = None
    assert main(args(shapes, out, "--resume", "--retry-failed")) == EXIT_OK
    got = rows(out)
    assert len(got) == 4 and got[3]["input_len"] == "40" and got[3]["status"] == "ok"


def test_dead_engine_is_restarted(fake_vllm, shapes, tmp_path):
    fake_vllm.LLM.die_input_len = 40
    assert main(args(shapes, tmp_path / "p")) == EXIT_OK
    assert [r["status"] for r in rows(tmp_path / "p")] == ["ok", "failed", "ok"]
    assert len(fake_vllm.LLM.instances) == 2


def test_existing_folder_needs_resume_and_same_identity(fake_vllm, shapes, tmp_path, capsys):
    out = tmp_path / "prof"
    assert main(args(shapes, out)) == EXIT_OK
    assert main(args(shapes, out)) == EXIT_USAGE
    assert "pass --resume" in capsys.readouterr().err
    assert main(args(shapes, out, "--resume", "--precision", "fp8")) == EXIT_USAGE
    assert "different precision" in capsys.readouterr().err


def test_a_profile_recorded_in_another_clone_resumes_here_but_another_model_dir_does_not(fake_vllm, shapes, tmp_path,
                                                                                         capsys):
    """CI failed when a committed profile named the bundled model dir by the absolute path of the clone that
    measured it: the same bundled dir is the same model wherever the clone lives."""
    out = tmp_path / "prof"
    assert main(args(shapes, out)) == EXIT_OK
    env_path = out / "env.json"
    env = json.loads(env_path.read_text())
    env["profile"]["model_path"] = "/elsewhere/clone/profiles/models/llama-3.1-8b"
    env_path.write_text(json.dumps(env))
    assert main(args(shapes, out, "--resume")) == EXIT_OK
    env["profile"]["model_path"] = "/elsewhere/clone/profiles/models/qwen2.5-7b"
    env_path.write_text(json.dumps(env))
    assert main(args(shapes, out, "--resume")) == EXIT_USAGE
    assert "different model_path" in capsys.readouterr().err


def test_time_budget_stops_before_a_point_and_prints_resume(fake_vllm, shapes, tmp_path, capsys, monkeypatch):
    import measure.cli as cli
    monkeypatch.setattr(cli, "ENGINE_START_S", 1.0)
    out = tmp_path / "prof"
    # every point estimates >= 1 s fixed cost; with a 5 s budget the safety margin leaves room for none
    code = main(args(shapes, out, "--max-time", "5"))
    err = capsys.readouterr().err
    assert code == EXIT_INCOMPLETE and "resume with" in err and "--resume" in err
    assert not (out / "profile.csv").exists()


def test_interrupt_prints_resume_command(fake_vllm, shapes, tmp_path, capsys, monkeypatch):
    calls = {"n": 0}
    original = fake_vllm.LLM.generate

    def interrupting(self, prompts, sp, use_tqdm=True):
        calls["n"] += 1
        if calls["n"] == 3:  # warm-up, point 1, then Ctrl-C in point 2
            raise KeyboardInterrupt
        return original(self, prompts, sp, use_tqdm)

    monkeypatch.setattr(fake_vllm.LLM, "generate", interrupting)
    out = tmp_path / "prof"
    assert main(args(shapes, out)) == 130
    err = capsys.readouterr().err
    assert f"--out {out}" in err and "--resume" in err and len(rows(out)) == 1
    monkeypatch.setattr(fake_vllm.LLM, "generate", original)
    assert main(args(shapes, out, "--resume")) == EXIT_OK and len(rows(out)) == 3


def test_dry_run_prints_plan_without_engine(shapes, tmp_path, capsys):
    assert main(args(shapes, tmp_path / "p", "--dry-run")) == EXIT_OK
    text = capsys.readouterr().out
    assert "GPU-minutes" in text and "ESTIMATE" in text and "skip" in text
    assert not (tmp_path / "p").exists()


def test_presets_load_and_default_fits_budget():
    from fleetfacts.specs import GpuSpec, model_facts
    from measure.estimate import ENGINE_START_S, Estimator
    from measure.points import load_shapes
    h200 = GpuSpec("h200", 141, 4.8, 989, "test figures")
    est = Estimator(gpu=h200, model=model_facts("llama-3.1-8b"))
    default = load_shapes("default")
    offline = [p for p in default if p.mode == "offline"]
    assert 20 <= len(offline) <= 35
    assert {p.input_len for p in offline} >= {128, 8192} and {p.output_len for p in offline} >= {64, 2048}
    assert max(p.batch_size for p in offline) >= 512 and min(p.batch_size for p in offline) == 1
    assert sum(est.point_s(p) for p in offline) + ENGINE_START_S < 600
    published = {(p.input_len, p.output_len) for p in load_shapes("tensorrt-llm-published")}
    assert published == {(128, 128), (128, 2048), (500, 2000), (1000, 1000), (2048, 128), (2048, 2048), (5000, 500)}


def test_not_installed_is_exit_2(shapes, tmp_path, capsys, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "vllm", None)
    assert main(args(shapes, tmp_path / "p")) == EXIT_USAGE
    assert "vLLM is not installed" in capsys.readouterr().err


def test_tag_is_the_config_column_and_part_of_the_identity(fake_vllm, shapes, tmp_path, capsys):
    out = tmp_path / "prof"
    assert main(args(shapes, out, "--tag", "tuned")) == EXIT_OK
    assert {r["config"] for r in rows(out)} == {"tuned"}
    assert json.loads((out / "env.json").read_text())["profile"]["config"] == "tuned"
    assert main(args(shapes, out, "--resume")) == EXIT_USAGE
    assert "different config" in capsys.readouterr().err


def test_resume_upgrades_an_older_header(fake_vllm, shapes, tmp_path):
    """A profile written before the config column existed: resume rewrites it with the column, nothing lost."""
    out = tmp_path / "prof"
    assert main(args(shapes, out)) == EXIT_OK
    old = rows(out)[:2]
    legacy = [name for name in old[0] if name != "config"]
    with open(out / "profile.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=legacy, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(old)
    env = json.loads((out / "env.json").read_text())
    del env["profile"]["config"]
    (out / "env.json").write_text(json.dumps(env))
    assert main(args(shapes, out, "--resume")) == EXIT_OK
    table = load_table(out / "profile.csv", PROFILE)
    assert len(table) == 3 and set(table["config"]) == {"default"}
    assert list(table["input_len"]) == [16, 40, 48] and table["output_tok_per_s"].notna().all()


def test_resume_plans_with_the_durations_already_measured():
    from measure.sweep import Calibration
    rows = [{"mode": "offline", "input_len": "16", "output_len": "8", "batch_size": "2", "duration_s": "2.0",
             "status": "ok"},
            {"mode": "offline", "input_len": "40", "output_len": "8", "batch_size": "4", "duration_s": "",
             "status": "failed"},
            {"mode": "offline", "input_len": "48", "output_len": "4", "batch_size": "2", "duration_s": "3.0",
             "status": "ok"}]
    calibration = Calibration.from_rows(rows, lambda p: 10.0)
    assert calibration.ratios == [0.2, 0.3]
    assert calibration.scale(10.0) == 2.5 and Calibration().scale(10.0) == 10.0


def test_roofline_command_fills_older_rows_with_the_sweep_formula(fake_vllm, shapes, tmp_path, capsys):
    out = tmp_path / "prof"
    assert main(args(shapes, out)) == EXIT_OK
    measured = [r["roofline_frac"] for r in rows(out)]
    assert all(measured)
    older = rows(out)
    for row in older:
        row["roofline_frac"] = ""
    with open(out / "profile.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(older[0]))
        writer.writeheader()
        writer.writerows(older)
    assert main(["roofline", str(out)]) == EXIT_OK
    assert "filled roofline_frac in 3 row(s)" in capsys.readouterr().out
    assert [float(r["roofline_frac"]) for r in rows(out)] == pytest.approx([float(v) for v in measured], rel=1e-5)
    assert rows(out)[0]["source"] == older[0]["source"]
    assert main(["roofline", str(tmp_path / "missing")]) == EXIT_USAGE


def test_profile_help_documents_engines_output_metrics_and_presets(capsys):
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    text = capsys.readouterr().out
    for needle in ("--resume", "--server", "--engine-arg", "--dry-run", "--max-time", "--tag", "dummy weights",
                   "TPOT", "first token excluded", "roofline_frac", "tensorrt-llm-published", "env.json",
                   "status=failed", "API keys removed", "gamma:cv=X"):
        assert needle in text, needle


def test_dry_run_on_resume_plans_with_measured_durations(fake_vllm, shapes, tmp_path, capsys):
    out = tmp_path / "prof"
    fake_vllm.LLM.fail_input_len = 40
    assert main(args(shapes, out)) == EXIT_OK
    capsys.readouterr()
    assert main(args(shapes, out, "--resume", "--retry-failed", "--dry-run")) == EXIT_OK
    assert "rescaled by 2 measured point(s)" in capsys.readouterr().out


@pytest.mark.parametrize("model, collapses", [("ernie-4.5-21b-a3b", True), ("deepseek-v2-lite", True),
                                             ("qwen3-30b-a3b", False)])
def test_dummy_weights_on_a_collapsing_router_make_every_row_suspect_and_resume_keeps_them(fake_vllm, shapes, tmp_path,
                                                                                       model, collapses):
    out = tmp_path / "prof"
    argv = ["profile", "--gpu", "h100", "--engine", "vllm", "--model", model, "--shapes", str(shapes),
            "--out", str(out)]
    assert main(argv) == EXIT_OK
    got = rows(out)
    assert [r["status"] for r in got] == ["suspect" if collapses else "ok"] * 3
    assert all(("same experts" in r["notes"]) == collapses for r in got)
    assert main([*argv, "--resume"]) == EXIT_OK and len(rows(out)) == 3  # measured: not redone


def test_the_cpu_record_reads_the_model_name_and_survives_a_missing_cpuinfo(tmp_path):
    from measure.envinfo import cpu_info

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n")
    assert cpu_info(str(cpuinfo))["model"] == "Intel(R) Xeon(R) Platinum 8480+"
    missing = cpu_info(str(tmp_path / "absent"))
    assert missing["logical_cores"] >= 1 and "model" in missing
