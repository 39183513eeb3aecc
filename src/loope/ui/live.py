"""The live terminal view: finished work scrolls up, running steps spin at the bottom."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from loope.events import AgentActivity, Event, RunFinished, RunStarted, StepFinished, StepStarted, VerifyFinished
from loope.ui.lines import action_text, describe, step_label, summary_lines

_STYLES = {"ok": "green", "passed": "green", "failed": "red", "BLOCK": "yellow", "PASS": "green"}


@dataclass
class _Running:
    label: str
    started: float = field(default_factory=time.monotonic)
    last: str = ""


class LiveView:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self.running: dict[int, _Running] = {}
        self.live = Live(
            self._render(),
            console=self.console,
            refresh_per_second=8,
            transient=True,
            get_renderable=self._render,
        )

    def _render(self) -> RenderableType:
        if not self.running:
            return Text("")
        table = Table.grid(padding=(0, 1))
        now = time.monotonic()
        for run in self.running.values():
            table.add_row(
                Spinner("dots", style="cyan"),
                Text(run.label, style="bold"),
                Text(f"{now - run.started:4.0f}s", style="dim"),
                Text(run.last, style="dim", overflow="ellipsis", no_wrap=True),
            )
        return Group(table)

    def _style(self, line: str) -> Text:
        text = Text(line)
        if line.startswith("iteration "):
            text.stylize("bold cyan")
        for word, style in _STYLES.items():
            text.highlight_words([f" {word} ", f" {word}"], style=style)
        if "⚠" in line or line.startswith("warning"):
            text.stylize("yellow")
        return text

    def on_event(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.live.start()
        if isinstance(event, StepStarted):
            self.running[event.step] = _Running(step_label(event))
        elif isinstance(event, AgentActivity):
            running = self.running.get(event.step)
            text = action_text(event.event)
            if running and text:
                running.last = text
                self.console.print(Text(f"     {text}", style="dim"))
        elif isinstance(event, StepFinished | VerifyFinished):
            self.running.pop(event.step, None)
        if isinstance(event, RunFinished):
            self.running.clear()
            self.live.stop()
            lines = summary_lines(event)
            style = "bold green" if event.converged else "bold yellow"
            self.console.print(Text(lines[0], style=style))
            for line in lines[1:]:
                self.console.print(line, highlight=False, markup=False)
            return
        for line in describe(event):
            self.console.print(self._style(line))
        self.live.refresh()
