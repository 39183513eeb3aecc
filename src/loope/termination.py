"""SIGTERM and SIGHUP end a run the way ``stop --now`` and Ctrl-C do.

The signal becomes an exception in the runner's main thread, so the step in flight is killed with
everything it started (``loope.proc`` kills its group and its sandbox on any exception), the run is
recorded ``stopped`` and the process exits 128 + the signal's number (143, 129).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """The runner was told to end by a signal; handled wherever Ctrl-C is."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def interrupt_detail(exc: KeyboardInterrupt) -> str:
    """The run's stop detail after Ctrl-C or a signal."""
    return f"stopped by {exc.name}" if isinstance(exc, Terminated) else "interrupted with Ctrl-C"


@contextlib.contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`Terminated` (once: a second one is ignored).

    Outside the main thread (a library caller running the engine in a thread) nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, _frame: FrameType | None) -> None:
        for sig in SIGNALS:  # finalizing the run must not be cut short by a second signal
            signal.signal(sig, signal.SIG_IGN)
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, handle) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
