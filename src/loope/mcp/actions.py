"""What each loope MCP tool does, as plain functions returning compact, JSON-ready dicts.

No MCP here: the server module wraps these; they are the same run control the CLI uses
(``loope.control``, the run directory, ``loope.workspace.apply``). Results carry what a model
needs to decide its next call, not every path a human might want (``loope_show`` has those).
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from loope.control import run_status, start_detached, stop_run
from loope.engine.resume import reopen_workspace
from loope.errors import LoopeError
from loope.mcp.request import DEFAULT_MAX_COST_USD, DEFAULT_MAX_ITERATIONS, StartArgs
from loope.records.report import render
from loope.records.rundir import RUNS, RunDir, find_run, list_runs
from loope.records.state_file import section
from loope.runners import effective_status
from loope.workspace import apply as landing

LIST_LIMIT = 50
RECENT_S = 24 * 3600
"""A plain ``loope_list`` shows the loops that finished within this long, beside the running ones."""
RECENT_LIMIT = 10
FLEET_LIMIT = 10
"""Fleets ``loope_list`` reports, the most recent first."""
DIFF_LIMIT = 200_000
"""Characters of diff returned by ``loope_show``: enough for a review, not a flood for the caller's context."""
STATE_CHARS = 600
"""Characters of each state-file section ``loope_status`` quotes."""


def workdir_for(workspace: str | None, project: Path) -> Path:
    """The project a call is about: its ``workspace``, else the one this server serves."""
    if workspace is None:
        return project
    path = Path(workspace).expanduser()
    path = path if path.is_absolute() else project / path
    if not path.is_dir():
        raise LoopeError(f"workspace {path} does not exist or is not a directory; give an existing project directory")
    return path.resolve()


def find(workdir: Path, ref: str) -> RunDir:
    """The loop ``ref`` names, with errors that point at the tools rather than the CLI."""

    return find_run(workdir, ref, start_hint="start one with loope_start", list_hint="loope_list gives the ids")


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without its empty values: a model reads every key it is sent."""
    return {key: value for key, value in data.items() if value not in (None, "", [], {}, False)}


# -- start --------------------------------------------------------------------------------------


def start(args: StartArgs, workdir: Path) -> dict[str, Any]:
    """Build the spec (defaults < loope.toml < these values) and drive the loop in the background."""
    from loope.spec import build_spec

    given = args.model_fields_set
    flags: dict[str, Any] = {
        "goal": args.goal,
        "implementer": list(args.implementers) if args.implementers else args.implementer,
        "candidates": args.candidates,
        # An MCP caller names its reviewers; none by default, whatever loope.toml says.
        "reviewers": list(args.reviewers or []),
        "critic": args.critic,
        "checkpoint_every": args.checkpoint_interval,
        "verify_cmd": args.verify_command,
        "metric_cmd": args.metric_command,
        "direction": args.direction,
        "success_cmd": args.success_command,
        "notify": list(args.notify) if args.notify else None,
    }
    if args.max_tick_duration_minutes is not None:
        flags["timeout"] = args.max_tick_duration_minutes * 60
    if "max_iterations" in given:
        flags["max_iters"] = args.max_iterations
    if "max_cost_usd" in given:
        flags["max_cost"] = args.max_cost_usd
    # The tool's own defaults sit beneath the project's loope.toml; values the caller gave win.
    defaults = {"max_iters": DEFAULT_MAX_ITERATIONS, "max_cost": DEFAULT_MAX_COST_USD}
    spec = build_spec(flags, workdir, defaults=defaults)
    loop_id = start_detached(spec)
    return {
        "loop_id": loop_id,
        "status": "running",
        "max_iterations": spec.max_iters,
        "max_cost_usd": spec.max_cost,
        "implementer": spec.implementer,
        "candidates": spec.candidate_agents,
        "reviewers": list(spec.reviewers),
        "verify_command": spec.verify_cmd,
        "next": f"loope_status with loop_id={loop_id!r} and wait_s to wait for it",
    }


# -- status, stop, list -------------------------------------------------------------------------


def progress(workdir: Path, run_id: str) -> tuple[str, int]:
    """What ``loope_status wait_s`` watches: the loop's status and how many iterations it finished."""

    root = workdir / RUNS / run_id
    try:
        record = json.loads((root / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ("running", -1)  # being rewritten this instant; the next look will read it
    try:
        with (root / "ledger.jsonl").open("rb") as ledger:  # one line per finished iteration
            finished = sum(1 for _ in ledger)
    except FileNotFoundError:
        finished = 0
    return effective_status(record, root), finished


def status(workdir: Path, run_id: str) -> dict[str, Any]:
    """Where the loop is, its budgets, and (while it runs) what the agent's state file says it does next."""

    full = run_status(workdir, run_id)
    loop = full["loop"]
    running = loop["status"] == "running"
    result: dict[str, Any] = {
        "loop_id": run_id,
        "status": loop["status"],
        "stop_reason": loop["stop_reason"],
        "stop_detail": None if running else loop["stop_detail"],
        "iteration": loop["iteration"],
        "max_iterations": loop["max_iterations"],
        "cost_usd": round(float(loop["cost_usd"] or 0), 4),
        "max_cost_usd": loop["max_cost_usd"],
        "last_error": loop["last_error"] if loop["last_error"] != loop["stop_detail"] else None,
        "stop_requested": running and loop["stop_requested"],
    }
    result.update(_agent_state(full, running=running))
    result["next"] = _next(run_id, loop["status"])
    return _compact(result)


def _agent_state(full: dict[str, Any], *, running: bool) -> dict[str, Any]:
    """The state file's view, where it cannot contradict the run's own status.

    While the loop runs, the agent's claims (``done``, ``blocked``) are what it says about the
    work in flight. Once the loop finished, its status is the truth and the frontmatter is left
    out; a blocked agent's notes still say why it stopped. An untouched template says nothing.
    """

    front = full["frontmatter"]
    text = full["state_excerpt"]
    if not text or (not front.get("iteration") and section(text, "progress") == "(nothing yet)"):
        return {}
    said = str(front.get("status", "")).strip().lower()
    if not running:
        return {"agent_notes": section(text, "notes")[:STATE_CHARS]} if said == "blocked" else {}
    return {
        "agent_says": {
            "status": said or None,
            "progress": section(text, "progress")[:STATE_CHARS],
            "next_action": section(text, "next action")[:STATE_CHARS],
        }
    }


def _next(run_id: str, status: str) -> str:
    if status == "running":
        return "loope_status with wait_s waits for it; loope_stop ends it"
    if status == "dead":
        return "its runner died; `loope resume` in the project continues it"
    return f"loope_show for the report, loope_apply to land its changes (loop_id={run_id!r})"


def stop(workdir: Path, ref: str, *, now: bool) -> dict[str, Any]:
    """Ask the loop to stop before its next step (``now``: kill the step in flight too)."""

    rundir = find(workdir, ref)
    requested, detail = stop_run(workdir, rundir.run_id, now=now)
    status = rundir.read_json("run.json").get("status")
    return {"stop_requested": requested, "loop_id": rundir.run_id, "status": status, "detail": detail}


def list_loops(workdir: Path, *, every: bool) -> dict[str, Any]:
    """Running loops and those finished in the last day, newest first; ``every``: the 50 most recent."""

    loops: list[dict[str, Any]] = []
    finished = 0
    for rundir in reversed(list_runs(workdir)):
        try:
            record = rundir.read_json("run.json")
        except (OSError, ValueError) as exc:  # damaged, or a run directory still being created
            if every:
                loops.append({"id": rundir.run_id, "status": "damaged", "damaged": str(exc)})
            continue
        if not every and record.get("status") != "running":
            if finished == RECENT_LIMIT or not _recent(record.get("finished_at")):
                continue
            finished += 1
        loops.append(_summary_line(record, rundir.root))
        if len(loops) == LIST_LIMIT:
            break
    fleets = _fleets(workdir)
    return {"count": len(loops), "loops": loops, **({"fleets": fleets} if fleets else {})}


def _fleets(workdir: Path) -> list[dict[str, Any]]:
    from loope.fleet.pool import recent_fleets  # loads the store (sqlite), only for the fleets

    return [
        {**fleet, "loops": [_compact({k: v for k, v in loop.items() if k != "workdir"}) for loop in fleet["loops"]]}
        for fleet in recent_fleets(workdir, FLEET_LIMIT)
    ]


def _recent(stamp: Any) -> bool:
    try:
        finished = datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return False
    return time.time() - finished <= RECENT_S


def _summary_line(record: dict[str, Any], run_root: Path) -> dict[str, Any]:

    totals = record.get("totals", {})
    return _compact(
        {
            "loop_id": record.get("run_id"),
            "status": effective_status(record, run_root),
            "stop_reason": record.get("stop_reason"),
            "iteration": record.get("iterations", 0),
            "cost_usd": round(float(totals.get("cost_usd") or 0), 4),
            "goal": str(record.get("goal", ""))[:120],
            "finished_at": record.get("finished_at"),
        }
    )


# -- show, apply --------------------------------------------------------------------------------

_SUMMARY_KEYS = (
    "status",
    "converged",
    "iterations",
    "max_iters",
    "stop_reason",
    "stop_detail",
    "duration_s",
    "implementer",
    "reviewers",
    "verify_cmd",
    "totals",
    "best",
    "changes",
    "rounds",
)


def show(workdir: Path, ref: str, *, diff: bool) -> dict[str, Any]:
    """The loop's report (markdown), the gist of its run.json, and optionally its cumulative diff."""

    rundir = find(workdir, ref)
    record = rundir.read_json("run.json")
    result: dict[str, Any] = {
        "loop_id": rundir.run_id,
        "run_dir": str(rundir.root),
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

    return reopen_workspace(RunDir(root).record().workspace).diff()


def apply(workdir: Path, ref: str, *, delete: bool, force: bool, dry_run: bool) -> dict[str, Any]:
    """Land a finished loop's changes in its workdir, with the safety of ``loope apply``."""

    rundir = find(workdir, ref)
    record = rundir.record()
    if record.status == "running":
        raise LoopeError(
            f"loop {record.run_id} is still running; wait for it with loope_status wait_s, or end it with loope_stop"
        )
    target = Path(record.workdir)
    if not target.is_dir():
        raise LoopeError(f"the loop's workdir {target} no longer exists; nothing to apply to")
    git, planned = landing.plan_run(record, target, delete=delete, force=force)
    plan = [_compact({"path": p.path, "action": p.action, "note": p.note, "conflict": p.conflict}) for p in planned]
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
    """The result as the tool's text content: JSON on one line (a model reads it as well, in fewer tokens)."""
    return json.dumps(result, ensure_ascii=False, default=str)
