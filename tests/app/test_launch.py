"""`fleetplan app` (ui/launch.py) serves the app.py of wherever Fleetplan is, headless, on the given port; `fleetplan`
is `python -m planner` plus that command.  The installed copy is started for real in tests/test_install.py."""

from __future__ import annotations

import sys

from fleetfacts.bundle import APP
from ui import launch


def test_app_runs_streamlit_on_the_bundled_app_py_headless(monkeypatch, capsys):
    started = []
    monkeypatch.setattr(launch.subprocess, "call", lambda command: started.append(command) or 0)
    monkeypatch.setattr(sys, "argv", ["fleetplan", "app", "--port", "8555"])
    assert launch.main() == 0
    (command,) = started
    assert command[:4] == [sys.executable, "-m", "streamlit", "run"] and command[4] == str(APP) and APP.is_file()
    assert command[command.index("--server.port") + 1] == "8555"
    assert command[command.index("--server.headless") + 1] == "true"
    assert "http://localhost:8555" in capsys.readouterr().out
