"""The commands the README and docs/*.md show run as written, and their links lead somewhere.

Each fenced `sh`/`bash` block of README.md and docs/*.md is read; every command in it is either run (the cheap
`python -m planner ...` and `python -m measure profile ... --dry-run` commands on the bundled data) or skipped
for a reason named here (it needs a GPU, a running server, a user's own file, an install, a browser, or takes
more than a minute).  A doc's commands run in order in a temporary folder of their own, so a later command finds
what an earlier one wrote (`deploy --plan plan.csv` after `plan --out plan.csv`); the checkout is not modified.
A command in a doc that is neither run nor skipped fails the test: name its reason here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELLS = ("sh", "bash")
# What a command line starts with -> why it is not run here.
SKIP_PREFIX = {
    "bash ": "a script that sets up a machine or starts a server (scripts/test.sh runs the tests; the demo is tests/app/test_demo.py)",
    "pip ": "an install (tests/test_install.py builds and installs the wheel)",
    "fleetplan": "the installed commands (tests/test_install.py runs them from the wheel)",
    "streamlit ": "starts the app (tests/app/)",
    "ray ": "starts a Ray cluster",
    "python tools/": "regenerates bundled data from sources outside the checkout",
    "python -m measure verify": "needs a running OpenAI-compatible server (tests/measure/ run it against the CPU test server)",
    "python -m measure campaign": "--ray needs a Ray cluster (tests/measure/test_campaign_ray.py)",
}
# A part of a command line -> why that command is not run here.
SKIP_PART = {
    "last_quarter.csv": "a baseline plan of the user's own",
    "--routes routes.csv": "a routes file of the user's own",
    "--routes R.csv": "R.csv stands for a routes file of the user's own",
    "--model-config path/config.json": "a model config of the user's own",
    "planner validate --latency": "refits the server model once per row: 70-80 s on a 2-core machine",
    "planner validate --transfer": "its table is docs/validation.md's, which tests/planner/test_validation_doc.py "
                                   "regenerates and compares (about 15 s; not twice)",
}
RUN_PREFIX = ("python -m planner ", "python -m measure profile ")
TIMEOUT_S = 120  # each command runs in well under 60 s on a 2-core machine; this only stops a hang


def _fenced_blocks(path: Path) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block of a Markdown file; raises on a block left open."""
    blocks, language, body = [], None, []
    for line in path.read_text(encoding="utf-8").splitlines():
        fence = re.match(r"^\s*```(\w*)", line)
        if fence and language is None:
            language, body = fence.group(1), []
        elif fence:
            blocks.append((language, "\n".join(body)))
            language = None
        elif language is not None:
            body.append(line)
    assert language is None, f"{path.relative_to(REPO)}: a code block is never closed"
    return blocks


def doc_commands(path: Path) -> list[str]:
    """The command lines of a doc's `sh`/`bash` blocks, continuation lines joined."""
    commands = []
    for language, body in _fenced_blocks(path):
        if language in SHELLS:
            joined = re.sub(r"\\\n\s*", " ", body)
            commands += [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return commands


def skip_reason(command: str) -> str | None:
    """Why `command` is not run here; None when it is run; raises when nobody said."""
    for prefix, reason in SKIP_PREFIX.items():
        if command.startswith(prefix):
            return reason
    for part, reason in SKIP_PART.items():
        if part in command:
            return reason
    if command.startswith("python -m measure profile ") and "--dry-run" not in command:
        return "profiles a GPU"
    if command.startswith(RUN_PREFIX):
        return None
    raise AssertionError(f"no rule runs or skips this documented command; add one to {__name__}: {command}")


def _runs() -> dict[Path, list[str]]:
    """Per doc, the commands run for it: a command an earlier doc ran already is run again only where a later
    command of this doc reads what it writes (its `--out`)."""
    runs: dict[Path, list[str]] = {}
    seen: set[str] = set()
    for doc in DOCS:
        commands = [c for c in doc_commands(doc) if skip_reason(c) is None]
        kept: list[str] = []
        for command in reversed(commands):  # from the last, so that what a kept command reads is known
            out = re.search(r"--out (\S+)", command)
            needed = out is not None and any(out.group(1) in later for later in kept)
            if _bare(command) not in seen or needed:
                kept.insert(0, command)
        seen.update(_bare(c) for c in commands)
        runs[doc] = kept
    return runs


def _bare(command: str) -> str:
    """A command without its trailing comment and extra spaces: the same command in two docs compares equal."""
    return " ".join(re.split(r"\s#", command, maxsplit=1)[0].split())


RUNS = _runs()


def _doc_id(path: Path) -> str:
    return str(path.relative_to(REPO))


def _git_status() -> set[str]:
    """Changed, new and ignored files of the checkout (an output such as plan.csv is ignored by .gitignore), less
    the caches Python and the tools write."""
    lines = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--ignored"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    return {line for line in lines if not re.search(r"(^|/)(__pycache__|\.pytest_cache|\.ruff_cache|\.mypy_cache)/", line[3:])}


def test_every_documented_command_is_run_or_skipped_for_a_reason():
    commands = [c for doc in DOCS for c in doc_commands(doc)]
    assert commands, "no sh/bash blocks found"
    for command in commands:
        skip_reason(command)  # raises for a command no rule covers
    assert sum(skip_reason(c) is None for c in commands) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("doc", [doc for doc, commands in RUNS.items() if commands], ids=_doc_id)
def test_documented_commands_run(doc, tmp_path):
    """Every command of the doc that is run here exits 0, in a temporary folder, and adds or changes no file of
    the checkout (compared as sets, so edits made elsewhere meanwhile to other files do not count)."""
    (tmp_path / "examples").symlink_to(REPO / "examples")  # the docs' commands name examples/... as in a checkout
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    before = _git_status()
    for command in RUNS[doc]:
        argv = command.replace("python ", f"{sys.executable} ", 1)
        start = time.monotonic()
        done = subprocess.run(["bash", "-c", argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        elapsed = time.monotonic() - start
        assert done.returncode == 0, f"{_doc_id(doc)}: `{command}` exited {done.returncode}:\n{done.stderr[-2000:]}"
        print(f"{elapsed:6.1f} s  {command}")
    changed = _git_status() - before
    assert not changed, f"{_doc_id(doc)}'s commands changed the checkout: {sorted(changed)}"


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    return {_anchor(heading) for heading in re.findall(r"^#{1,6} (.*)$", text, re.M)}


@pytest.mark.parametrize("doc", [*DOCS, REPO / "CHANGELOG.md"], ids=_doc_id)
def test_relative_links_lead_somewhere(doc):
    """Every relative link of the README, the docs and the changelog names a file that exists, and a heading there."""
    broken = []
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target):
            continue  # http:, https:, mailto:
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{target}: no such heading in {path.name}")
    assert not broken, f"{_doc_id(doc)}: " + "; ".join(broken)
