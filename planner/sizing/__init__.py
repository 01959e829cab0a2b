"""Sizing and pricing one option: a fitted curve on one route -> replicas, latency and monthly cost.

sizing (size_online, size_batch: replicas on the latency door), queueing (the utilisation floor that
bounds the replica search), costs (GPU rental and model-update engineering per month), assumptions
(everything a plan assumes that is not a data file), options (evaluate_option: one curve sized and
priced for one route, and the option's name). Import from the modules: this package re-exports nothing.
"""
