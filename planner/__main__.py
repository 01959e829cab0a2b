"""`python -m planner`: see planner/cli.py."""

from __future__ import annotations

import sys

from planner.cli import main

if __name__ == "__main__":
    sys.exit(main())
