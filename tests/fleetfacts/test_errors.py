"""fleetfacts.errors: every expected error of the project derives from FleetplanError and keeps its built-in base."""

from __future__ import annotations

import pytest

from fleetfacts.errors import FleetplanError, InputError
from measure.engines.base import EngineError, EngineNotInstalled
from planner.engine.curves import NoCurveError
from planner.sizing.costs import CostLookupError
from planner.sizing.queueing import QueueingError


@pytest.mark.parametrize("error, builtin", [(InputError, ValueError), (QueueingError, ValueError),
                                            (NoCurveError, LookupError), (CostLookupError, LookupError),
                                            (EngineError, RuntimeError), (EngineNotInstalled, RuntimeError)])
def test_one_family_with_the_builtin_bases_kept(error, builtin):
    assert issubclass(error, FleetplanError) and issubclass(error, builtin)
    with pytest.raises(FleetplanError, match="what to fix"):
        raise error("what to fix")
