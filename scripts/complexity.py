"""Count the functions of the project above a cyclomatic complexity, counted as radon counts it.

    python scripts/complexity.py [--top N] [PATH ...]      (default: fleetfacts measure planner ui app.py)

The lint (ruff C901, limit 10) counts branches and loops only; radon (not a dependency) also counts each
boolean operator, ternary, comprehension clause and assert, so it finds the long conditions the lint lets
through.  This follows radon's visitor: +1 per if / elif / ternary / assert, +1 per loop (+1 for its else),
+1 per except (+1 for a try's else), +(operands - 1) per boolean operator, +1 per comprehension clause and
per condition in it, +1 per match case; a nested function is counted on its own, not in its parent.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PATHS = ("fleetfacts", "measure", "planner", "ui", "app.py")
THRESHOLDS = (10, 15, 20)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
NOT_COUNTED_INSIDE = (*FUNCTIONS, ast.Lambda, ast.ClassDef)


def node_complexity(node: ast.AST) -> int:
    """What one AST node adds to its function's complexity."""
    if isinstance(node, ast.If | ast.IfExp | ast.Assert | ast.match_case):
        return 1
    if isinstance(node, ast.For | ast.AsyncFor | ast.While):
        return 1 + bool(node.orelse)
    if isinstance(node, ast.Try):
        return len(node.handlers) + bool(node.orelse)
    if isinstance(node, ast.BoolOp):
        return len(node.values) - 1
    if isinstance(node, ast.comprehension):
        return 1 + len(node.ifs)
    return 0


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """1 + what the function's own body adds (nested functions, lambdas and classes left out)."""
    total, stack = 1, list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, NOT_COUNTED_INSIDE):
            continue
        total += node_complexity(node)
        stack.extend(ast.iter_child_nodes(node))
    return total


def functions(paths: list[Path]) -> Iterator[tuple[int, str]]:
    """(complexity, 'file:line name') of every function under `paths`."""
    for root in paths:
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, FUNCTIONS):
                    yield complexity(node), f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=DEFAULT_PATHS, help="files or folders, from the repo root")
    parser.add_argument("--top", type=int, default=10, help="list the N most complex functions")
    args = parser.parse_args()
    rows = sorted(functions([ROOT / p for p in args.paths]), reverse=True)
    print(", ".join(f"over {t}: {sum(1 for c, _ in rows if c > t)}" for t in THRESHOLDS)
          + f" (of {len(rows)} functions)")
    for value, name in rows[:args.top]:
        print(f"{value:4d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
