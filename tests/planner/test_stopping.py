"""planner.stopping: which handlers a command runs under (the signals themselves: tests/fuzz/test_hostile_cli.py)."""

from __future__ import annotations

import signal
import threading

from planner.stopping import stopped_by_signals


def test_handlers_are_set_for_the_run_and_put_back_and_an_ignored_signal_stays_ignored():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell starts a background job
    term_before = signal.getsignal(signal.SIGTERM)
    try:
        with stopped_by_signals("plan"):
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not term_before
        assert signal.getsignal(signal.SIGTERM) is term_before
    finally:
        signal.signal(signal.SIGINT, before)


def test_off_the_main_thread_nothing_changes():
    seen = []

    def run() -> None:
        with stopped_by_signals("plan"):
            seen.append(signal.getsignal(signal.SIGTERM))

    term_before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [term_before]
