"""Fleetplan's error family: every expected failure derives from `FleetplanError`.

A CLI catches the base and prints a one-line message (exit code 2) instead of a
traceback.  Each subclass also derives from the built-in exception it refines
(`ValueError`, `LookupError`, `RuntimeError`), so existing `except` clauses keep working.
The subclasses live beside the code that raises them (planner/engine/curves.py NoCurveError,
planner/sizing/costs.py CostLookupError, planner/sizing/queueing.py QueueingError,
measure/engines/base.py EngineError); only the shared ones are here.
"""

from __future__ import annotations


class FleetplanError(Exception):
    """An expected failure whose message says what was wrong and what to do."""


class InputError(FleetplanError, ValueError):
    """A user-supplied file or value is invalid; the message says what to fix."""
