"""measure.sweep: a resumed sweep schedules its first point with the speed its completed rows showed."""

from __future__ import annotations

from measure.engines.base import EngineInfo
from measure.points import Point
from measure.sweep import Budget, Calibration, Identity, Sweep


class _Engine:
    """Records its start; every point it is asked for fails at once (this test is about the start)."""

    modes = frozenset({"offline"})

    def __init__(self) -> None:
        self.started = False

    def start(self) -> EngineInfo:
        self.started = True
        return EngineInfo("0")

    def stop(self) -> None:
        pass

    def run_point(self, point: Point, seed: int) -> None:
        raise RuntimeError("not measured in this test")

    def needs_restart(self, err: Exception) -> bool:
        return False


def _sweep(calibration: Calibration) -> Sweep:
    point = Point("offline", 1024, 1024, batch_size=512)
    return Sweep(engine=_Engine(), identity=Identity("h200", "vllm", "m", "bf16", 1, "test"), points=[point],
                 write_row=lambda row: None, estimate_s=lambda p: 400.0, engine_start_estimate_s=70.0,
                 budget=Budget(300.0), calibration=calibration)


def test_a_resumed_sweep_starts_when_its_measured_speed_fits_the_budget():
    """The prior says 400 s (no start in a 300 s budget); the completed rows took a quarter of their
    estimates, so the point needs ~100 s and the engine starts."""
    fast = Calibration()
    for _ in range(5):
        fast.add(25.0, 100.0)
    resumed = _sweep(fast)
    resumed.run()
    assert resumed.engine.started
    fresh = _sweep(Calibration())
    outcome = fresh.run()
    assert not fresh.engine.started and outcome.stopped_for_time
