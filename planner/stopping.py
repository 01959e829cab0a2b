"""How `python -m planner` stops on a signal.

The first SIGINT (Ctrl-C) or SIGTERM (systemd's stop, a CI timeout) unwinds: KeyboardInterrupt or Terminated
is raised where the program is, worker processes are stopped on the way out (planner/planning/fanout.py), and
the CLI prints one line and exits 130 or 143.  A second signal while that happens ends the process at once,
with one line and no traceback: stopping never waits on what it stops.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130, as a shell reports a Ctrl-C
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143, as a shell reports a kill -TERM
SIGNALS = (signal.SIGINT, signal.SIGTERM)
WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like KeyboardInterrupt (a BaseException, so `except Exception` lets it pass)."""


@dataclass
class _Handlers:
    """The handlers of one command's run: `first` unwinds, `again` (set by `first`) ends the process at once."""

    command: str
    owner: int = field(default_factory=os.getpid)
    received: bool = False

    def first(self, signum: int, _frame: FrameType | None) -> None:
        if os.getpid() != self.owner:  # a forked worker before it set its own handlers: it just ends
            os._exit(128 + signum)
        self.received = True
        for sig in SIGNALS:
            if signal.getsignal(sig) == self.first:
                signal.signal(sig, self.again)
        raise KeyboardInterrupt if signum == signal.SIGINT else Terminated

    def again(self, signum: int, _frame: FrameType | None) -> None:
        os.write(2, f"{WORDS[signal.Signals(signum)]}: {self.command} stopped at once\n".encode())
        os._exit(128 + signum)


@contextmanager
def stopped_by_signals(command: str) -> Iterator[None]:
    """Within: the first SIGINT or SIGTERM raises KeyboardInterrupt or Terminated, a second one exits at once.

    A signal its caller ignores (a shell's background job ignores SIGINT) stays ignored.  The handlers are put
    back on the way out, unless a signal came (the process is ending: a second one must still end it at once).
    Only the main thread sets handlers: called from another (an app, a test's thread) this changes nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handlers, previous = _Handlers(command), {sig: signal.getsignal(sig) for sig in SIGNALS}
    for sig in SIGNALS:
        if previous[sig] is not signal.SIG_IGN:
            signal.signal(sig, handlers.first)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if not handlers.received and handler is not None:  # None: set outside Python, cannot be put back
                signal.signal(sig, handler)
