"""An on-disk memo of slow, deterministic work: the server front-end calibration (up to ~0.5 s a group), the
validated profile tables (~0.25 s for the bundled ones), each group's curve fit and its leave-one-out errors
(a warm start reads them back without importing scipy, a quarter of a second).

A value is stored under a key made of what it is computed from (the caller's content bytes, e.g. a profile group's
rows) and the code version (a digest of every source file of planner/ and fleetfacts/ and of the fact files,
FACT_FILES), so a changed profile, GPU or model fact, or changed code never reads an old entry. A missing,
unreadable or corrupt entry is computed again and rewritten (atomically), never trusted; a cache that cannot be
written is skipped.

Where: $FLEETPLAN_CACHE_DIR, else ~/.cache/fleetplan.  FLEETPLAN_NO_CACHE=1 turns it off.  Tables are
stored as pandas pickles (exact dtypes); like Python's own __pycache__, the folder is trusted as the user's own.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

CACHE_DIR_ENV = "FLEETPLAN_CACHE_DIR"
NO_CACHE_ENV = "FLEETPLAN_NO_CACHE"
ROOT = Path(__file__).resolve().parents[2]  # the repository root (this is planner/engine/fitcache.py)
CODE_PACKAGES = ("planner", "fleetfacts")
# Facts the fits read besides the profiles (GPU datasheets, model configs, vLLM's tuned MoE kernels): part of the
# version too, so an edited gpu_specs.csv or config.json never reads an entry keyed by the profile rows alone.
FACT_FILES = ("fleetfacts/data/*.csv", "fleetfacts/models/*/config.json", "planner/data/*.csv")


def cache_dir() -> Path | None:
    """The cache folder, or None when caching is off."""
    if os.environ.get(NO_CACHE_ENV, "") not in ("", "0"):
        return None
    given = os.environ.get(CACHE_DIR_ENV)
    return Path(given) if given else Path.home() / ".cache" / "fleetplan"


@lru_cache(maxsize=1)
def code_version() -> str:
    """A digest of every source file of the packages a fit depends on, and of the fact files it reads (any edit
    invalidates every entry)."""
    digest = hashlib.sha256()
    paths = [p for package in CODE_PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    paths += [p for pattern in FACT_FILES for p in sorted(ROOT.glob(pattern))]
    for path in paths:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _entry(kind: str, content: bytes, suffix: str) -> tuple[str, Path] | None:
    """(key, file) of the entry for (kind, content, code version); None when caching is off."""
    folder = cache_dir()
    if folder is None:
        return None
    key = hashlib.sha256(f"{kind}\n{code_version()}\n".encode() + content).hexdigest()
    return key, folder / kind / f"{key}{suffix}"


def memo(kind: str, content: bytes, compute: Callable[[], Any]) -> Any:
    """compute(), or its JSON value stored for (kind, content, code version)."""
    entry = _entry(kind, content, ".json")
    if entry is None:
        return compute()
    key, path = entry
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(stored, dict) and stored.get("key") == key and "value" in stored:
            return stored["value"]
    except (OSError, ValueError):
        pass  # missing or corrupt: compute it again
    value = compute()
    _store(path, lambda tmp: tmp.write_text(json.dumps({"key": key, "value": value}), encoding="utf-8"))
    return value


def memo_frame(kind: str, content: bytes, compute: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """compute(), or the table stored for (kind, content, code version); an exception in compute is not stored."""
    entry = _entry(kind, content, ".pkl")
    if entry is None:
        return compute()
    _, path = entry
    try:
        stored = pd.read_pickle(path)
        if isinstance(stored, pd.DataFrame):
            return stored
    except Exception:  # noqa: BLE001 - missing, truncated or foreign: compute it again
        pass
    frame = compute()
    _store(path, frame.to_pickle)
    return frame


def _store(path: Path, write: Callable[[Path], Any]) -> None:
    """write(a temporary file), then rename it onto `path` (readers never see half an entry)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        write(tmp)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: no cache, same answers
