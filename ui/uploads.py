"""What the app may read: the bundled examples and the request logs uploaded in this session (docs/app.md,
"What the app reads and bounds").

The app is a service that several people share, in one process.  A route's `log` cell is the only file path
a user gives it, so that is where the line is drawn:
- `SessionLogs`: one session's uploaded request logs, each checked against the app's bounds before it is kept,
  in a folder of the session's own (random name, mode 0o700, removed when the session ends);
- `readable_log(given, logs)`: the file a `log` cell may name: a bundled example (relative to examples/) or
  one of this session's uploads (by its upload name, or the path the app saved it under).  Anything else (an
  absolute path elsewhere, `..`, a symlink out of the examples, another session's folder) raises InputError.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import weakref
from pathlib import Path

from fleetfacts.bundle import EXAMPLES_DIR
from fleetfacts.errors import InputError

# The bundled examples (fleetfacts.bundle.EXAMPLES_DIR: the checkout's examples/ or the installed copy) are the only
# folder whose request logs a routes table in the app may name, relative to it. (profiles/ holds no request logs:
# naming a file there could only fail.)
# Bounds of one uploaded request log: every plan replays each of its requests (a 50 MB log of 1.8 million took
# the app to 2.5 GB and 10 minutes; 200,000 requests: 490 MB with the catalog and 35 s, docs/app.md); the bundled
# trace has 8,819.  Larger logs: `python -m planner`.  .streamlit/config.toml's server.maxUploadSize (MiB) is
# MAX_APP_LOG_BYTES.
MAX_APP_LOG_BYTES = 25 * 2**20
MAX_APP_LOG_ROWS = 200_000
# Request logs one session keeps (the disk it may take: this many times MAX_APP_LOG_BYTES).
MAX_SESSION_LOGS = 8
# Characters kept in an uploaded file's name when it is written to the session's folder; at most this many.
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME_CHARS = 100
PRIVATE_FOLDER, PRIVATE_FILE = 0o700, 0o600


def safe_file_name(filename: str, default: str = "requests.csv") -> str:
    """An upload's name reduced to a plain file name: no folders, NUL or odd characters, at most 100 chars."""
    name = _SAFE_NAME.sub("_", Path(str(filename).replace("\x00", "")).name.replace("\\", "_")).strip("._")
    if not name:
        return default
    stem, dot, suffix = name.rpartition(".")
    if dot and len(suffix) <= 10:
        return stem[: MAX_NAME_CHARS - len(suffix) - 1] + "." + suffix
    return name[:MAX_NAME_CHARS]


def check_log_upload(data: bytes, filename: str) -> None:
    """InputError naming the bound when an uploaded log is over MAX_APP_LOG_BYTES or MAX_APP_LOG_ROWS lines of
    requests (counted before anything parses it)."""
    if len(data) > MAX_APP_LOG_BYTES:
        raise InputError(f"{filename}: file is {len(data) / 2**20:.1f} MiB; the app takes request logs up to "
                         f"{MAX_APP_LOG_BYTES / 2**20:.0f} MiB (use `python -m planner` for larger ones)")
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    if lines > MAX_APP_LOG_ROWS + 1:  # + the header
        raise InputError(f"{filename}: {lines:,} lines; the app replays request logs of up to "
                         f"{MAX_APP_LOG_ROWS:,} requests (cut the log to its busiest hours, or use `python -m "
                         f"planner` for the whole log)")


class SessionLogs:
    """One session's uploaded request logs: `names` (upload name -> saved path, the latest of each name), in
    `folder`, a temporary folder of the session's own (mkdtemp: a random name, mode 0o700) removed when this
    object is (the session ends)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="fleetplan-logs-")).resolve()
        self.names: dict[str, Path] = {}
        weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)

    def keep(self, data: bytes, filename: str) -> Path:
        """Check an upload (check_log_upload) and keep it as `folder`/<content hash>/<plain file name>, so that a
        new upload under the same name is a new path (a plan cached for the old one is not reused)."""
        check_log_upload(data, filename)
        path = self.folder / hashlib.sha256(data).hexdigest()[:12] / safe_file_name(filename)
        if not path.is_file():
            if len(list(self.folder.glob("*/*"))) >= MAX_SESSION_LOGS:
                raise InputError(f"{filename}: this session keeps up to {MAX_SESSION_LOGS} request logs; reload "
                                 "the page for a new session")
            path.parent.mkdir(mode=PRIVATE_FOLDER, exist_ok=True)
            _write_private(path, data)
        self.names[path.name] = path
        return path

    def holds(self, path: Path) -> bool:
        """Whether `path` (symlinks resolved) is a file in this session's folder."""
        found = path.resolve()
        return found.is_relative_to(self.folder) and found.is_file()


def _write_private(path: Path, data: bytes) -> None:
    """Write `data` to a new file only its owner can read."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def readable_log(given: str, logs: SessionLogs | None, bundled: Path = EXAMPLES_DIR) -> str:
    """A route's `log` cell as the app keeps it: '' for none, a bundled log relative to `bundled` (`traces/...`),
    or the path this session saved an upload under (a relative cell not bundled is looked up by file name
    among this session's uploads).  Raises InputError saying why the app may not read any other cell."""
    if not given:
        return ""
    path = Path(given)
    if ".." in path.parts:
        raise InputError("'..' leads out of the folders the app reads")
    try:
        bundled_path = _bundled(path, bundled.resolve())
        uploaded = path.is_absolute() and logs is not None and logs.holds(path)
    except (OSError, ValueError):  # a NUL byte, a name too long for the file system
        raise InputError("not a file name the app can read") from None
    if bundled_path is not None:
        return bundled_path
    if uploaded:
        return given
    if path.is_absolute():
        raise InputError("an absolute path: the app reads only the bundled examples and this session's uploads")
    saved = logs.names.get(path.name) if logs is not None else None
    if saved is None:
        raise InputError("neither a bundled example nor a log uploaded in this session")
    return str(saved)


def _bundled(path: Path, base: Path) -> str | None:
    """`path` (relative to `base`, or absolute) relative to `base` when it is a file there (symlinks resolved)."""
    found = (base / path).resolve()
    return found.relative_to(base).as_posix() if found.is_relative_to(base) and found.is_file() else None
