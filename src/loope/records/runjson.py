"""Saving run.json at a cost that does not grow with the run.

A run saves its record after every step. Serializing the whole record each time (a deep copy of
every step, then indented JSON) makes step 300 cost far more than step 3; here each step is
serialized once, when it is added, and a save writes the small top of the record around the
steps' cached lines. A reader still sees one ordinary JSON document (schema 1).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from loope.records.atomic import write_text
from loope.records.model import RunRecord, StepRecord
from loope.records.serial import to_data

_STEPS_SLOT = '\n  "steps": []'
"""How an empty ``steps`` list appears at the top level of the indented record (nowhere else:
JSON strings hold no raw newline, and nested keys are indented deeper)."""


def _top(record: RunRecord) -> dict[str, Any]:
    """The record without its steps, as JSON data (the steps list is not walked)."""
    return {f.name: [] if f.name == "steps" else to_data(getattr(record, f.name)) for f in dataclasses.fields(record)}


class RunJsonWriter:
    """Writes one run's run.json; each step is serialized once (a step record is final once added)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cached: list[tuple[StepRecord, str]] = []

    def _step_lines(self, steps: list[StepRecord]) -> list[str]:
        cached = self._cached
        same = 0
        while same < len(cached) and same < len(steps) and cached[same][0] is steps[same]:
            same += 1
        del cached[same:]  # the list was rewritten (a resumed run set steps aside): serialize anew
        for step in steps[same:]:
            cached.append((step, json.dumps(to_data(step), ensure_ascii=False)))
        return [line for _, line in cached]

    def render(self, record: RunRecord) -> str:
        top = json.dumps(_top(record), indent=2, ensure_ascii=False)
        lines = self._step_lines(record.steps)
        if lines:
            steps = '\n  "steps": [\n    ' + ",\n    ".join(lines) + "\n  ]"
            top = top.replace(_STEPS_SLOT, steps, 1)
        return top + "\n"

    def save(self, record: RunRecord) -> None:
        write_text(self.path, self.render(record))
