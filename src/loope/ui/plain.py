"""Plain progress lines (pipes, --plain, NO_COLOR), and JSON event lines for --json."""

from __future__ import annotations

import sys
from typing import TextIO

from loope.events import AgentActivity, Event, RunFinished, StepStarted
from loope.ui.lines import action_text, describe, step_label, summary_lines


class PlainView:
    """One line per thing that happened; no escape codes."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.quiet = quiet

    def _print(self, *lines: str) -> None:
        for line in lines:
            print(line, file=self.stream, flush=True)

    def on_event(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            self._print(*summary_lines(event))
            return
        if self.quiet:
            return
        if isinstance(event, StepStarted):
            self._print(f"{step_label(event)} …")
        elif isinstance(event, AgentActivity):
            text = action_text(event.event)
            if text:
                self._print(f"     {text}")
        else:
            self._print(*describe(event))


class JsonLines:
    """Every event as one JSON object a line (DESIGN.md, Events)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout

    def on_event(self, event: Event) -> None:
        print(event.to_json(), file=self.stream, flush=True)
