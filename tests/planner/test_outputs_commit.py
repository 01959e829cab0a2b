"""A plan's outputs commit together (issue 47 §5): when one of them cannot be written, none is replaced, and the
error names the user's path (not a temp file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fleetfacts.errors import InputError
from planner.cli import main
from tests.conftest import REPO
from tests.planner.fakes import batch_route, online_route, write_synthetic_inputs

# Folders no one can write into, root included: /proc refuses new files (ENOENT), /sys refuses them (EACCES).
UNWRITABLE = ["/proc/minutes.csv", "/sys/minutes.csv"]
SECONDARY = {"--minutes-out": "m.csv", "--options-out": "o.csv", "--xlsx": "w.xlsx"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("commit")
    paths = write_synthetic_inputs(root)
    for name, rate in (("old", 5.0), ("new", 50.0)):
        routes = pd.DataFrame([online_route("chat", rate_rps=rate), batch_route("nightly")])
        routes.to_csv(root / f"{name}-routes.csv", index=False)
    return {**paths, "root": root}


def _plan_argv(inputs: dict[str, Path], routes: str, out: Path, *extra: str) -> list[str]:
    """`plan` on the synthetic inputs; without the simulation check unless --minutes-out needs it."""
    simulate = [] if "--minutes-out" in extra else ["--no-simulate"]
    return ["plan", "--routes", str(inputs["root"] / f"{routes}-routes.csv"), "--out", str(out), *simulate,
            "--profiles", str(inputs["profiles"]), "--prices", str(inputs["prices"]), "--ops", str(inputs["ops"]),
            *extra]


def _old_plan(inputs: dict[str, Path], folder: Path) -> dict[Path, bytes]:
    out = folder / "plan.csv"
    assert main(_plan_argv(inputs, "old", out)) == 0
    return {p: p.read_bytes() for p in (out, folder / "plan.assumptions.json")}


@pytest.mark.parametrize("flag", list(SECONDARY))
@pytest.mark.parametrize("where", UNWRITABLE)
def test_an_unwritable_secondary_output_replaces_nothing_and_names_the_users_path(inputs, tmp_path, capsys, flag,
                                                                                 where):
    before = _old_plan(inputs, tmp_path)
    target = str(Path(where).with_suffix(Path(SECONDARY[flag]).suffix))
    capsys.readouterr()
    assert main(_plan_argv(inputs, "new", tmp_path / "plan.csv", flag, target)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flag} {target}: cannot write") and err.count("\n") == 1 and ".tmp" not in err, err
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.assumptions.json", "plan.csv"]


def test_the_real_cli_keeps_the_old_plan_when_the_workbook_cannot_be_written(inputs, tmp_path):
    before = _old_plan(inputs, tmp_path)
    argv = _plan_argv(inputs, "new", tmp_path / "plan.csv", "--options-out", str(tmp_path / "o.csv"),
                      "--xlsx", "/proc/plan.xlsx")
    done = subprocess.run([sys.executable, "-m", "planner", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and "/proc/plan.xlsx" in done.stderr and ".tmp" not in done.stderr
    assert {p: p.read_bytes() for p in before} == before
    assert not (tmp_path / "o.csv").exists()


def test_all_outputs_are_written_when_all_can_be(inputs, tmp_path):
    before = _old_plan(inputs, tmp_path)
    extra = [a for flag, name in SECONDARY.items() for a in (flag, str(tmp_path / name))]
    assert main(_plan_argv(inputs, "new", tmp_path / "plan.csv", *extra)) == 0
    assert all(p.read_bytes() != data for p, data in before.items())
    assert all((tmp_path / name).stat().st_size > 0 for name in SECONDARY.values())
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_atomic_write_all_leaves_every_target_alone_when_one_cannot_be_written(tmp_path):
    from fleetfacts.schema import atomic_write_all  # noqa: PLC0415  (added by the fix; imported here to see the others fail first)

    first = tmp_path / "a.csv"
    first.write_bytes(b"old\n")
    with pytest.raises(InputError, match="/proc/b.csv"):
        atomic_write_all([(first, b"new\n"), ("/proc/b.csv", b"new\n")])
    assert first.read_bytes() == b"old\n" and [p.name for p in tmp_path.iterdir()] == ["a.csv"]
