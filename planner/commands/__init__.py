"""The subcommands of `python -m planner`, one module each (planner.cli is the entry point that lists them)."""
