"""planner/ is the pure core: importing every planner module loads neither Altair nor Streamlit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
UI_ONLY = ("altair", "streamlit")


def test_planner_imports_no_ui_library():
    code = ("import importlib, pkgutil, sys, planner\n"
            "for m in pkgutil.walk_packages(planner.__path__, 'planner.'):\n"
            "    importlib.import_module(m.name)\n"
            f"print(','.join(sorted(n for n in {UI_ONLY!r} if n in sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"planner/ imports {done.stdout.strip()}: that belongs in ui/"


def test_planner_sources_name_no_ui_library():
    for path in (REPO / "planner").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for name in UI_ONLY:
            assert f"import {name}" not in text and f"from {name}" not in text, f"{path.name} imports {name}"
