"""Plain progress lines (pipes, --plain, NO_COLOR), and JSON event lines for --json."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TextIO

from loope.events import AgentActivity, Event, RunFinished, StepStarted
from loope.ui.lines import action_text, describe, step_label, summary_lines


def write_lines(stream: TextIO, lines: tuple[str, ...] | list[str]) -> bool:
    """Print ``lines``; False once the reader has gone away (``loope run | head``), which never fails the run."""
    try:
        for line in lines:
            print(line, file=stream, flush=True)
    except BrokenPipeError:
        # The rest goes to /dev/null, so neither the run nor the interpreter's exit trips on the closed pipe.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        return False
    return True


class PlainView:
    """One line per thing that happened; no escape codes."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.quiet = quiet
        self.open = True

    def _print(self, *lines: str) -> None:
        self.open = self.open and write_lines(self.stream, lines)

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
        self.open = True

    def on_event(self, event: Event) -> None:
        self.open = self.open and write_lines(self.stream, [event.to_json()])
