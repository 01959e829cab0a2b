"""Where the bundled files that live outside the packages are: profiles/, examples/ and app.py.

In a checkout they are the top-level folders beside the packages.  Installed from the wheel, pyproject.toml puts
the same files in site-packages/fleetplan_data/, beside the installed packages (docs/install.md, "Layout").
Data inside a package (fleetfacts/data, fleetfacts/models, planner/data, measure/shapes) is found beside its
own module in both cases.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

# The folder that holds the packages: the checkout's top level, or site-packages.
PACKAGES_PARENT = Path(__file__).resolve().parents[1]
INSTALLED_DATA = PACKAGES_PARENT / "fleetplan_data"
# profiles/, examples/ and app.py are in here; the plan names bundled profile files relative to it.
ROOT = INSTALLED_DATA if INSTALLED_DATA.is_dir() else PACKAGES_PARENT
PROFILES_DIR = ROOT / "profiles"
EXAMPLES_DIR = ROOT / "examples"
APP = ROOT / "app.py"

# The distribution's name (pyproject.toml), whose metadata holds the installed version.
DISTRIBUTION = "fleetplan"
_VERSION_LINE = re.compile(r'^version\s*=\s*"([^"]+)"', re.M)


def version() -> str:
    """The version pyproject.toml declares: from the installed package's metadata, or in a checkout from the
    checkout's own pyproject.toml (an older copy installed in the same environment does not answer for it)."""
    if ROOT == INSTALLED_DATA:
        return importlib.metadata.version(DISTRIBUTION)
    match = _VERSION_LINE.search((PACKAGES_PARENT / "pyproject.toml").read_text(encoding="utf-8"))
    if match is None:
        raise RuntimeError(f"{PACKAGES_PARENT / 'pyproject.toml'}: no `version = \"...\"` line")
    return match.group(1)
