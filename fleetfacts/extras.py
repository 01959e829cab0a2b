"""Optional extras (pyproject `[project.optional-dependencies]`), imported only where a command uses them.

One place for the install hint, so `measure campaign --ray` and `planner plan --ray` say the same thing.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from fleetfacts.errors import FleetplanError

RAY_INSTALL_HINT = "pip install '.[ray]' (or: pip install 'ray[default]>=2.9')"


class MissingExtra(FleetplanError, ImportError):
    """An optional package a command needs is not installed; the message says how to install it."""


def import_ray() -> ModuleType:
    """The `ray` module; MissingExtra with the install hint when it is absent."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise MissingExtra(f"--ray needs Ray, which is not installed: {RAY_INSTALL_HINT}") from None
