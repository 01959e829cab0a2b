"""`python -m planner`: see planner/cli.py."""

from __future__ import annotations

import os
import sys

# The planner's linear algebra is on small matrices (at most a few hundred columns): BLAS worker threads
# cost more than they save, and on a busy 2-core machine they made a transfer calibration 16x slower.
# Set before numpy loads; a caller's own setting wins.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

from planner.cli import main  # noqa: E402  (after the thread settings above)

if __name__ == "__main__":
    sys.exit(main())
