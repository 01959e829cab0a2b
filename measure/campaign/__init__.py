"""Measure campaigns: many `measure profile` jobs, run one after another here or spread over a Ray cluster.

The modules, bottom up (each imports only those before it; `lint-imports` holds the order):
- `spec`: the campaign file (YAML), each job one `measure profile` invocation, parsed into a `Campaign`;
- `plan`: each job resolved, its folder checked, its pending points and estimated GPU-minutes (`JobPayload`);
- `worker`: runs one job's points with the profile sweep and reports each as an event;
- `ray_tasks`: jobs as Ray tasks that stream those events back;
- `driver`: writes the events into the profile folders and the status file, running jobs here or on Ray;
- `command`: `python -m measure campaign` (its arguments, the schedule, the summary, the exit code).

The entry point is `run_campaign(args)` with its arguments from `add_campaign_args(parser)`; `--resume` plans
only the points the folders lack.
"""

from measure.campaign.command import add_campaign_args, run_campaign

__all__ = ["add_campaign_args", "run_campaign"]
