"""`python -m measure`: only calls the CLI."""

from __future__ import annotations

import sys

from measure.cli import main

if __name__ == "__main__":
    sys.exit(main())
