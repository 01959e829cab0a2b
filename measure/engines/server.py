"""The engine's own OpenAI-compatible server, launched as a subprocess and driven by the load generator.

`--server` with `--engine vllm` runs `python -m vllm.entrypoints.openai.api_server`, with `--engine trtllm`
`trtllm-serve`; `--server-cmd "..."` runs any other command line ({port} and {model} filled in).  The server
listens on 127.0.0.1:--port, writes stdout and stderr to <profile folder>/server.log and runs in its own
process group, which stop() ends (SIGTERM, then SIGKILL).  Every point (offline, concurrency, rate) is measured
through OpenAIEngine, the same load generator as `--engine openai`.

The vLLM flags are the in-process adapter's `vllm.LLM` arguments (vllm_offline.llm_kwargs) written as CLI flags;
the trtllm-serve flags and options file come from trtllm_offline.llm_kwargs.  trtllm-serve is not verified on
hardware (TensorRT-LLM could not be installed here).
"""

from __future__ import annotations

import ctypes
import datetime as dt
import importlib.metadata
import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO, cast

import httpx

from fleetfacts.errors import InputError
from measure import server_metrics
from measure.engines import trtllm_offline, vllm_offline
from measure.engines.base import EngineConfig, EngineError, EngineInfo, EngineNotInstalled
from measure.engines.openai_engine import OpenAIEngine, wait_ready
from measure.engines.registry import register
from measure.points import Point
from measure.redact import redact_json, redacted_argv
from measure.stats import Measurement

log = logging.getLogger(__name__)

# The server listens on loopback only: the load generator runs on the same machine.
HOST = "127.0.0.1"
VLLM_ENTRYPOINT = "vllm.entrypoints.openai.api_server"
TRTLLM_SERVE = "trtllm-serve"
TRTLLM_OPTIONS_FILE = "trtllm_extra_llm_api_options.yaml"
# vLLM switches declared with action="store_true" (vllm/engine/arg_utils.py, entrypoints/openai/cli_args.py,
# v0.26): they have no --no-X form and default to off, so False is omitted.  Every other boolean vLLM flag is
# an argparse.BooleanOptionalAction (arg_utils.get_kwargs), so False is passed as --no-X.
VLLM_STORE_TRUE = frozenset({"disable_log_stats", "aggregate_engine_logging", "data_parallel_multi_port_external_lb",
                             "headless", "grpc"})
# trtllm_offline.llm_kwargs keys that trtllm-serve takes as flags (tensorrt_llm/commands/serve.py, 1.x); the other
# keys go to the --extra_llm_api_options file, which overrides the flags.
TRTLLM_FLAGS = {"backend": "--backend", "tensor_parallel_size": "--tp_size", "max_seq_len": "--max_seq_len"}
# After SIGTERM the server frees the GPU and stops its workers; SIGKILL the group after this many seconds.
STOP_GRACE_S = 30.0
# The line start() writes into server.log before each launch (left out of the error's quote of the log).
LOG_HEADER = "=== measure launched at"
# What of server.log the one-line start error quotes: the last lines, at most this many characters.
LOG_TAIL_LINES, LOG_TAIL_CHARS, LOG_TAIL_BYTES = 5, 600, 65536
# vLLM's Prometheus info gauge carrying the allocated KV cache (num_gpu_blocks, block_size labels).
VLLM_CACHE_INFO = re.compile(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}", re.MULTILINE)
VLLM_TOKEN_BUDGET = re.compile(r"max_num_batched_tokens=(\d+)")
METRICS_TIMEOUT_S = 5.0
# Linux prctl(PR_SET_PDEATHSIG): the server gets SIGTERM when measure dies, even by SIGKILL (no cleanup runs then).
PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


# ------------------------------------------------------------------ command lines (pure)

def vllm_flag(key: str, value: object) -> list[str]:
    """One vLLM CLI argument: key_with_underscores=value -> ['--key-with-underscores', 'value'].

    True is a bare flag, False `--no-key` (omitted for store_true switches), a dict JSON, a list one word per
    element (nargs="+"), None nothing.
    """
    flag = "--" + key.replace("_", "-")
    if value is None:
        return []
    if isinstance(value, bool):
        if value:
            return [flag]
        return [] if key in VLLM_STORE_TRUE else ["--no-" + key.replace("_", "-")]
    if isinstance(value, (list, tuple)):
        return [flag, *(_word(v) for v in value)] if value else []
    return [flag, _word(value)]


def _word(value: object) -> str:
    return json.dumps(value, separators=(",", ":")) if isinstance(value, (dict, list)) else str(value)


def vllm_command(config: EngineConfig, port: int) -> list[str]:
    """`python -m vllm.entrypoints.openai.api_server --model ... --host 127.0.0.1 --port N ...`.

    Then every vllm.LLM argument the in-process adapter would use (tensor parallel size, seed, dtype, fp8
    quantization, dummy load format, skip tokenizer init, max model len) and the --engine-arg overrides.
    """
    kwargs = vllm_offline.llm_kwargs(config)
    argv = [sys.executable, "-m", VLLM_ENTRYPOINT, "--model", str(kwargs.pop("model")), "--host", HOST,
            "--port", str(port), "--served-model-name", config.served_model or config.model]
    for key, value in kwargs.items():
        argv += vllm_flag(key, value)
    return argv


def trtllm_options(config: EngineConfig) -> dict:
    """The --extra_llm_api_options content: the in-process LLM arguments that are not trtllm-serve flags."""
    kwargs = trtllm_offline.llm_kwargs(config)
    return {k: v for k, v in kwargs.items() if k != "model" and k not in TRTLLM_FLAGS}


def trtllm_command(config: EngineConfig, port: int, options_path: str | Path) -> list[str]:
    """`trtllm-serve MODEL --host 127.0.0.1 --port N --backend pytorch --tp_size TP [--max_seq_len L]
    --extra_llm_api_options FILE`.

    Flags as documented in https://nvidia.github.io/TensorRT-LLM/commands/trtllm-serve/trtllm-serve.html
    (1.x; `--extra_llm_api_options` is also spelled `--config` in later releases).
    """
    kwargs = trtllm_offline.llm_kwargs(config)
    argv = [TRTLLM_SERVE, config.model_path, "--host", HOST, "--port", str(port)]
    for key, flag in TRTLLM_FLAGS.items():
        if kwargs.get(key) is not None:
            argv += [flag, str(kwargs[key])]
    return argv + ["--extra_llm_api_options", str(options_path)]


def custom_command(template: str, model_path: str, port: int) -> list[str]:
    """--server-cmd split like a shell would (never run by one), with {port} and {model} filled in per word."""
    try:
        words = shlex.split(template)
    except ValueError as err:
        raise InputError(f"--server-cmd {template!r}: {err}") from None
    if not words:
        raise InputError("--server-cmd is empty: expected a command line with {port} and {model}")
    return [w.replace("{port}", str(port)).replace("{model}", model_path) for w in words]


def trtllm_served_name(model_path: str) -> str:
    """The model name trtllm-serve answers to: a local dir's name, else the hub id."""
    path = Path(model_path)
    return path.name if path.is_dir() else model_path


@dataclass(frozen=True)
class Launch:
    """What start() runs: the command, the model name requests carry, the prompt format, an options file."""

    argv: tuple[str, ...]
    served_model: str | None
    prompt_format: str
    options: dict | None = None   # trtllm: written to options_path before the launch
    options_path: str = ""


def plan_launch(config: EngineConfig, log_path: Path) -> Launch:
    """The launch of `config`: --server-cmd if given, else the vLLM or trtllm-serve command."""
    port = config.server_port
    if config.server_cmd:
        return Launch(tuple(custom_command(config.server_cmd, config.model_path, port)), config.served_model,
                      config.prompt_format)
    # Without a tokenizer the server cannot read text: send token-id prompts.
    prompts = config.prompt_format if config.has_tokenizer() else "tokens"
    if config.engine == "vllm":
        return Launch(tuple(vllm_command(config, port)), config.served_model or config.model, prompts)
    if config.engine == "trtllm":
        path = log_path.parent / TRTLLM_OPTIONS_FILE
        return Launch(tuple(trtllm_command(config, port, path)),
                      config.served_model or trtllm_served_name(config.model_path), prompts,
                      trtllm_options(config), str(path))
    raise EngineError(f"--server launches vllm or trtllm, not {config.engine!r}: use --server-cmd for other servers")


# ------------------------------------------------------------------ process and log helpers

def check_port_free(port: int) -> None:
    """EngineError when something already listens on HOST:port (it would answer /health instead of ours)."""
    with socket.socket() as sock:
        if sock.connect_ex((HOST, port)) == 0:
            raise EngineError(f"port {port} on {HOST} is already in use: pass another --port")


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _die_with_parent() -> None:
    """Runs in the server process before exec: ask Linux for SIGTERM when the launching process ends."""
    if _LIBC is not None:  # None off Linux, where there is no prctl
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def terminate_group(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to the server's process group, wait up to `grace_s`, then SIGKILL whatever is left of it."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        log.warning("server (pid %d) still running %.0f s after SIGTERM; killing it", proc.pid, grace_s)
    finally:  # also on a second Ctrl-C: never leave the server or its workers running
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


def log_tail(path: Path) -> str:
    """The last non-empty lines of the server log on one line."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    lines = [" ".join(line.split()) for line in text.splitlines()
             if line.strip() and not line.startswith(LOG_HEADER)][-LOG_TAIL_LINES:]
    return " | ".join(lines)[-LOG_TAIL_CHARS:] or "(empty log)"


def kv_cache_tokens_from_metrics(text: str) -> int | None:
    """num_gpu_blocks x block_size from vLLM's `vllm:cache_config_info` gauge (Prometheus text); None if absent."""
    match = VLLM_CACHE_INFO.search(text)
    labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group("labels"))) if match else {}
    blocks, size = labels.get("num_gpu_blocks", ""), labels.get("block_size", "")
    return int(blocks) * int(size) if blocks.isdigit() and size.isdigit() else None


def token_budget_from_log(text: str) -> int | None:
    """max_num_batched_tokens as vLLM's scheduler logs it at start ("Chunked prefill is enabled with
    max_num_batched_tokens=8192."); None if absent.  vLLM's OpenAI server defaults to a smaller budget
    than its offline LLM class (8192 vs 16384 on an H200), so the server's own figure is recorded."""
    found = VLLM_TOKEN_BUDGET.findall(text)
    return int(found[-1]) if found else None


def vllm_kv_cache_tokens(base_url: str) -> int | None:
    """The KV-cache size a running vLLM server allocated (its /metrics), best effort."""
    try:
        response = httpx.get(base_url + "/metrics", timeout=METRICS_TIMEOUT_S)
    except httpx.HTTPError:
        return None
    return kv_cache_tokens_from_metrics(response.text) if response.status_code == 200 else None


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


# ------------------------------------------------------------------ the adapter

@register("server")
class ServerEngine:
    """Launches the server in start(), measures points through OpenAIEngine, ends the server in stop()."""

    modes = OpenAIEngine.modes

    def __init__(self, config: EngineConfig):
        self.config = config
        self.kind = "cmd" if config.server_cmd else config.engine
        self.log_path = Path(config.server_log or Path(tempfile.gettempdir()) /
                             f"fleetplan-server-{config.server_port}.log")
        self.launch = plan_launch(config, self.log_path)
        self.base_url = f"http://{HOST}:{config.server_port}"
        self.client = OpenAIEngine(replace(config, base_url=self.base_url, served_model=self.launch.served_model,
                                           prompt_format=self.launch.prompt_format))
        self.name = {"vllm": "vLLM", "trtllm": TRTLLM_SERVE}.get(self.kind, Path(self.launch.argv[0]).name)
        self._proc: subprocess.Popen | None = None
        self._log: TextIO | None = None
        self._version: str | None = None

    def command_line(self) -> str:
        """The launched command line, API keys removed."""
        return shlex.join(redacted_argv(list(self.launch.argv)))

    def version(self) -> str:
        """The version to record; EngineNotInstalled/EngineError at once when the server program is missing."""
        if self._version:
            return self._version
        self._check_installed()
        package = {"vllm": "vllm", "trtllm": "tensorrt_llm"}.get(self.kind)
        return self.config.engine_version or (package and package_version(package)) or "unknown"

    def _check_installed(self) -> None:
        program = self.launch.argv[0]
        if self.kind == "vllm" and package_version("vllm") is None:
            raise EngineNotInstalled(vllm_offline.INSTALL_HINT)
        if shutil.which(program) is None:
            if self.kind == "trtllm":
                raise EngineNotInstalled(f"{TRTLLM_SERVE} is not on PATH. {trtllm_offline.INSTALL_HINT}")
            raise EngineError(f"--server-cmd: program {program!r} not found (not on PATH, or not executable)")

    def start(self) -> EngineInfo:
        """Launch the server, wait for /health (up to server_start_timeout_s), warm it up; ends it on failure."""
        t0 = time.perf_counter()
        self._launch()
        try:
            info = self._ready()
        except BaseException:  # KeyboardInterrupt too: the server must not outlive a failed start
            self.stop()
            raise
        self._version = info.version if info.version != "unknown" else self.version()
        kv = vllm_kv_cache_tokens(self.base_url) if self.kind == "vllm" else None
        budget = self._logged_token_budget() if self.kind == "vllm" else None
        return replace(info, version=self._version, start_s=time.perf_counter() - t0, kv_cache_tokens=kv,
                       max_num_batched_tokens=budget or info.max_num_batched_tokens,
                       effective_args=self._effective_args(info))

    def _logged_token_budget(self) -> int | None:
        try:
            return token_budget_from_log(Path(self.log_path).read_text(encoding="utf-8", errors="replace"))
        except OSError:
            return None

    def _launch(self) -> None:
        check_port_free(self.config.server_port)
        if self.launch.options is not None:
            # JSON is YAML: trtllm-serve reads this file with yaml.safe_load.
            Path(self.launch.options_path).write_text(json.dumps(self.launch.options, indent=2) + "\n")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = server_log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in stop()
        server_log.write(f"\n{LOG_HEADER} {dt.datetime.now().isoformat(timespec='seconds')}: {self.command_line()}\n")
        server_log.flush()
        log.info("launching %s server on port %d (log: %s)", self.name, self.config.server_port, self.log_path)
        try:
            self._proc = subprocess.Popen(list(self.launch.argv), stdin=subprocess.DEVNULL, stdout=self._log,
                                          stderr=subprocess.STDOUT, start_new_session=True,
                                          preexec_fn=_die_with_parent if _LIBC is not None else None)
        except OSError as err:
            self.stop()
            raise EngineError(f"cannot launch {self.launch.argv[0]}: {err}") from None

    def _ready(self) -> EngineInfo:
        try:
            wait_ready(self.base_url, self.config.server_start_timeout_s, self.config.api_key, alive=self._alive)
            return self.client.start()
        except EngineError as err:
            raise self._failure("before it was ready", str(err)) from None

    def _effective_args(self, info: EngineInfo) -> dict:
        args = {"command": self.command_line(), "server_log": str(self.log_path), **info.effective_args}
        if self.launch.options is not None:
            args["extra_llm_api_options"] = self.launch.options
        return args

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _failure(self, when: str, cause: str = "") -> EngineError:
        """A one-line error with the end of server.log; says so when the server process has exited."""
        code = None if self._proc is None else self._proc.poll()
        head = f"{self.name} server exited with code {code} {when}" if code is not None else cause
        return EngineError(f"{head}; {self.log_path}: {log_tail(self.log_path)}")

    def run_point(self, point: Point, seed: int) -> Measurement:
        """One point through the load generator; EngineError (then a restart) if the server died meanwhile.

        The server's /metrics is scraped before and after the point (and its scheduler gauges once a second
        in between); the difference goes to server_metrics.jsonl beside server.log (measure/server_metrics.py),
        one line per point, and the row's notes get the server's mean queue/prefill/decode times.
        """
        recorder = server_metrics.PointRecorder(lambda: server_metrics.fetch_metrics(self.base_url))
        started = dt.datetime.now(dt.timezone.utc)
        scraping = recorder.begin()
        try:
            measurement = self.client.run_point(point, seed)
        except BaseException as err:
            if scraping:
                self._record(server_metrics.build_record(point, seed, started, recorder.end(),
                                                         error=f"{type(err).__name__}: {err}"))
            raise
        if scraping:
            server = recorder.end()
            self._record(server_metrics.build_record(point, seed, started, server, measurement))
            note = server_metrics.summary_note(server or {})
            if note:
                measurement = replace(measurement, notes="; ".join(n for n in (measurement.notes, note) if n))
        if not self._alive():
            raise self._failure("during the point")
        return measurement

    def _record(self, record: dict) -> None:
        try:
            server_metrics.append_record(self.log_path.parent / server_metrics.FILE_NAME, cast(dict, redact_json(record)))
        except OSError as err:
            log.warning("cannot write %s: %s", server_metrics.FILE_NAME, err)

    def needs_restart(self, error: BaseException) -> bool:
        return not self._alive()

    def stop(self) -> None:
        """End the server's process group (SIGTERM, then SIGKILL) and close the log."""
        proc, self._proc = self._proc, None
        try:
            if proc is not None:
                terminate_group(proc)
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None
