"""Picking a run up again after its runner died: back to the last completed iteration."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from loope.engine.cutshort import Tally
from loope.enums import WorkspaceMode
from loope.proc import kill_group, run_process
from loope.records import ledger
from loope.records.atomic import write_text
from loope.records.model import RunRecord, StepRecord, Totals, WorkspaceInfo
from loope.records.rundir import RunDir
from loope.workspace import fork
from loope.workspace.branch import drop_branch
from loope.workspace.git import safe_command, safe_env
from loope.workspace.retire import recreate
from loope.workspace.workspace import Workspace

if TYPE_CHECKING:
    from loope.engine.run import RunnerLock


def rewind(rundir: RunDir, record: RunRecord) -> Workspace:
    """Discard what came after ``record.completed`` iterations; the workspace, reset to that point.

    Processes the cut-short steps left running are killed, their directories set aside under
    ``agents/discarded/``, their ledger and score lines dropped. Their changes are lost, but not
    what they spent: their records move to ``discarded_steps`` (a step the runner died in is
    recorded from the usage it had reported) and the totals still count them.
    """
    done = record.completed
    recreate(record, rundir.root)
    workspace = reopen_workspace(record.workspace)
    workspace.mount()
    kept = [s for s in record.steps if s.iteration <= done]
    moved = _set_aside(rundir, max((s.id for s in kept), default=0))
    record.discarded_steps += _spent([s for s in record.steps if s.iteration > done], moved, rundir, record)
    workspace.reset(record.completed_head or workspace.base)
    fork.remove(workspace, rundir.root)  # a round cut short is discarded as a whole
    _truncate_ledger(rundir, done)
    record.steps = kept
    record.rounds = [r for r in record.rounds if r.iteration <= done]
    record.totals = Totals()
    for step in [*kept, *record.discarded_steps]:
        record.totals.add(step)
    record.iterations = done
    record.status, record.stop_reason, record.stop_detail, record.finished_at = "running", None, None, None
    record.converged = False
    record.elapsed_before_s = record.duration_s
    return workspace


def _spent(cut: list[StepRecord], moved: dict[str, str], rundir: RunDir, record: RunRecord) -> list[StepRecord]:
    """The records of the cut-short steps, pointing at their set-aside directories.

    A step the runner died in has no record: it gets one from the usage events it had streamed.
    """
    by_dir = {s.dir: s for s in cut}
    found = []
    for old, new in moved.items():
        step = by_dir.pop(old, None)
        if step is not None:
            found.append(replace(step, dir=new))
            continue
        events = rundir.root / new / "events.jsonl"
        number, role, adapter = [*Path(old).name.split("-", 2), "", ""][:3]
        if events.exists() and number.isdigit():
            base = StepRecord(id=int(number), iteration=record.iterations, role=role, adapter=adapter, dir=new)
            found.append(Tally.from_events(events).record(base, "the runner died during the step"))
    return found + list(by_dir.values())


def abandon(rundir: RunDir, workspace: Workspace | None, lock: RunnerLock | None) -> None:
    """Undo a run that could not start: its lock, its watcher, its branch and its directory."""
    if lock is not None:
        lock.release()
    if workspace is not None:
        workspace.stop_watching()
    discard(rundir)
    if workspace is not None and workspace.mode == "worktree" and workspace.branch:
        drop_branch(rundir.workdir, workspace.branch)


def discard(rundir: RunDir) -> None:
    """Remove a run that could not start, so nothing half-written is left behind."""
    shutil.rmtree(rundir.root, ignore_errors=True)

    run_process(safe_command("worktree", "prune"), cwd=rundir.workdir, env=safe_env(), capture=True)


def _set_aside(rundir: RunDir, last_kept: int) -> dict[str, str]:
    """Kill what the steps after ``last_kept`` left running, and move their directories to ``agents/discarded/``.

    Agents run in their own process groups, so a runner killed with SIGKILL leaves its step's
    processes behind; they must be gone before the workspace is reset, or they write into it.
    Returns each moved directory's old and new path, relative to the run dir.
    """

    moved: dict[str, str] = {}
    if not rundir.agents.is_dir():
        return moved
    target = rundir.agents / "discarded" / time.strftime("%Y%m%d-%H%M%S")
    for source in sorted(rundir.agents.iterdir()):
        number = source.name.split("-", 1)[0]
        if not (number.isdigit() and int(number) > last_kept):
            continue
        pid_file = source / "process.pid"
        if pid_file.exists() and pid_file.read_text().strip().isdigit():
            kill_group(int(pid_file.read_text()))
        target.mkdir(parents=True, exist_ok=True)
        source.rename(target / source.name)
        moved[str(source.relative_to(rundir.root))] = str((target / source.name).relative_to(rundir.root))
    return moved


def _truncate_ledger(rundir: RunDir, completed: int) -> None:
    """Drop ledger and score lines of iterations after ``completed`` (a cut-short one)."""
    path = rundir / "ledger.jsonl"
    if path.exists():
        kept = [a for a in ledger.load(path) if a.iteration <= completed]
        write_text(path, "".join(ledger.line(a) for a in kept))
    log = rundir / "score.log"
    if log.exists():
        lines = [ln for ln in log.read_text(encoding="utf-8").splitlines() if _score_iteration(ln) <= completed]
        write_text(log, "".join(f"{ln}\n" for ln in lines))


def _score_iteration(line: str) -> int:
    parts = line.split("\t")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def reopen_workspace(info: WorkspaceInfo) -> Workspace:
    return Workspace.reopen(
        mode=WorkspaceMode(info.mode),
        path=Path(info.path),
        base=info.base,
        head=info.head,
        branch=info.branch,
        git_dir=Path(info.git_dir) if info.git_dir else None,
        start=info.start,
    )
