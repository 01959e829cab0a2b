"""The engine model: how fast one replica runs, fitted on profiles or transferred from facts.

curves (fit_curves, Curve: the iteration-time model per profile group), frontend (what an OpenAI
server adds: its front end and prefill speed), fitcache (the on-disk memo of slow fits), transfer
(curves for a model, GPU, precision or TP nobody profiled) and transfer_check (its validation and the
calibrated transfer the plan uses). Import from the modules: this package re-exports nothing.
"""
