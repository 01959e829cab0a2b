"""How many routes one fleet program takes (a light module: the CLI builds its help from it without loading
the optimiser)."""

from __future__ import annotations

from fleetfacts.errors import InputError

# Most routes one fleet program takes: its time grows faster than the route count.  `planner fleet` on the
# benchmarks' synthetic organisation (6 models), 2 shared cores, 2026-12-04: 50 routes 70 s and 0.7 GB, 100
# routes 290-510 s and 1.3 GB (issue 25: 200 routes 118 s and 2 GB, 2,000 past 5 minutes).  More routes:
# split the file, or plan them route by route (`plan`).
MAX_FLEET_ROUTES = 100


def check_fleet_size(count: int, where: str = "routes") -> None:
    """InputError when `count` routes are more than one fleet program takes (MAX_FLEET_ROUTES)."""
    if count > MAX_FLEET_ROUTES:
        raise InputError(f"{where}: {count:,} routes; a fleet plans at most {MAX_FLEET_ROUTES} routes together "
                         f"(MAX_FLEET_ROUTES: more take minutes and gigabytes): split the routes file into fleets "
                         f"of at most {MAX_FLEET_ROUTES}, or plan route by route with `python -m planner plan`")
