"""The environment record written into env.json with each run of a sweep.

Engine and version, torch and CUDA versions, NVIDIA driver, GPU name and
memory (nvidia-smi), the host CPU (model and logical cores: a decode batch
beyond the engine's CUDA graphs waits on the host launching kernels, so its
speed follows the CPU), engine arguments, the command line (API keys
removed), date, selected environment variables (never ones that look like
secrets), and the host name only when asked for.
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
import platform
import shlex
import socket
import subprocess
import sys

from measure.redact import SECRET_FLAGS, redacted_argv

# Environment variables that change engine behaviour and are worth recording.
RECORDED_ENV_PREFIXES = ("VLLM_", "CUDA_", "NCCL_", "TLLM_", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                         "PYTORCH_CUDA_ALLOC_CONF")
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "AUTH", "CREDENTIAL")
# nvidia-smi answers in well under a second; a hung driver must not hang the sweep.
NVIDIA_SMI_TIMEOUT_S = 15


def without_secret_flags(argv: list[str]) -> list[str]:
    """argv without measure's own secret flags and their values (a command to run again: the key comes
    from --api-key-env instead)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in SECRET_FLAGS:
            skip = True
        elif not any(arg.startswith(flag + "=") for flag in SECRET_FLAGS):
            out.append(arg)
    return out


def command_line(argv: list[str] | None = None) -> str:
    args = redacted_argv(without_secret_flags(list(sys.argv[1:] if argv is None else argv)))
    return shlex.join(["python", "-m", "measure", *args])


def _module_version(name: str) -> str | None:
    try:
        module = importlib.import_module(name)
    except Exception:  # noqa: BLE001 - any import failure just means "not recorded"
        return None
    return getattr(module, "__version__", None)


def torch_info() -> dict:
    """torch and CUDA versions, without importing torch when it is absent."""
    try:
        import torch  # noqa: PLC0415 - optional
    except Exception:  # noqa: BLE001
        return {"torch": None, "cuda": None}
    return {"torch": torch.__version__, "cuda": getattr(torch.version, "cuda", None)}


def gpu_info() -> list[dict]:
    """One dict per visible GPU from nvidia-smi; [] without one."""
    query = "name,memory.total,driver_version,uuid"
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in done.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            gpus.append({"name": parts[0], "memory_mib": _to_int(parts[1]), "driver": parts[2]})
    return gpus


def _to_int(text: str) -> int | None:
    try:
        return int(float(text))
    except ValueError:
        return None


def cpu_info(cpuinfo: str = "/proc/cpuinfo") -> dict:
    """The host CPU: its model name (Linux's /proc/cpuinfo, else what platform reports; None when neither says)
    and its logical cores."""
    model = None
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), None)
    except OSError:
        pass
    return {"model": model or platform.processor() or None, "logical_cores": os.cpu_count()}


def recorded_env() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(RECORDED_ENV_PREFIXES) and not any(m in k.upper() for m in SECRET_MARKERS)}


def environment_record(engine: str, engine_version: str | None, engine_args: dict, argv: list[str] | None = None,
                       record_hostname: bool = False, extra: dict | None = None) -> dict:
    """The JSON-ready environment of this run (no secrets)."""
    gpus = gpu_info()
    record = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "engine": engine,
        "engine_version": engine_version,
        **torch_info(),
        "driver": gpus[0]["driver"] if gpus else None,
        "gpus": [{"name": g["name"], "memory_mib": g["memory_mib"]} for g in gpus],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_info(),
        "fleetplan_measure": _module_version("measure"),
        "engine_args": engine_args,
        "command": command_line(argv),
        "env": recorded_env(),
    }
    if record_hostname:
        record["hostname"] = socket.gethostname()
    record.update(extra or {})
    return record
