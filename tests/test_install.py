"""`pip install .` (issue 50): the wheel, built from the checkout's files and installed into a fresh venv outside
the checkout, plans the bundled example with its console scripts exactly as `python -m planner` does from the
checkout, and predicts the same numbers.

The fresh venv sees this interpreter's site-packages through a .pth file (the dependencies, not the checkout) and
gets the wheel with --no-deps: no package index is needed for the install, and nothing is downloaded per run.
The wheel's declared dependencies are then checked against what that venv imports.  Building the wheel does need the
index: pip fetches setuptools for pyproject.toml's [build-system], as `pip install .` on a user's machine would.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

from fleetfacts.bundle import version
from planner.engine.fitcache import code_version
from tests.conftest import REPO

PREDICT = ("predict", "--gpu", "h200", "--engine", "vllm", "--model", "llama-3.1-8b", "--precision", "fp8",
           "--input-len", "1000", "--output-len", "200", "--batch-size", "8", "--json")
APP_START_TIMEOUT_S = 60
# The wheel's own requirements (not pip check's every installed distribution) against what the venv imports.
UNMET_DEPENDENCIES = ("import importlib.metadata as m; from packaging.requirements import Requirement; "
                      "reqs = [Requirement(r) for r in m.requires('fleetplan')]; "
                      "print([str(r) for r in reqs if r.marker is None and m.version(r.name) not in r.specifier])")


def run(command: list[str | Path], cwd: Path, env: dict[str, str]) -> str:
    """stdout of `command`; fails the test with its stderr when it exits non-zero."""
    proc = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(map(str, command))} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without PYTHONPATH (nothing of the checkout leaks in) and with `extra`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, **extra}


def copy_sources(to: Path) -> None:
    """The checkout's files as a clean clone would have them (tracked and not ignored): no build/ left over
    from an earlier build, no .venv."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)


def install(tmp: Path) -> Path:
    """Build the wheel and install it into a fresh venv under `tmp`; returns the venv's bin folder."""
    copy_sources(tmp / "src")
    run([sys.executable, "-m", "pip", "wheel", tmp / "src", "--no-deps", "-q", "-w", tmp / "dist"], tmp, clean_env())
    (wheel,) = (tmp / "dist").glob("fleetplan-*.whl")
    run([sys.executable, "-m", "venv", "--without-pip", tmp / "venv"], tmp, clean_env())
    python = tmp / "venv" / "bin" / "python"
    purelib = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp, clean_env()).strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (purelib / "fleetplan-test-deps.pth").write_text("".join(f"{p}\n" for p in sorted(ours)), encoding="utf-8")
    run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel], tmp, clean_env())
    unmet = run([python, "-c", UNMET_DEPENDENCIES], tmp, clean_env()).strip()
    assert unmet == "[]", f"the wheel's dependencies not met by this interpreter's site-packages: {unmet}"
    return tmp / "venv" / "bin"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def app_serves(fleetplan: Path, cwd: Path, env: dict[str, str]) -> bool:
    """`fleetplan app` starts Streamlit on the installed app.py and answers its health check."""
    port = free_port()
    proc = subprocess.Popen([str(fleetplan), "app", "--port", str(port)], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + APP_START_TIMEOUT_S
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                    return response.read().strip() == b"ok"
            except OSError:
                time.sleep(0.5)
        return False
    finally:
        with contextlib.suppress(ProcessLookupError):  # the Streamlit server it started is in its process group
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_every_package_is_in_the_wheel():
    """pyproject.toml lists the packages one by one: a new subpackage must be listed too."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    listed = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    on_disk = {".".join(init.parent.relative_to(REPO).parts) for top in ("fleetfacts", "measure", "planner", "ui")
               for init in (REPO / top).rglob("__init__.py")}
    assert set(listed) == on_disk | {"fleetplan_data"}


@pytest.mark.slow
def test_the_installed_console_scripts_plan_the_example_as_the_checkout_does(tmp_path):
    bin_dir = install(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    # Its own empty fit cache: the installed copy computes everything from its bundled data.
    installed_env = clean_env(FLEETPLAN_CACHE_DIR=str(tmp_path / "cache"))
    fleetplan = bin_dir / "fleetplan"
    where = run([bin_dir / "python", "-c", "import planner, fleetfacts.bundle as b; print(planner.__file__); "
                 "print(b.ROOT)"], work, installed_env).split()
    assert all(Path(p).is_relative_to(tmp_path / "venv") for p in where), f"not the installed copy: {where}"

    assert run([fleetplan, "--version"], work, installed_env).strip() == f"fleetplan {version()}"
    run([fleetplan, "example", "--out", "X"], work, installed_env)
    run([fleetplan, "plan", "--routes", "X/routes.csv", "--out", "plan.csv"], work, installed_env)
    predicted = json.loads(run([fleetplan, *PREDICT], work, installed_env))
    run([bin_dir / "fleetplan-measure", "profile", "--gpu", "h100", "--engine", "vllm", "--model", "llama-3.1-8b",
         "--precision", "fp8", "--dry-run"], work, installed_env)
    installed_version = run([bin_dir / "python", "-c", "from planner.engine.fitcache import code_version; "
                             "print(code_version())"], work, installed_env).strip()

    # The checkout, on the same routes given the same way (the fit cache of this test session).
    (work / "checkout").mkdir()
    checkout_env = clean_env(PYTHONPATH=str(REPO))
    run([sys.executable, "-m", "planner", "plan", "--routes", "X/routes.csv", "--out", "checkout/plan.csv"], work,
        checkout_env)
    for name in ("plan.csv", "plan.assumptions.json"):
        assert (work / name).read_bytes() == (work / "checkout" / name).read_bytes(), f"{name} differs"
    assert predicted == json.loads(run([sys.executable, "-m", "planner", *PREDICT], work, checkout_env))
    # The fit cache's code version digests the same sources and fact files installed as in the checkout.
    assert installed_version == code_version()
    assert app_serves(fleetplan, work, installed_env), "fleetplan app did not serve within "\
        f"{APP_START_TIMEOUT_S} s"
