"""Setting a run up: a new one (run dir, workspace, first record) or one picked up again, and its start event."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from loope.engine.resume import abandon
from loope.engine.roster import Agents
from loope.engine.run import RunnerLock, RunState
from loope.engine.segments import MoreBudget, extend
from loope.errors import LoopeError
from loope.events import Budgets, RunStarted, SandboxInfo
from loope.records.atomic import write_text
from loope.records.model import MetricSettings, RunRecord, WorkspaceInfo
from loope.records.rundir import RunDir
from loope.records.space import Reserve, disk_full, full_disk_detail
from loope.sandbox import Choice
from loope.spec import LoopSpec
from loope.workspace.guard import Guard
from loope.workspace.workspace import Workspace

RUNNER_FILES = ("ledger.jsonl", "score.log", "best", "design-contract.md")
"""Run-dir files only the runner writes; the guard restores them if anything else does."""


def lock(rundir: RunDir, reserve: Reserve, passed_fd: int | None = None) -> RunnerLock:
    """The run's runner lock, taken (or adopted from ``passed_fd``), and its disk reserve held under it.

    A LoopeError when another process holds the lock. The reserve is held before anything of the
    run is written, so a disk too full for it leaves nothing behind.
    """
    held = RunnerLock(rundir / "runner.lock")
    if not (passed_fd is not None and held.adopt(passed_fd)) and not held.acquire():
        raise LoopeError(
            f"run {rundir.run_id} is being run by another process (pid {held.holder()});"
            f" stop it first with `loope stop {rundir.run_id}`"
        )
    try:
        reserve.hold()
    except BaseException:
        held.release()
        raise
    return held


@contextlib.contextmanager
def nothing_left_on_failure(
    rundir: RunDir, parts: Callable[[], tuple[RunState | None, RunnerLock | None]]
) -> Iterator[None]:
    """Undo a run that could not start (lock, watcher, branch, directory); a full disk says so on one line."""
    try:
        yield
    except BaseException as exc:
        run, held = parts()
        abandon(rundir, run.workspace if run else None, held)
        if disk_full(exc):
            raise LoopeError(full_disk_detail(exc)) from None
        raise


def create(spec: LoopSpec, rundir: RunDir, reserve: Reserve) -> tuple[Workspace, RunRecord, RunnerLock]:
    """A new run's workspace and first record, with spec.json saved and the run dir locked."""
    held = lock(rundir, reserve)
    try:
        write_text(rundir / "spec.json", spec.model_dump_json(indent=2) + "\n")
        workspace = Workspace.create(
            spec.workdir, rundir.root, rundir.run_id, spec.workspace, spec.branch, keep=spec.keep_workspace
        )
    except BaseException:
        held.release()
        raise
    return workspace, first_record(spec, rundir, workspace), held


def first_record(spec: LoopSpec, rundir: RunDir, workspace: Workspace) -> RunRecord:
    return RunRecord(
        run_id=rundir.run_id,
        goal=spec.goal,
        workdir=str(spec.workdir),
        workspace=WorkspaceInfo(
            workspace.mode,
            str(workspace.path),
            workspace.branch,
            workspace.base,
            workspace.head,
            str(workspace.git_dir) if workspace.git_dir else None,
            start=workspace.start,
        ),
        max_iters=spec.max_iters,
        implementer=spec.implementer,
        reviewers=list(spec.reviewers),
        verify_cmd=spec.verify_cmd,
        metric=MetricSettings(spec.metric_cmd, spec.direction, spec.target) if spec.metric_cmd else None,
        completed_head=workspace.base,
    )


def lock_to_resume(
    rundir: RunDir,
    spec: LoopSpec,
    reserve: Reserve,
    *,
    more: MoreBudget | None,
    on_locked: Callable[[], None] | None,
    lock_fd: int | None,
) -> tuple[LoopSpec, RunRecord, RunnerLock]:
    """The run's lock, its record as read under it, and the spec it goes on with (extended by ``more``).

    Without ``more`` (``loope resume``), only a run whose runner died (still ``running``) may be
    picked up; the record is read again once the lock is held, since a runner that held it may have
    moved the run on. ``on_locked`` runs once the lock is held, before anything watches the run;
    ``lock_fd`` is the lock, held and passed on by the process that prepared the run (``run --detach``).
    """
    if more is None:
        refuse_finished(rundir.record())
    held = lock(rundir, reserve, lock_fd)
    try:
        record = rundir.record()
        if more is None:
            refuse_finished(record)
        else:
            spec = extend(rundir, record, spec, more)
            if on_locked is not None:
                on_locked()
    except BaseException:
        held.release()
        raise
    return spec, record, held


def refuse_finished(record: RunRecord) -> None:
    """A finished run is continued (``loope continue``), not resumed."""
    if record.status != "running":
        more_flag = " --goal TEXT" if record.status == "converged" else ""
        raise LoopeError(
            f"run {record.run_id} already finished ({record.status}); go on with `loope continue"
            f" {record.run_id}{more_flag}`, or start a new one with `loope run`"
        )


def guard_for(run: RunState) -> Guard:
    """The run's guard, with spec.json and the runner-owned files sealed as they are now."""
    rundir = run.rundir
    guard = _guard(run, user_repo=run.workspace.user_repo(run.spec.workdir), run_id=rundir.run_id, run_dir=rundir.root)
    run.record.protected_scripts = guard.scripts
    guard.seal(rundir / "spec.json", (rundir / "spec.json").read_bytes())
    for name in RUNNER_FILES:
        path = rundir / name
        guard.seal(path, path.read_bytes() if path.exists() else None)
    return guard


def candidate_guard(run: RunState, owner: Guard) -> Guard:
    """A candidate's guard: its own tree's rules; the git dirs and run dir are watched by the run's guard."""
    return _guard(run, watch_outside=False, run_dir_guard=owner.run_dir)


def _guard(run: RunState, **where: Any) -> Guard:
    spec = run.spec
    return Guard(
        run.workspace,
        protect=spec.protect,
        editable=spec.editable,
        commands=[spec.verify_cmd],
        metric=spec.metric_cmd,
        state_file=run.state_file,
        gate=spec.verify_cmd or spec.metric_cmd,
        scripts=run.record.protected_scripts,
        **where,
    )


def read_contract(rundir: RunDir) -> str | None:
    contract = rundir / "design-contract.md"
    return contract.read_text(encoding="utf-8") if contract.exists() else None


def started_event(run: RunState, guard: Guard, agents: Agents, sandbox: Choice) -> RunStarted:
    spec, record = run.spec, run.record
    warnings = []
    if spec.editable or spec.protect:
        tracked = run.workspace.tracked_files()
        warnings = [f"--editable/--protect {p!r} matches no file" for p in guard.patterns_matching_nothing(tracked)]
    if sandbox.warning:
        warnings.append(sandbox.warning)
    if run.workspace.note:
        warnings.append(run.workspace.note)
    if agents.candidates and not sandbox.enabled:
        warnings.append(
            "candidates are not isolated from each other without the sandbox: one can read another's tree, and"
            " write it while both run (a change after a candidate's agent ended is undone); use --sandbox on"
        )
    if spec.max_cost is not None and (blind := agents.cost_blind()):
        warnings.append(f"--max-cost cannot see what {', '.join(blind)} spend (their CLIs report no cost)")
    return RunStarted(
        goal=spec.goal,
        workdir=str(spec.workdir),
        run_dir=str(run.rundir.root),
        state_file=str(run.state_file),
        success_cmd=spec.success_cmd,
        pid=record.pid,
        started_at=record.started_at,
        workspace=replace(record.workspace),
        implementer=spec.implementer,
        reviewers=list(spec.reviewers),
        verify_cmd=spec.verify_cmd,
        metric_cmd=spec.metric_cmd,
        max_iters=spec.max_iters,
        budgets=Budgets(spec.max_cost, spec.max_tokens, spec.max_time),
        dry_run=spec.dry_run,
        sandbox=SandboxInfo(sandbox.enabled, spec.sandbox, spec.sandbox_network),
        warnings=warnings,
        resumed_at=record.completed + 1 if record.completed else None,
    )
