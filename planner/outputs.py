"""The files the planner CLI writes, checked before any work: a bad output fails at once, in one line.

`check_output` is the one check every output path goes through (plan, fleet, traffic, --xlsx, deploy):
the atomic writer (fleetfacts.schema.atomic_write_all) replaces its target by rename, which would turn a
device node (/dev/full), a named pipe or a socket into a plain file and report success; and a folder no file
can be made in (/proc, a read-only mount) is found before the work, not after it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from fleetfacts.errors import InputError
from fleetfacts.schema import atomic_write_all

# The atomic writer first writes '.<name>.<8 random characters>.tmp' beside the target: 14 bytes more than
# the name, which must fit the file system's limit on one name too.
TEMP_NAME_EXTRA_BYTES = 14
# One name's limit where the file system does not say (ext4, xfs, btrfs, tmpfs: 255 bytes).
DEFAULT_NAME_MAX = 255


def check_output(flag: str, path: str | Path) -> None:
    """InputError when `path` cannot take a file: it exists and is not a regular file (a device, pipe,
    socket or folder; links are followed), its folder is missing or unwritable, or its name is too long."""
    path = Path(path)
    _check_name_length(flag, path)
    if path.exists() and not path.is_file():
        raise InputError(f"{flag} {path}: exists and is not a regular file (a device, pipe, socket or folder); "
                         "refusing to replace it (choose a file name)")
    if not path.parent.is_dir():
        raise InputError(f"{flag} {path}: folder {path.parent} does not exist")
    _check_writable(flag, path)


def _check_writable(flag: str, path: Path) -> None:
    """InputError when no file can be made in `path`'s folder (no permission, a read-only mount, /proc): tried
    with an empty temp file, removed at once, so a run fails before its work rather than after it."""
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise InputError(f"{flag} {path}: cannot write a file in {path.parent} ({err.strerror})") from None
    os.close(fd)
    os.unlink(temp)


def _check_name_length(flag: str, path: Path) -> None:
    limit = _name_max(path.parent) - TEMP_NAME_EXTRA_BYTES
    size = len(os.fsencode(path.name))
    if size > limit:
        raise InputError(f"{flag} {path.name[:40]}...: file name too long ({size} bytes; an output's name may "
                         f"have {limit} here)")


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return DEFAULT_NAME_MAX


def check_output_folder(flag: str, folder: str | Path) -> Path:
    """The folder `deploy --out` writes into, created when missing; InputError when it exists and is not a
    folder, or cannot be created (its name too long, no permission)."""
    folder = Path(folder)
    _check_name_length(flag, folder)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{flag} {folder}: exists and is not a folder (deploy writes one file per route into a "
                         "folder; choose a new or existing folder)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"{flag} {str(folder)[:80]}: cannot create the folder ({err.strerror})") from None
    return folder


def write_files(flag: str, folder: str | Path, files: Iterable[tuple[str, str]]) -> list[Path]:
    """Write (name, text) pairs into `folder` (each checked first; all together, fleetfacts.schema.atomic_write_all);
    returns the paths written."""
    folder = check_output_folder(flag, folder)
    named = [(folder / name, text) for name, text in files]
    for path, _ in named:
        check_output(flag, path)
    atomic_write_all([(path, text.encode("utf-8")) for path, text in named])
    return [path for path, _ in named]
