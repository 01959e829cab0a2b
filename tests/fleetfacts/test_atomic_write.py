"""fleetfacts.schema.atomic_write_bytes, which every output goes through: modes and links as a user expects."""

from __future__ import annotations

import os
import stat

import pytest

from fleetfacts.schema import atomic_write_bytes


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("umask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_umask_mode_not_0600(tmp_path, umask, expected):
    old = os.umask(umask)
    try:
        atomic_write_bytes(tmp_path / "plan.csv", b"a\n")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "plan.csv") == expected


def test_an_existing_file_keeps_its_mode(tmp_path):
    path = tmp_path / "plan.csv"
    path.write_bytes(b"old\n")
    path.chmod(0o640)
    atomic_write_bytes(path, b"new\n")
    assert path.read_bytes() == b"new\n" and _mode(path) == 0o640


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path):
    target = tmp_path / "shared" / "plan.csv"
    target.parent.mkdir()
    target.write_bytes(b"old plan\n")
    link = tmp_path / "plan.csv"
    link.symlink_to(target)
    atomic_write_bytes(link, b"new plan\n")
    assert link.is_symlink() and target.read_bytes() == b"new plan\n"
    assert [p.name for p in target.parent.iterdir()] == ["plan.csv"]  # no temp file left behind
