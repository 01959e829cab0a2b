"""Fleetplan's measuring side: profile serving engines on a GPU and write PROFILE CSVs.

`python -m measure profile ...` runs a sweep of batch shapes against one engine
(vLLM or TensorRT-LLM in process, or any OpenAI-compatible server through the
load generator) and writes one profile folder the planner reads.  Engines are
imported only when used.
"""

from __future__ import annotations

__all__ = ["__version__"]
__version__ = "0.1.0"
