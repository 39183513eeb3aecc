"""The observers every run has: its events.jsonl and its report.md."""

from __future__ import annotations

from pathlib import Path

from loope.events import Event, RunFinished
from loope.records.atomic import append_line, write_text
from loope.records.report import render
from loope.records.rundir import RunDir


class EventsFile:
    """Appends every event to the run's events.jsonl."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_event(self, event: Event) -> None:
        append_line(self.path, event.to_json())


class ReportWriter:
    """Writes report.md from run.json when the run ends (``loope show`` renders it on demand while it runs)."""

    def __init__(self, rundir: RunDir) -> None:
        self.rundir = rundir

    def on_event(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            write_text(self.rundir / "report.md", render(self.rundir.read_json("run.json")))
