"""What each action of the ``loop`` tool does, as plain functions returning JSON-ready dicts.

No MCP here: the server module wraps these; they are the same run control the CLI uses
(``loope.control``, the run directory, ``loope.workspace.apply``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loope.errors import LoopeError
from loope.mcp.request import LoopRequest

LIST_LIMIT = 50
DIFF_LIMIT = 200_000
"""Characters of diff returned by ``show``: enough for a review, not a flood for the caller's context."""


def handle(request: LoopRequest, project: Path) -> dict[str, Any]:
    """Carry out ``request`` for the project the server serves; a LoopeError says what is wrong."""
    workdir = _workdir(request.workspace, project)
    if request.action == "start":
        return start(request, workdir)
    if request.action == "list":
        return list_loops(workdir, include_finished=request.include_finished)
    assert request.loop_id is not None  # the request model requires it for the other actions
    if request.action == "status":
        return status(workdir, request.loop_id)
    if request.action == "stop":
        return stop(workdir, request.loop_id, now=request.now)
    if request.action == "show":
        return show(workdir, request.loop_id, diff=request.diff)
    return apply(workdir, request.loop_id, delete=request.delete, force=request.force, dry_run=request.dry_run)


def _workdir(workspace: str | None, project: Path) -> Path:
    if workspace is None:
        return project
    path = Path(workspace).expanduser()
    path = path if path.is_absolute() else project / path
    if not path.is_dir():
        raise LoopeError(f"workspace {path} does not exist or is not a directory; give an existing project directory")
    return path.resolve()


# -- start --------------------------------------------------------------------------------------


def start(request: LoopRequest, workdir: Path) -> dict[str, Any]:
    """Build the spec (defaults < loope.toml < these values) and drive the loop in the background."""
    from loope.control import start_detached
    from loope.spec import build_spec

    given = request.model_fields_set
    flags: dict[str, Any] = {
        "goal": request.goal,
        "implementer": request.implementer,
        # An MCP caller names its reviewers; none by default, whatever loope.toml says.
        "reviewers": list(request.reviewers or []),
        "critic": request.critic,
        "checkpoint_every": request.checkpoint_interval,
        "verify_cmd": request.verify_command,
        "metric_cmd": request.metric_command,
        "direction": request.direction,
        "success_cmd": request.success_command,
        "notify": list(request.notify) if request.notify else None,
    }
    if request.max_tick_duration_minutes is not None:
        flags["timeout"] = request.max_tick_duration_minutes * 60
    if "max_iterations" in given:
        flags["max_iters"] = request.max_iterations
    if "max_cost_usd" in given:
        flags["max_cost"] = request.max_cost_usd
    # The tool's own defaults sit beneath the project's loope.toml; values the caller gave win.
    defaults = {
        "max_iters": LoopRequest.model_fields["max_iterations"].default,
        "max_cost": LoopRequest.model_fields["max_cost_usd"].default,
    }
    spec = build_spec(flags, workdir, defaults=defaults)
    loop_id = start_detached(spec)
    return {
        "loop_id": loop_id,
        "status": "running",
        "workspace": str(spec.workdir),
        "max_iterations": spec.max_iters,
        "max_cost_usd": spec.max_cost,
        "implementer": spec.implementer,
        "reviewers": list(spec.reviewers),
    }


# -- status, stop, list -------------------------------------------------------------------------


def status(workdir: Path, ref: str) -> dict[str, Any]:
    """The loop's record, its runner and its state file (the first lines of it)."""
    from loope.control import run_status
    from loope.records.rundir import find_run

    return dict(run_status(workdir, find_run(workdir, ref).run_id))


def stop(workdir: Path, ref: str, *, now: bool) -> dict[str, Any]:
    """Ask the loop to stop before its next step (``now``: kill the step in flight too)."""
    from loope.control import stop_run
    from loope.records.rundir import find_run

    rundir = find_run(workdir, ref)
    requested, detail = stop_run(workdir, rundir.run_id, now=now)
    status = rundir.read_json("run.json").get("status")
    return {"stop_requested": requested, "loop_id": rundir.run_id, "status": status, "detail": detail}


def list_loops(workdir: Path, *, include_finished: bool) -> dict[str, Any]:
    """Running loops, newest first; with ``include_finished``, the most recent loops whatever their status."""
    from loope.records.rundir import list_runs

    loops = []
    for rundir in reversed(list_runs(workdir)):
        try:
            record = rundir.read_json("run.json")
        except (OSError, ValueError):
            continue  # a run directory still being created, or left half-written by a crash
        if record.get("status") != "running" and not include_finished:
            continue
        loops.append(_summary_line(record))
        if len(loops) == LIST_LIMIT:
            break
    return {"count": len(loops), "loops": loops}


def _summary_line(record: dict[str, Any]) -> dict[str, Any]:
    from loope.runners import effective_status

    status = effective_status(record)
    totals = record.get("totals", {})
    return {
        "id": record.get("run_id"),
        "goal": str(record.get("goal", ""))[:200],
        "status": status,
        "stop_reason": record.get("stop_reason"),
        "iteration": record.get("iterations", 0),
        "max_iterations": record.get("max_iters"),
        "cost_usd": totals.get("cost_usd", 0.0),
        "started_at": record.get("started_at"),
        "finished_at": record.get("finished_at"),
    }


# -- show, apply --------------------------------------------------------------------------------

_SUMMARY_KEYS = (
    "run_id",
    "goal",
    "status",
    "converged",
    "iterations",
    "max_iters",
    "stop_reason",
    "stop_detail",
    "started_at",
    "finished_at",
    "duration_s",
    "implementer",
    "reviewers",
    "verify_cmd",
    "workspace",
    "totals",
    "best",
    "changes",
)


def show(workdir: Path, ref: str, *, diff: bool) -> dict[str, Any]:
    """The loop's report (markdown), the gist of its run.json, and optionally its cumulative diff."""
    from loope.records.report import render
    from loope.records.rundir import find_run

    rundir = find_run(workdir, ref)
    record = rundir.read_json("run.json")
    result: dict[str, Any] = {
        "loop_id": rundir.run_id,
        "report": render(record),
        "run": {key: record.get(key) for key in _SUMMARY_KEYS},
    }
    if diff:
        text = _diff(rundir.root, record)
        result["diff_truncated"] = len(text) > DIFF_LIMIT
        result["diff"] = text[:DIFF_LIMIT]
    return result


def _diff(root: Path, record: dict[str, Any]) -> str:
    path = root / "changes.diff"
    if record.get("status") != "running" and path.exists():
        return path.read_text(encoding="utf-8", errors="replace")
    from loope.engine.resume import reopen_workspace
    from loope.records.model import RunRecord

    return reopen_workspace(RunRecord.from_dict(record).workspace).diff()


def apply(workdir: Path, ref: str, *, delete: bool, force: bool, dry_run: bool) -> dict[str, Any]:
    """Land a finished loop's changes in its workdir, with the safety of ``loope apply``."""
    from loope.records.model import RunRecord
    from loope.records.rundir import find_run
    from loope.workspace import apply as landing

    rundir = find_run(workdir, ref)
    record = RunRecord.from_dict(rundir.read_json("run.json"))
    if record.status == "running":
        raise LoopeError(f"loop {record.run_id} is still running; wait for it to finish or stop it first")
    target = Path(record.workdir)
    if not target.is_dir():
        raise LoopeError(f"the loop's workdir {target} no longer exists; nothing to apply to")
    git, planned = landing.plan_run(record, target, delete=delete, force=force)
    plan = [
        {"path": p.path, "action": p.action, "note": p.note or None, "conflict": p.conflict, "line": p.line()}
        for p in planned
    ]
    result: dict[str, Any] = {"loop_id": record.run_id, "target": str(target), "plan": plan, "applied": False}
    conflicts = [p for p in planned if p.conflict]
    if not planned:
        result["detail"] = "the loop changed no files; nothing to apply"
    elif conflicts:
        result["detail"] = (
            f"{len(conflicts)} file(s) changed in {target} since the loop started ({conflicts[0].path} first);"
            " nothing was applied; pass force=true to overwrite them"
        )
    elif dry_run:
        result["detail"] = "dry run: nothing was written"
    else:
        landing.apply(git, target, planned)
        written = sum(1 for p in planned if p.action in ("add", "update", "delete"))
        result.update(applied=True, files_written=written, detail=f"applied {written} file(s) to {target}")
    return result


def as_text(result: dict[str, Any]) -> str:
    """The result as the tool's text content: indented JSON."""
    return json.dumps(result, indent=2, ensure_ascii=False, default=str)
