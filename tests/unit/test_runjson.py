"""run.json saved incrementally reads back exactly as the whole record would."""

from __future__ import annotations

import json
from pathlib import Path

from loope.records.model import FileChange, RunRecord, StepRecord, WorkspaceInfo
from loope.records.runjson import RunJsonWriter


def record() -> RunRecord:
    ws = WorkspaceInfo("worktree", "/w", "loope/x", "a" * 40, "b" * 40)
    return RunRecord(run_id="0001-x", goal='say "steps": [] and\nmore', workdir="/w", workspace=ws)


def step(n: int, iteration: int) -> StepRecord:
    return StepRecord(
        id=n,
        iteration=iteration,
        role="implementer",
        adapter="exec",
        dir=f"agents/{n:02d}",
        files=[FileChange("ü.py", "modified", 1, 2)],
    )


def test_each_save_reads_back_as_the_whole_record(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    writer = RunJsonWriter(path)
    run = record()
    run.state = {"steps": [], "nested": {"steps": []}}  # the agent's frontmatter may use any key
    writer.save(run)
    assert json.loads(path.read_text()) == run.to_dict()
    for n in range(1, 6):
        run.steps.append(step(n, (n + 1) // 2))
        run.totals.add(run.steps[-1])
        run.iterations = (n + 1) // 2
        writer.save(run)
        assert json.loads(path.read_text()) == run.to_dict()


def test_steps_set_aside_are_gone_from_the_next_save(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    writer = RunJsonWriter(path)
    run = record()
    run.steps = [step(1, 1), step(2, 2), step(3, 2)]
    writer.save(run)
    run.steps = [s for s in run.steps if s.iteration <= 1] + [step(4, 2)]
    writer.save(run)
    data = json.loads(path.read_text())
    assert [s["id"] for s in data["steps"]] == [1, 4]
    assert data == run.to_dict()
    assert RunRecord.from_dict(data).steps == run.steps
