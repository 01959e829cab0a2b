"""Sweep points (one load shape each) and shape presets stored as CSV data.

A point is one measurement: `offline` submits `batch_size` requests at once,
`concurrency` keeps `concurrency` requests in flight for `num_requests`
requests, `rate` sends `num_requests` requests at `request_rate` per second
with an `arrival` process (poisson, gamma:cv=X, replay:PATH).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from pathlib import Path

from fleetfacts.errors import InputError

PRESET_DIR = Path(__file__).resolve().parent / "shapes"
SHAPE_COLUMNS = ("mode", "input_len", "output_len", "batch_size", "concurrency", "request_rate", "arrival",
                 "num_requests", "purpose")
MODES = ("offline", "concurrency", "rate")


@dataclass(frozen=True)
class Point:
    """One load shape; `key()` identifies it in a profile for resume."""

    mode: str
    input_len: int
    output_len: int
    batch_size: int | None = None
    concurrency: int | None = None
    request_rate: float | None = None
    arrival: str = ""
    num_requests: int | None = None
    purpose: str = ""

    @property
    def requests(self) -> int:
        """Requests the point sends (offline: the batch)."""
        if self.num_requests:
            return self.num_requests
        return int(self.batch_size or self.concurrency or 1)

    def key(self) -> tuple:
        rate = None if self.request_rate is None else round(float(self.request_rate), 6)
        return (self.mode, int(self.input_len), int(self.output_len), self.batch_size, self.concurrency, rate,
                self.arrival or "")

    def label(self) -> str:
        load = {"offline": f"batch {self.batch_size}", "concurrency": f"conc {self.concurrency}",
                "rate": f"rate {self.request_rate:g}/s {self.arrival}" if self.request_rate else "rate"}[self.mode]
        return f"{self.mode} I={self.input_len} O={self.output_len} {load} N={self.requests}"


def _int_or_none(text: str | float | None, where: str, column: str) -> int | None:
    if text is None or str(text).strip() == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}, column {column!r}: expected a whole number, got {text!r}") from None
    if value != int(value) or value < 1:
        raise InputError(f"{where}, column {column!r}: expected a whole number >= 1, got {text!r}")
    return int(value)


def _float_or_none(text: str | float | None, where: str, column: str) -> float | None:
    if text is None or str(text).strip() == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}, column {column!r}: expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{where}, column {column!r}: expected a number > 0, got {text!r}")
    return value


def point_from_mapping(row: dict, where: str) -> Point:
    """Build a Point from a CSV row (shapes file or profile row); raises InputError naming `where`."""
    mode = str(row.get("mode", "") or "").strip().lower()
    if mode not in MODES:
        raise InputError(f"{where}, column 'mode': expected one of {', '.join(MODES)}, got {row.get('mode')!r}")
    point = Point(
        mode=mode,
        input_len=_int_or_none(row.get("input_len"), where, "input_len") or 0,
        output_len=_int_or_none(row.get("output_len"), where, "output_len") or 0,
        batch_size=_int_or_none(row.get("batch_size"), where, "batch_size"),
        concurrency=_int_or_none(row.get("concurrency"), where, "concurrency"),
        request_rate=_float_or_none(row.get("request_rate"), where, "request_rate"),
        arrival=str(row.get("arrival", "") or "").strip().lower(),
        num_requests=_int_or_none(row.get("num_requests"), where, "num_requests"),
        purpose=str(row.get("purpose", "") or "").strip(),
    )
    _check_point(point, where)
    return point


def _check_point(p: Point, where: str) -> None:
    if p.input_len < 1 or p.output_len < 1:
        raise InputError(f"{where}: input_len and output_len are required (whole numbers >= 1)")
    needs = {"offline": ("batch_size", p.batch_size), "concurrency": ("concurrency", p.concurrency),
             "rate": ("request_rate", p.request_rate)}[p.mode]
    if needs[1] is None:
        raise InputError(f"{where}, column {needs[0]!r}: a value is required for mode {p.mode}")
    if p.mode == "rate" and not p.arrival:
        raise InputError(f"{where}, column 'arrival': a value is required for mode rate "
                         "(poisson, gamma:cv=2, replay:PATH)")


def load_shapes(spec: str) -> tuple[Point, ...]:
    """Points of a preset name (measure/shapes/<name>.csv) or of a shapes CSV file path."""
    path = Path(spec)
    if not path.exists():
        preset = PRESET_DIR / f"{spec.lower()}.csv"
        if not preset.exists():
            raise InputError(f"shapes {spec!r}: neither a file nor a preset (presets: {', '.join(list_presets())})")
        path = preset
    if path.is_dir():
        raise InputError(f"shapes {path}: is a folder, expected a shapes CSV file or a preset name")
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = [r for r in csv.DictReader(line for line in handle if not line.startswith("#"))]
    except (UnicodeDecodeError, csv.Error) as err:
        raise InputError(f"shapes {path}: not a CSV text file ({type(err).__name__}: {err})") from None
    if not rows:
        raise InputError(f"{path}: no shape rows (expected a CSV with columns {', '.join(SHAPE_COLUMNS)})")
    unknown = {str(c) for c in rows[0] if c is not None and c not in SHAPE_COLUMNS}
    if unknown:
        raise InputError(f"{path}: unknown column(s) {', '.join(sorted(unknown))}; expected {', '.join(SHAPE_COLUMNS)}")
    extra = next((i for i, r in enumerate(rows) if None in r), None)  # DictReader keys surplus cells by None
    if extra is not None:
        raise InputError(f"{path}, shape row {extra + 1}: more cells than the header's {sum(k is not None for k in rows[0])} columns "
                         f"(a comma inside the purpose? quote it)")
    points = tuple(point_from_mapping(r, f"{path}, line {i + 2}") for i, r in enumerate(rows))
    return _dedupe(points, path)


def _dedupe(points: tuple[Point, ...], path: Path) -> tuple[Point, ...]:
    seen: dict[tuple, int] = {}
    for i, p in enumerate(points):
        if p.key() in seen:
            raise InputError(f"{path}, line {i + 2}: duplicate of line {seen[p.key()] + 2} ({p.label()})")
        seen[p.key()] = i
    return points


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.csv"))


def with_requests(point: Point, num_requests: int) -> Point:
    return replace(point, num_requests=num_requests)
