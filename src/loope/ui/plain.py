"""Plain progress lines (pipes, --plain, NO_COLOR), and JSON event lines for --json."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

from loope.records.runview import action_text
from loope.ui.base import View
from loope.ui.lines import INDENT, describe, summary_lines

if TYPE_CHECKING:
    from loope.events import Event

MESSAGE_CHARS = 160


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


class PlainView(View):
    """One line per thing that happened; no escape codes."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        super().__init__()
        self.stream = stream or sys.stdout
        self.quiet = quiet
        self.open = True

    def _print(self, *lines: str) -> None:
        self.open = self.open and write_lines(self.stream, lines)

    def show(self, event: dict[str, Any]) -> None:
        view = self.view
        step = view.running.get(int(event.get("step") or -1)) if event.get("type") == "agent_event" else None
        view.apply(event)
        kind = event.get("type")
        if kind == "run_finished":
            self._print(*summary_lines(event, view.run_id, view))
            return
        if self.quiet:
            return
        if kind == "step_started":
            self._print(f"{view.labels.get(int(event['step']))} …")
        elif kind == "agent_event":
            inner = event.get("event") or {}
            text = action_text(inner)
            if text:
                self._print(f"{INDENT}{text}")
            elif inner.get("kind") == "message" and step is not None and step.message:
                self._print(f"{INDENT}» {step.message[:MESSAGE_CHARS]}")
        else:
            self._print(*describe(event, view))

    def output(self, lines: list[str]) -> None:
        if not self.quiet:
            self._print(*(f"{INDENT}| {line[:200]}" for line in lines))


class JsonLines(View):
    """Every event as one JSON object a line (DESIGN.md, Events)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__()
        self.stream = stream or sys.stdout
        self.open = True

    def on_event(self, event: Event) -> None:
        self.open = self.open and write_lines(self.stream, [event.to_json()])

    def show(self, event: dict[str, Any]) -> None:

        self.open = self.open and write_lines(self.stream, [json.dumps(event, ensure_ascii=False)])
