"""Fixtures for the app tests (streamlit.testing.v1.AppTest)."""

from __future__ import annotations

import functools

import pytest
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage


@pytest.fixture(autouse=True, scope="session")
def _component_manifests_scanned_once():
    """Every new AppTest scans the metadata of each installed package for Streamlit components (about a
    second on a 2-core machine, most of a fresh app's start); the installed packages do not change during a
    test session, so the scan runs once and each AppTest gets its result.  Nothing of the app is changed."""
    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:  # a Streamlit without v2 components has no such scan
        yield
        return
    scan = functools.lru_cache(maxsize=None)(manifest_scanner.scan_component_manifests)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifest_scanner, "scan_component_manifests", lambda max_workers=None: list(scan(max_workers)))
        yield


@pytest.fixture
def downloads(monkeypatch):
    """Every file the app hands to st.download_button, by file name."""
    files: dict[str, bytes] = {}
    original = MemoryMediaFileStorage.load_and_get_id

    def record(self, path_or_data, mimetype, kind, filename=None):
        if filename:
            files[filename] = path_or_data if isinstance(path_or_data, bytes) else str(path_or_data).encode()
        return original(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    return files
