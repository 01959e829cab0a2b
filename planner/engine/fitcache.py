"""An on-disk memo of slow, deterministic work: the server front-end calibration (up to ~0.5 s a group), the
validated profile tables (~0.25 s for the bundled ones), each group's curve fit and its leave-one-out errors
(a warm start reads them back without importing scipy, a quarter of a second).

A value is stored under a key made of what it is computed from (the caller's content bytes, e.g. a profile group's
rows) and the code version (a digest of every source file of planner/ and fleetfacts/ and of the fact files,
FACT_FILES), so a changed profile, GPU or model fact, or changed code never reads an old entry. A missing,
unreadable or corrupt entry is computed again and rewritten (atomically), never trusted: every entry carries its
own key and a digest of its value, so an entry edited by hand or copied over another's name is computed again; a
cache that cannot be written is skipped, and a failed write leaves no temporary file.

Where: $FLEETPLAN_CACHE_DIR, else ~/.cache/fleetplan.  FLEETPLAN_NO_CACHE=1 turns it off.  Only data is stored,
never code (a cache folder may be shared): values as JSON, tables as Parquet (exact dtypes; pyarrow comes with
streamlit).
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
# The folder holding the packages (this is planner/engine/fitcache.py): the checkout, or site-packages when installed;
# the wheel carries the same sources and fact files, so an installed copy's code version is the checkout's.
ROOT = Path(__file__).resolve().parents[2]
CODE_PACKAGES = ("planner", "fleetfacts")
# Facts the fits read besides the profiles (GPU datasheets, model configs, vLLM's tuned MoE kernels): part of the
# version too, so an edited gpu_specs.csv or config.json never reads an entry keyed by the profile rows alone.
KEY_FIELD = b"fleetplan-key"  # a cached table's own key, in its Parquet schema metadata
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
        if (isinstance(stored, dict) and stored.get("key") == key and "value" in stored
                and stored.get("digest") == _digest(stored["value"])):
            return stored["value"]
    except (OSError, ValueError):
        pass  # missing or corrupt: compute it again
    value = compute()
    text = json.dumps({"key": key, "value": value, "digest": _digest(value)})
    _store(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return value


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def memo_frame(kind: str, content: bytes, compute: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """compute(), or the table stored for (kind, content, code version); an exception in compute is not stored."""
    entry = _entry(kind, content, ".parquet")
    if entry is None:
        return compute()
    key, path = entry
    import pyarrow as pa  # type: ignore[import-untyped]  # noqa: PLC0415 - only where a table is cached
    import pyarrow.parquet as pq  # type: ignore[import-untyped]  # noqa: PLC0415

    try:
        table = pq.read_table(path)
        if (table.schema.metadata or {}).get(KEY_FIELD) == key.encode():
            return table.to_pandas()
    except (OSError, ValueError, pa.ArrowException):
        pass  # missing, truncated or another entry's: compute it again
    frame = compute()
    table = pa.Table.from_pandas(frame)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), KEY_FIELD: key.encode()})
    _store(path, lambda tmp: pq.write_table(table, tmp))
    return frame


def _store(path: Path, write: Callable[[Path], Any]) -> None:
    """write(a temporary file), then rename it onto `path` (readers never see half an entry)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk or a read-only home: no cache, same answers
