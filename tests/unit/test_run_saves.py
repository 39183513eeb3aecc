"""run.json is saved once between two iterations: the end of one names the start of the next."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from loope.engine.bus import EventBus
from loope.engine.run import Halt, RunState
from loope.enums import StopReason
from loope.records.model import RunRecord, WorkspaceInfo
from loope.records.rundir import RunDir
from loope.records.runjson import RunJsonWriter
from loope.spec import LoopSpec


class CountingWriter(RunJsonWriter):
    """The ordinary writer, counting its saves."""

    saves = 0

    def save(self, record: RunRecord) -> None:
        self.saves += 1
        super().save(record)


def run_state(tmp_path: Path) -> tuple[RunState, CountingWriter]:
    ws = WorkspaceInfo("worktree", str(tmp_path / "w"), None, "a" * 40, "a" * 40)
    record = RunRecord(run_id="0001-x", goal="g", workdir=str(tmp_path), workspace=ws)
    workspace: Any = SimpleNamespace(head="b" * 40)  # all a run's record asks of its workspace
    spec = LoopSpec(goal="g", workdir=tmp_path)
    run = RunState(spec, RunDir(tmp_path), workspace, record, EventBus(), tmp_path / "state.md")
    writer = CountingWriter(tmp_path / "run.json")
    run._writer = writer
    return run, writer


def saved(tmp_path: Path) -> tuple[int, int]:
    data = json.loads((tmp_path / "run.json").read_text())
    return data["iterations"], data["completed"]


def test_the_end_of_an_iteration_and_the_start_of_the_next_are_one_save(tmp_path: Path) -> None:
    run, writer = run_state(tmp_path)
    run.begin(1)
    assert (writer.saves, saved(tmp_path)) == (1, (1, 0))
    run.complete(1, next_iteration=2)
    assert (writer.saves, saved(tmp_path)) == (2, (2, 1))  # a runner killed now is resumed from iteration 1's end
    run.begin(2)
    assert writer.saves == 2
    run.complete(2)  # the last one: no next iteration is named
    assert (writer.saves, saved(tmp_path)) == (3, (2, 2))


def test_an_iteration_named_begun_that_does_not_start_is_not_counted(tmp_path: Path) -> None:
    run, _ = run_state(tmp_path)
    run.begin(1)
    run.complete(1, next_iteration=2)
    run.cancel.set()  # a stop arrives before iteration 2 starts
    with pytest.raises(Halt) as halt:
        run.begin(2)
    assert halt.value.reason == StopReason.STOPPED
    run.unbegin()  # as the run is finalized
    run.save()
    assert saved(tmp_path) == (1, 1)
