"""Campaign files and checks shared by the local and the Ray campaign tests."""

from __future__ import annotations

import csv
import time
from collections import Counter
from pathlib import Path

import yaml

from measure.points import load_shapes, point_from_mapping

SHAPE_HEADER = "mode,input_len,output_len,batch_size,concurrency,request_rate,arrival,num_requests\n"
# Rate points last about num_requests / request_rate seconds on the CPU server: long enough to kill mid-job.
SLOW_SHAPES = SHAPE_HEADER + "".join(f"rate,{16 + i},6,,,2,poisson,4\n" for i in range(4))
FAST_SHAPES = SHAPE_HEADER + "offline,12,6,2,,,,\nconcurrency,12,6,,2,,,4\n"


def write_campaign(tmp_path: Path, url: str, jobs: list[dict]) -> Path:
    """A campaign of `openai` jobs against `url`, its shapes files beside it; returns the YAML path."""
    (tmp_path / "slow.csv").write_text(SLOW_SHAPES)
    (tmp_path / "fast.csv").write_text(FAST_SHAPES)
    data = {"name": "ci", "out_root": str(tmp_path / "profiles"),
            "defaults": {"engine": "openai", "model": "tiny", "base_url": url, "no_ignore_eos": True,
                         "engine_version": "transformers-5.24.0"},
            "jobs": [{**job, "shapes": str(tmp_path / job["shapes"])} for job in jobs]}
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def profile_rows(folder: Path) -> list[dict]:
    with open(folder / "profile.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def assert_complete_once(folder: Path, shapes: Path) -> None:
    """Every point of `shapes` has exactly one row in the folder, and it is ok: none lost, none duplicated."""
    rows = profile_rows(folder)
    keys = Counter(point_from_mapping(r, "row").key() for r in rows)
    assert keys == Counter(p.key() for p in load_shapes(str(shapes))), keys
    assert {r["status"] for r in rows} == {"ok"}


def wait_for_rows(csv_path: Path, n: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if csv_path.is_file() and len(csv_path.read_text().splitlines()) > n:
            return
        time.sleep(0.1)
    raise AssertionError(f"{csv_path}: fewer than {n} rows after {timeout_s} s")
