"""scripts/demo.sh starts the app headless and prints its URL: no first-run e-mail prompt.

Runs the script with this interpreter (PYTHON=..., so no .venv or install) as on a desktop's
first run: DISPLAY set (Streamlit is headless by default only without one), a fresh HOME (no
Streamlit credentials) and a terminal (pty) on stdin that never answers.  Without headless mode
Streamlit stops at "Email:" there and never serves.
"""

from __future__ import annotations

import os
import pty
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# The demo plans the example routes with the simulation check first (a few seconds), then starts.
START_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
            return response.read().strip() == b"ok"
    except OSError:
        return False


def test_demo_starts_the_app_headless_and_prints_its_url(tmp_path):
    port = free_port()
    env = {**os.environ, "PYTHON": sys.executable, "FLEETPLAN_PORT": str(port), "HOME": str(tmp_path),
           "DISPLAY": ":0"}
    env.pop("WAYLAND_DISPLAY", None)
    log = tmp_path / "demo.log"
    terminal, tty = pty.openpty()
    with open(log, "w") as out:
        demo = subprocess.Popen(["bash", "scripts/demo.sh"], cwd=REPO, env=env, stdin=tty, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not healthy(port):
            assert demo.poll() is None, f"demo.sh exited with {demo.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"the app did not start in {START_TIMEOUT_S} s:\n{log.read_text()}"
            time.sleep(0.5)
        text = log.read_text()
        assert re.search(rf"open http://localhost:{port}\b", text), text
        assert "Email:" not in text, text
    finally:
        os.killpg(demo.pid, signal.SIGTERM)
        demo.wait(timeout=20)
        os.close(terminal)
        os.close(tty)
