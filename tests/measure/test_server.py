"""--server: command lines for vLLM, trtllm-serve and --server-cmd, and the launch/stop lifecycle against a real
server process (`transformers serve` on CPU, launched through --server-cmd)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleetfacts.errors import InputError
from fleetfacts.schema import PROFILE, load_table
from measure.cli import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, main
from measure.engines import EngineConfig, EngineError, make_engine
from measure.engines import server as server_mod
from measure.engines.openai_engine import OpenAIEngine
from measure.engines.server import (
    ServerEngine,
    check_port_free,
    custom_command,
    kv_cache_tokens_from_metrics,
    token_budget_from_log,
    trtllm_command,
    trtllm_options,
    vllm_command,
    vllm_flag,
)
from tests.conftest import REPO
from tests.measure.conftest import OFFLINE_ENV, SERVE, SERVE_FLAGS, free_port

CONFIG_JSON = {"architectures": ["LlamaForCausalLM"], "vocab_size": 1000, "hidden_size": 64,
               "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2}
SHAPES = ("mode,input_len,output_len,batch_size,concurrency,request_rate,arrival,num_requests\n"
          "offline,16,8,4,,,,\n"
          "concurrency,16,8,,2,,,4\n")


def model_dir(tmp_path, *files: str):
    path = tmp_path / "m"
    path.mkdir(exist_ok=True)
    (path / "config.json").write_text(json.dumps(CONFIG_JSON))
    for name in files:
        (path / name).write_text("{}")
    return str(path)


def config(tmp_path, *files: str, **kw) -> EngineConfig:
    return EngineConfig(**{"engine": "vllm", "model": "llama-3.1-8b", "model_path": model_dir(tmp_path, *files),
                           "server": True, "max_model_len": 2048, "server_port": 8123, **kw})


def after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


# ------------------------------------------------------------------ command lines

def test_vllm_command_dummy_fp8_tp(tmp_path):
    argv = vllm_command(config(tmp_path, precision="fp8", tp=2, seed=7), 8123)
    assert argv[:9] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model",
                        str(tmp_path / "m"), "--host", "127.0.0.1", "--port", "8123"]
    assert after(argv, "--served-model-name") == "llama-3.1-8b" and after(argv, "--tensor-parallel-size") == "2"
    assert after(argv, "--dtype") == "bfloat16" and after(argv, "--quantization") == "fp8"
    assert after(argv, "--load-format") == "dummy" and after(argv, "--max-model-len") == "2048"
    assert after(argv, "--seed") == "7" and "--skip-tokenizer-init" in argv
    assert not any("log-stats" in a for a in argv)  # store_true switch, False: omitted


def test_vllm_command_real_checkpoint_bf16(tmp_path):
    argv = vllm_command(config(tmp_path, "model.safetensors", "tokenizer.json", served_model="m8b"), 9000)
    assert after(argv, "--dtype") == "bfloat16" and after(argv, "--served-model-name") == "m8b"
    for absent in ("--load-format", "--quantization", "--skip-tokenizer-init"):
        assert absent not in argv


def test_vllm_engine_args_as_flags(tmp_path):
    args = {"gpu_memory_utilization": 0.95, "enable_prefix_caching": False, "enforce_eager": True,
            "compilation_config": {"mode": 0}, "cudagraph_capture_sizes": [1, 2],
            "max_num_seqs": 512, "max_model_len": 4096}
    argv = vllm_command(config(tmp_path, engine_args=args, max_model_len=None), 8123)
    assert after(argv, "--gpu-memory-utilization") == "0.95" and "--no-enable-prefix-caching" in argv
    assert "--enforce-eager" in argv and after(argv, "--max-num-seqs") == "512"
    assert after(argv, "--compilation-config") == '{"mode":0}'
    at = argv.index("--cudagraph-capture-sizes")
    assert argv[at:at + 3] == ["--cudagraph-capture-sizes", "1", "2"]
    assert after(argv, "--max-model-len") == "4096"


@pytest.mark.parametrize(("key", "value", "flags"), [
    ("kv_cache_dtype", "fp8", ["--kv-cache-dtype", "fp8"]), ("enforce_eager", True, ["--enforce-eager"]),
    ("enable_chunked_prefill", False, ["--no-enable-chunked-prefill"]), ("disable_log_stats", False, []),
    ("hf_overrides", {"a": 1}, ["--hf-overrides", '{"a":1}']), ("max_loras", None, []), ("x", [], [])])
def test_vllm_flag(key, value, flags):
    assert vllm_flag(key, value) == flags


def test_trtllm_command_and_options_file(tmp_path):
    cfg = config(tmp_path, engine="trtllm", tp=4, engine_args={
        "max_batch_size": 256, "kv_cache_config": {"free_gpu_memory_fraction": 0.8}, "max_model_len": 8192})
    argv = trtllm_command(cfg, 8123, tmp_path / "opts.yaml")
    assert argv == ["trtllm-serve", str(tmp_path / "m"), "--host", "127.0.0.1", "--port", "8123", "--backend",
                    "pytorch", "--tp_size", "4", "--max_seq_len", "8192", "--extra_llm_api_options",
                    str(tmp_path / "opts.yaml")]
    assert trtllm_options(cfg) == {"dtype": "bfloat16", "kv_cache_config": {"free_gpu_memory_fraction": 0.8},
                                   "load_format": "dummy", "skip_tokenizer_init": True, "max_batch_size": 256}


def test_trtllm_fp8_needs_prequantized_checkpoint(tmp_path):
    with pytest.raises(EngineError, match="pre-quantized"):
        make_engine(config(tmp_path, engine="trtllm", precision="fp8"))


def test_custom_command_placeholders_and_quoting():
    argv = custom_command("serve {model} --port {port} --cfg '{\"a\": 1}' --name 'my model'", "/m dir", 9001)
    assert argv == ["serve", "/m dir", "--port", "9001", "--cfg", '{"a": 1}', "--name", "my model"]
    with pytest.raises(InputError, match="empty"):
        custom_command("  ", "/m", 1)
    with pytest.raises(InputError, match="server-cmd"):
        custom_command("serve 'unclosed", "/m", 1)


def test_make_engine_and_launch_plan(tmp_path):
    engine = make_engine(config(tmp_path))
    assert isinstance(engine, ServerEngine) and engine.modes == ("offline", "concurrency", "rate")
    assert engine.client.config.prompt_format == "tokens"          # no tokenizer: token-id prompts
    assert engine.client.config.served_model == "llama-3.1-8b"
    assert engine.client.config.base_url == "http://127.0.0.1:8123"
    trt = make_engine(config(tmp_path, "tokenizer.json", engine="trtllm", server_log=str(tmp_path / "o/server.log")))
    assert trt.launch.options_path == str(tmp_path / "o" / "trtllm_extra_llm_api_options.yaml")
    assert trt.client.config.served_model == "m" and trt.client.config.prompt_format == "words"
    cmd = make_engine(config(tmp_path, engine="openai", server=False, server_cmd="srv --port {port}"))
    assert isinstance(cmd, ServerEngine) and cmd.launch.argv == ("srv", "--port", "8123")
    assert isinstance(make_engine(config(tmp_path, engine="openai", base_url="http://x")), OpenAIEngine)


def test_recorded_command_drops_api_key(tmp_path):
    engine = make_engine(config(tmp_path, engine_args={"api_key": "sk-secret"}))
    assert "--api-key" in engine.launch.argv and "sk-secret" not in engine.command_line()


def test_missing_programs_fail_fast(tmp_path):
    with pytest.raises(EngineError, match="not found"):
        make_engine(config(tmp_path, server_cmd="no-such-server-xyz --port {port}")).version()
    if not any(os.access(os.path.join(d, "trtllm-serve"), os.X_OK) for d in os.environ["PATH"].split(os.pathsep)):
        with pytest.raises(EngineError, match="trtllm-serve is not on PATH"):
            make_engine(config(tmp_path, engine="trtllm")).version()


def test_port_in_use_is_refused(timed_server):
    url, _ = timed_server(ttft_s=0, itl_s=0)
    with pytest.raises(EngineError, match="already in use"):
        check_port_free(int(url.rsplit(":", 1)[1]))


def test_kv_cache_tokens_from_vllm_metrics():
    text = ('# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n'
            'vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",num_gpu_blocks="30000"} 1.0\n')
    assert kv_cache_tokens_from_metrics(text) == 480000
    assert kv_cache_tokens_from_metrics("vllm:num_requests_running 0\n") is None
    assert kv_cache_tokens_from_metrics('vllm:cache_config_info{num_gpu_blocks="None",block_size="16"} 1') is None


def test_token_budget_from_a_real_vllm_server_log():
    log = (Path(__file__).resolve().parents[2] / "profiles" / "measured" / "h200"
           / "vllm-llama-3.1-8b-bf16-tp1-server" / "server.log").read_text(encoding="utf-8")
    assert token_budget_from_log(log) == 8192  # vLLM 0.26's OpenAI-server default on the H200
    relaunched = log + "\nINFO [scheduler.py:252] Chunked prefill is enabled with max_num_batched_tokens=4096.\n"
    assert token_budget_from_log(relaunched) == 4096  # a resumed profile appends: the last launch counts
    assert token_budget_from_log("no scheduler line") is None


# ------------------------------------------------------------------ lifecycle (real processes)

def profile_argv(tmp_path, model, server_cmd: str, port: int, *extra: str) -> list[str]:
    shapes = tmp_path / "shapes.csv"
    shapes.write_text(SHAPES)
    return ["profile", "--gpu", "cpu-ci", "--engine", "vllm", "--server", "--server-cmd", server_cmd,
            "--model", "tiny", "--model-path", str(model), "--port", str(port), "--no-ignore-eos",
            "--engine-name", "transformers", "--shapes", str(shapes), "--out", str(tmp_path / "prof"), *extra]


@pytest.fixture
def launched(monkeypatch):
    """The server processes ServerEngine starts (Popen recorded, not changed)."""
    procs: list[subprocess.Popen] = []
    real = subprocess.Popen

    def record(*args, **kwargs):
        proc = real(*args, **kwargs)
        if kwargs.get("start_new_session"):  # not e.g. platform's `uname -p`
            procs.append(proc)
        return proc

    monkeypatch.setattr(server_mod.subprocess, "Popen", record)
    for key, value in OFFLINE_ENV.items():
        monkeypatch.setenv(key, value)
    return procs


def assert_gone(proc: subprocess.Popen) -> None:
    """The server and every process of its group have ended."""
    assert proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)


def serve_cmd() -> str:
    return shlex.join([str(SERVE), "serve"]) + " {model} --host 127.0.0.1 --port {port} " + " ".join(SERVE_FLAGS)


def test_profile_launches_real_server_stops_it_when_interrupted_and_resumes(tiny_model, tmp_path, launched,
                                                                           monkeypatch):
    """Two launches of the real server: a sweep interrupted mid-way stops it; --resume launches it again,
    runs the rest and stops it when done (a run from the start would add a third launch and check nothing more)."""
    real_run = OpenAIEngine.run_point

    def interrupt_on_concurrency(self, point, seed):
        if point.mode == "concurrency":
            raise KeyboardInterrupt
        return real_run(self, point, seed)

    monkeypatch.setattr(OpenAIEngine, "run_point", interrupt_on_concurrency)
    argv = profile_argv(tmp_path, tiny_model, serve_cmd(), free_port())
    assert main(argv) == EXIT_INTERRUPTED
    assert_gone(launched[0])
    out = tmp_path / "prof"
    assert [r["mode"] for r in load_table(out / "profile.csv", PROFILE).to_dict("records")] == ["offline"]
    monkeypatch.setattr(OpenAIEngine, "run_point", real_run)
    assert main(argv + ["--resume"]) == EXIT_OK
    table = load_table(out / "profile.csv", PROFILE)
    assert list(table["mode"]) == ["offline", "concurrency"] and set(table["status"]) == {"ok"}
    assert (table["output_tok_per_s"] > 0).all() and set(table["engine"]) == {"transformers"}
    assert "Uvicorn running on http://127.0.0.1" in (out / "server.log").read_text()
    runs = json.loads((out / "env.json").read_text())["runs"]
    assert len(runs) == 2  # the interrupted run and the resumed one
    for run in runs:
        assert run["effective_engine_args"]["command"].startswith(str(SERVE))
        assert run["effective_engine_args"]["server_log"] == str(out / "server.log")
    assert len(launched) == 2
    assert_gone(launched[1])


def test_server_that_exits_at_once_is_a_clear_error(tmp_path, launched, capsys):
    cmd = shlex.join([sys.executable, "-c", "import sys; print('boom: unknown flag --foo'); sys.exit(3)"])
    assert main(profile_argv(tmp_path, model_dir(tmp_path), cmd, free_port())) == EXIT_USAGE
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "error: " in x).split("error: ", 1)[1]
    assert line.startswith("python server exited with code 3 before it was ready")
    assert line.endswith("server.log: boom: unknown flag --foo")
    assert (tmp_path / "prof" / "server.log").is_file()
    assert_gone(launched[0])


def test_start_timeout_and_interrupt_during_start_stop_the_server(tmp_path, launched, monkeypatch, capsys):
    sleeper = shlex.join([sys.executable, "-c", "import time; time.sleep(60)"])
    argv = profile_argv(tmp_path, model_dir(tmp_path), sleeper, free_port(), "--server-start-timeout", "1")
    assert main(argv) == EXIT_USAGE
    assert "not ready after 1 s" in capsys.readouterr().err
    assert_gone(launched[0])

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(server_mod, "wait_ready", interrupt)
    assert main(argv) == EXIT_INTERRUPTED
    assert_gone(launched[1])


def test_server_ends_when_measure_is_killed(tmp_path):
    """SIGKILL of measure itself (no cleanup can run): the kernel's parent-death signal ends the server."""
    sleeper = shlex.join([sys.executable, "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(120)"])
    argv = profile_argv(tmp_path, model_dir(tmp_path), sleeper, free_port(), "--server-start-timeout", "60")
    measure = subprocess.Popen([sys.executable, "-m", "measure", *argv], cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    log = tmp_path / "prof" / "server.log"
    pid = wait_for(lambda: next((int(x) for x in log.read_text().split() if x.isdigit()), None) if log.exists()
                   else None)
    measure.kill()
    measure.wait()
    assert wait_for(lambda: not running(pid) or None)


def wait_for(probe, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value is not None:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (PID 1 of a container may not reap orphans)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
