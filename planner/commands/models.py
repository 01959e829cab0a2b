"""`python -m planner models`: the bundled model architectures (what transfer predicts without a config).
"""

from __future__ import annotations

import argparse

from fleetfacts.specs import bundled_model_specs
from planner.commands.base import Command, register
from planner.engine.transfer_check import models_table


def _models_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the table as JSON records")


def _run_models(args: argparse.Namespace) -> int:
    table = models_table(bundled_model_specs())
    if args.json:
        print(table.to_json(orient="records"))
    else:
        print(table.drop(columns=["source"]).to_string(index=False))
        print("sources: fleetfacts/models/README.md; any other model: predict --model-config PATH/config.json")
    return 0


register(Command("models", "list the bundled model architectures (what transfer can predict without a config)",
                 _models_arguments, _run_models))
