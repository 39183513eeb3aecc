"""What the notifiers share: ``notify.log``, a background worker that delivers in order, the final drain.

A notifier is an observer of the engine's events. Slow deliveries (Slack, webhooks) go through a
:class:`Worker`, so the loop never waits on the network; on ``run_finished`` the :class:`Drain`
observer gives all of them one shared, bounded wait to get their last messages out.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from loope.events import Event, RunFinished
from loope.records.atomic import append_line
from loope.records.model import now_iso
from loope.records.rundir import NOTIFY_LOG

DRAIN_S = 20.0
"""How long, in all, the end of a run waits for pending notifications before the process may exit."""
QUEUE_SIZE = 1000
"""Deliveries a worker holds at most; beyond it the oldest droppable one (an agent_event) goes."""


class NotifyLog:
    """One line per notification problem in ``<run_dir>/notify.log``: a notifier never fails a run."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.path: Path | None = None
        self._lock = threading.Lock()

    def open(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / NOTIFY_LOG

    def write(self, message: str) -> None:
        if self.path is None:  # nothing was started yet, so there is no run to report on
            return
        text = " ".join(str(message).split())
        with self._lock:
            try:
                append_line(self.path, f"{now_iso()} {self.source}: {text}")
            except OSError:
                return  # the run directory is gone or read-only; nothing else can take the line


@dataclass
class _Task:
    what: str
    run: Callable[[], None]
    droppable: bool


class Worker:
    """A daemon thread running deliveries one at a time, in the order they were submitted.

    The queue is bounded: when it is full, the oldest droppable task (else the oldest task) is
    dropped and the drop is logged, so a dead endpoint can neither hold up the loop nor eat memory.
    """

    def __init__(self, log: NotifyLog, *, name: str, capacity: int = QUEUE_SIZE) -> None:
        self.log = log
        self.name = name
        self.capacity = capacity
        self.dropped = 0
        self._tasks: deque[_Task] = deque()
        self._cond = threading.Condition()
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def submit(self, what: str, run: Callable[[], None], *, droppable: bool = False) -> None:
        with self._cond:
            if self._closed:
                self.log.write(f"{what}: not sent, the run has already finished")
                return
            if len(self._tasks) >= self.capacity:
                self._drop_one()
            self._tasks.append(_Task(what, run, droppable))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=f"loope-notify-{self.name}", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _drop_one(self) -> None:
        victim = next((t for t in self._tasks if t.droppable), self._tasks[0])
        self._tasks.remove(victim)
        self.dropped += 1
        if self.dropped == 1:
            self.log.write(
                f"the queue is full ({self.capacity} pending; the endpoint is slow or down):"
                f" dropped {victim.what}; further drops are counted at the end of the run"
            )

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._tasks and not self._closed:
                    self._cond.wait()
                if not self._tasks:
                    return
                task = self._tasks.popleft()
                self._busy = True
            try:
                task.run()
            except Exception as exc:  # noqa: BLE001 - a delivery never fails the run; the failure goes to notify.log
                self.log.write(f"{task.what} failed: {type(exc).__name__}: {exc}")
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def drain(self, deadline: float) -> int:
        """Take no more tasks and wait until ``deadline`` (monotonic) for the queue; how many were left."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            while self._tasks or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            pending = len(self._tasks) + int(self._busy)
            self._tasks.clear()  # the thread ends after the task in flight; it is a daemon either way
        if self.dropped > 1:
            self.log.write(f"{self.dropped} deliveries were dropped in all because the queue was full")
        return pending


class Queued(Protocol):
    """A notifier that delivers through a :class:`Worker`."""

    log: NotifyLog
    worker: Worker

    def on_event(self, event: Event) -> None: ...


class Drain:
    """The last notification observer: at ``run_finished``, one bounded wait for every worker.

    The notifiers before it have queued their final messages by then; waiting for all of them
    together (not one after another) keeps the end of a run at most ``DRAIN_S`` late.
    """

    def __init__(self, notifiers: Sequence[Queued], *, limit_s: float = DRAIN_S) -> None:
        self.notifiers = list(notifiers)
        self.limit_s = limit_s

    def on_event(self, event: Event) -> None:
        if not isinstance(event, RunFinished):
            return
        deadline = time.monotonic() + self.limit_s
        for notifier in self.notifiers:
            try:
                pending = notifier.worker.drain(deadline)
            except KeyboardInterrupt:  # Ctrl-C while waiting: the run is already recorded, so just stop waiting
                notifier.log.write("stopped waiting for pending notifications: interrupted")
                return
            if pending:
                notifier.log.write(f"gave up after {self.limit_s:g}s: {pending} notification(s) not delivered")
