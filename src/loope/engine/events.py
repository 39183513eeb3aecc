"""Engine events and the observers that show or record them (DESIGN.md, Events)."""

from __future__ import annotations

import json
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from loope.records.atomic import append_line
from loope.records.model import now_iso

EventType = Literal[
    "run_started",
    "iteration_started",
    "step_started",
    "agent_event",
    "step_finished",
    "step_retry",
    "limit_wait",
    "guard",
    "verify_finished",
    "metric",
    "review_finished",
    "decision",
    "critique",
    "iteration_finished",
    "run_finished",
]


@dataclass(frozen=True)
class Event:
    type: EventType
    run_id: str
    data: dict[str, Any] = field(default_factory=dict)
    ts: str = field(default_factory=now_iso)

    def to_dict(self) -> dict[str, Any]:
        return {"ts": self.ts, "run_id": self.run_id, "type": self.type, **self.data}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, default=str)


class Observer(Protocol):
    def on_event(self, event: Event) -> None: ...


class EventBus:
    """Delivers each event to every observer, one event at a time, in order.

    Steps run in parallel (reviewers), so delivery is serialized. An observer that raises is
    reported in ``observer-errors.log`` and skipped: showing progress must never change a run.
    """

    def __init__(self, observers: list[Observer] | None = None) -> None:
        self.observers: list[Observer] = list(observers or [])
        self.run_id = ""
        self.error_log: Path | None = None
        self._lock = threading.RLock()

    def add(self, observer: Observer) -> None:
        self.observers.append(observer)

    def emit(self, type_: EventType, **data: Any) -> Event:
        event = Event(type_, self.run_id, data)
        with self._lock:
            for observer in self.observers:
                try:
                    observer.on_event(event)
                except Exception:  # noqa: BLE001 - an observer must not fail the run; the traceback goes to observer-errors.log
                    self._record_failure(observer, event)
        return event

    def _record_failure(self, observer: Observer, event: Event) -> None:
        if self.error_log is not None:
            append_line(
                self.error_log,
                f"{now_iso()} {type(observer).__name__} failed on {event.type}:\n{traceback.format_exc()}",
            )


class EventsFile:
    """Appends every event to the run's events.jsonl."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_event(self, event: Event) -> None:
        append_line(self.path, event.to_json())
