"""Delivering the engine's events to its observers."""

from __future__ import annotations

import dataclasses
import os
import threading
import traceback
from collections.abc import Iterable
from pathlib import Path

from loope.events import Event, Observer
from loope.records.model import now_iso
from loope.records.space import append_quietly, disk_full

STRICT_ENV = "LOOPE_STRICT_OBSERVERS"
"""Set to 1 (the test suite does) and an observer that raises stops the process instead of being logged."""


class ObserverFailed(BaseException):
    """An observer raised in strict mode.

    A BaseException, so that no handler in the engine records it as the run's own failure: the
    process (a test) stops with the observer's traceback.
    """


class EventBus:
    """Delivers each event to every observer, one event at a time, in order.

    Steps run in parallel (reviewers), so delivery is serialized. An observer that raises is
    reported in ``observer-errors.log`` and skipped: showing progress must never change a run.
    In strict mode (``LOOPE_STRICT_OBSERVERS=1``) it is also raised as :class:`ObserverFailed`.
    """

    def __init__(self, observers: Iterable[Observer] = (), *, strict: bool | None = None) -> None:
        self.observers: list[Observer] = list(observers)
        self.run_id = ""
        self.error_log: Path | None = None
        self.strict = os.environ.get(STRICT_ENV) == "1" if strict is None else strict
        self._lock = threading.RLock()

    def add(self, observer: Observer) -> None:
        self.observers.append(observer)

    def emit(self, event: Event) -> Event:
        if not event.run_id:
            event = dataclasses.replace(event, run_id=self.run_id)
        with self._lock:
            for observer in self.observers:
                try:
                    observer.on_event(event)
                except Exception as exc:
                    self._record_failure(observer, event)
                    # A full disk is not an observer's bug: the run records it as its own failure.
                    if self.strict and not disk_full(exc):
                        raise ObserverFailed(f"{type(observer).__name__} failed on {event.type}: {exc!r}") from exc
        return event

    def _record_failure(self, observer: Observer, event: Event) -> None:
        if self.error_log is not None:
            append_quietly(
                self.error_log,
                f"{now_iso()} {type(observer).__name__} failed on {event.type}:\n{traceback.format_exc()}",
            )
