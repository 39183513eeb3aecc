"""What every terminal view of a run does: take events (from the engine, or events.jsonl) into one model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loope.records.runview import RunView

if TYPE_CHECKING:
    from loope.events import Event


class View:
    """An engine observer that ``loope logs`` can also feed, one events.jsonl line at a time."""

    def __init__(self) -> None:
        self.view = RunView()
        self.replaying = False
        """True while ``loope logs`` draws the events written before it started."""

    def on_event(self, event: Event) -> None:
        self.show(event.to_dict())

    def show(self, event: dict[str, Any]) -> None:
        """Draw one event (a dict as in events.jsonl)."""
        raise NotImplementedError

    def output(self, lines: list[str]) -> None:
        """Lines a running check printed, as they arrive (``loope logs -f``)."""

    def resume(self) -> None:
        """The replay has caught up with a running run: from now on events arrive as they happen."""

    def close(self) -> None:
        """No more events will come (a followed run ended, or a replay reached the end of the file)."""
