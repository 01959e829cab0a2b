"""Traffic: what the fleet serves, from a ROUTES table or a request log.

routes (Route: one ROUTES row parsed, its rate, SLO and length distributions), logs (request logs ->
per-route statistics -> ROUTES rows, diurnal profiles) and workload (arrival times and the requests a
simulation runs, synthetic or replayed). Import from the modules: this package re-exports nothing.
"""
