"""docs/formats.md is generated from the schemas: it must match them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_formats_doc_matches_the_declared_schemas():
    spec = importlib.util.spec_from_file_location("gen_formats", ROOT / "tools" / "gen_formats.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "formats.md").read_text(encoding="utf-8") == module.render(), \
        "docs/formats.md is stale: run python tools/gen_formats.py"
