"""The observers every run has: its events.jsonl and its report.md."""

from __future__ import annotations

from pathlib import Path

from loope.events import Event, RunFinished
from loope.records.atomic import write_text
from loope.records.report import render
from loope.records.rundir import RunDir
from loope.records.sealed import SealedLog


class EventsFile:
    """Appends every event to the run's events.jsonl, a log only the runner writes (``records.sealed``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.log = SealedLog(path)

    def on_event(self, event: Event) -> None:
        self.log.append(event.to_dict())
        if isinstance(event, RunFinished):
            self.log.close()  # a later event (a continued run in this process) opens it again


class ReportWriter:
    """Writes report.md from run.json when the run ends (``loope show`` renders it on demand while it runs)."""

    def __init__(self, rundir: RunDir) -> None:
        self.rundir = rundir

    def on_event(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            write_text(self.rundir / "report.md", render(self.rundir.read_json("run.json")))
