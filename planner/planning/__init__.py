"""Planning: routes -> the plan and the fleet, and what is made of them.

plan (make_plan, load_inputs, read/write_plan) and plan_pair (a plan's CSV and assumptions JSON belong
together); plan_check (the simulation check of a saved plan); fleet (make_fleet: one program over every
route) and fleet_check (its simulation check); fanout (where the per-route planning runs: one core, a
process pool or Ray); exports (totals, baseline diff, the workbook); deploy (launch configs for a plan row).
Import from the modules (`from planner.planning.plan import make_plan`): this package re-exports nothing.
"""
