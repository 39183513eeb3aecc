"""The end of a run: its final record, diff and event, its lesson, and the process's exit code."""

from __future__ import annotations

from dataclasses import replace

from loope.engine.roster import Memory
from loope.engine.run import RunState
from loope.enums import StopReason
from loope.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, LoopeError
from loope.events import RunFinished
from loope.records.atomic import append_line, write_bytes, write_text
from loope.records.model import Changes, FileChange, RunRecord, now_iso
from loope.records.space import append_quietly, disk_full, full_disk_detail
from loope.spec import LoopSpec
from loope.termination import Terminated
from loope.workspace.branch import publish_run
from loope.workspace.retire import retire
from loope.workspace.run_branch import publish_overlay


def finalize(run: RunState, reason: StopReason, detail: str) -> RunFinished:
    """Record the stop, the cumulative diff and the changed files; the run_finished event to send."""
    record = run.record
    record.stop_reason = record.status = reason
    record.stop_detail = detail
    record.converged = reason == StopReason.CONVERGED
    record.finished_at = now_iso()
    changes: list[FileChange] = []
    finished = False  # the final diff is written: the worktree may go
    try:
        final = run.workspace.compare()
        changes = final.changes
        record.changes = Changes(list(changes))
        write_bytes(run.rundir / "changes.diff", final.patch)
        write_text(run.rundir / "changed-files.txt", "".join(f"{c.path}\n" for c in changes))
        finished = True
    except (LoopeError, OSError) as exc:
        record.stop_detail = f"{detail}; the final diff could not be computed: {exc}"
        if disk_full(exc) and reason != StopReason.FAILED:
            record.status = record.stop_reason = StopReason.FAILED
            record.stop_detail = f"{full_disk_detail(exc, ' while finalizing')}; before that: {reason}: {detail}"
    try:
        # An overlay's objects are copied: only once its records are safe (a full disk keeps them first).
        overlay_kept = publish_overlay(record, run.rundir.root) if finished else None
        if kept := publish_run(run.workspace, record.run_id) or overlay_kept:
            record.stop_detail = f"{record.stop_detail}; {kept}"
    except (LoopeError, OSError) as exc:
        record.stop_detail = f"{record.stop_detail}; the run's branch could not be updated: {exc}"
    if finished:  # the result is on the run branch and in the run dir now
        retired = retire(run.workspace, run.rundir.root, keep=run.spec.keep_workspace)
        record.workspace.removed, record.workspace.note = retired.removed, retired.note
    run.save_if_possible()
    return RunFinished(
        status=record.status,
        stop_reason=record.stop_reason,
        stop_detail=record.stop_detail,
        converged=record.converged,
        iterations=record.iterations,
        totals=replace(record.totals),
        best=record.best,
        baseline=record.baseline,
        changes=changes,
        workspace=replace(record.workspace),
    )


def recall(memory: Memory, run: RunState) -> str:
    """Lessons from earlier runs for this goal; '' when the memory cannot answer (best effort)."""
    try:
        return memory.recall(run.spec.goal, exclude=run.record.run_id)
    except Exception as exc:  # noqa: BLE001 - memory is best effort; the run goes on without it
        append_line(run.rundir / "observer-errors.log", f"{now_iso()} recall failed: {exc!r}")
        return ""


def remember(memory: Memory, run: RunState) -> None:
    """Keep the run's lesson; a lesson that cannot be stored is logged and never changes the run."""
    try:
        memory.remember(run.record, run.rundir)
    except Exception as exc:  # noqa: BLE001 - a lesson that cannot be stored never changes the run
        append_quietly(run.rundir / "observer-errors.log", f"{now_iso()} remember failed: {exc!r}")


def exit_code(record: RunRecord, spec: LoopSpec, interrupted: KeyboardInterrupt | None, bad_input: bool) -> int:
    """0 when converged (or a metric run kept an improvement), 130 after Ctrl-C (143 / 129 after SIGTERM /
    SIGHUP), 2 for bad input, else 1."""
    if isinstance(interrupted, Terminated):
        return interrupted.exit_code
    if interrupted:
        return EXIT_INTERRUPTED
    if bad_input:
        return EXIT_USAGE
    if record.converged:
        return EXIT_OK
    if spec.metric_mode and record.best is not None and record.best.iteration > 0:
        return EXIT_OK
    return EXIT_FAILED
