"""The contract that measure/ and planner/ share: file schemas, GPU and model specs, roofline
and KV-capacity formulas, and the error family.

`measure/` writes profiles and `planner/` reads them; both import this package and
never each other.  It depends on nothing of the project.
"""
