"""Continuing a finished run: more budget on top of what it spent, the same workspace, branch and memory.

``loope continue`` and ``loope resume`` share the engine's resume path (back to the last completed
iteration); continuing first gives the run its next segment: the budgets are added to what was
spent, the goal may change, and run.json's ``segments`` records each one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from loope.errors import LoopeError
from loope.record import record
from loope.records.atomic import write_text
from loope.records.model import RunRecord, Segment, now_iso
from loope.records.rundir import RunDir
from loope.spec import LoopSpec, validate


@record(frozen=True)
class MoreBudget:
    """What ``loope continue`` adds; an unset budget gets as much again as the run's first segment had."""

    max_iters: int | None = None
    max_cost: float | None = None
    max_time: float | None = None
    goal: str | None = None
    keep_patience: bool = False
    """Carry the stall streak over (a fleet on Temporal drives a run one single-iteration segment at a time)."""


_DONE = re.compile(r"^(status:\s*)['\"]?done['\"]?[ \t]*$", re.M | re.I)


def extend(rundir: RunDir, record: RunRecord, spec: LoopSpec, more: MoreBudget) -> LoopSpec:
    """The next segment's spec (saved as spec.json); the record says it is one more segment.

    Called with the run's lock held, so a run still marked running is one whose runner died.
    """
    run_id = record.run_id
    if record.status == "converged" and not (more.goal and more.goal.strip()):
        raise LoopeError(f"run {run_id} already converged; continue it toward a new goal with --goal TEXT")
    if not record.segments:
        record.segments.append(_segment(record, spec, 1))
    first = record.segments[0]
    record.segments[-1].stop_reason = record.stop_reason
    record.segments[-1].stop_detail = record.stop_detail
    data: dict[str, Any] = spec.model_dump()
    data["max_iters"] = record.completed + (more.max_iters or first.max_iters)
    data["max_cost"] = _added(record.totals.cost_usd, more.max_cost, first.max_cost)
    data["max_time"] = _added(record.duration_s, more.max_time, first.max_time)
    if more.goal and more.goal.strip():
        data["goal"] = more.goal
    new = validate(data)
    write_text(rundir / "spec.json", new.model_dump_json(indent=2) + "\n")
    record.segments.append(_segment(record, new, record.completed + 1))
    record.goal, record.max_iters = new.goal, new.max_iters
    # A new segment gets fresh patience: the streak that stalled the last one starts again from zero.
    if not more.keep_patience:
        record.loop.streak = record.loop.idle = 0
    return new


def reopen_state(path: Path) -> None:
    """A state file that said ``done`` says ``in-progress`` again (the run goes on toward a new goal)."""
    if path.exists():
        text = path.read_text(encoding="utf-8")
        if _DONE.search(text):
            write_text(path, _DONE.sub(r"\1in-progress", text, count=1))


def _added(spent: float, more: float | None, first: float | None) -> float | None:
    amount = more if more is not None else first
    return None if amount is None else round(spent + amount, 6)


def _segment(record: RunRecord, spec: LoopSpec, first_iteration: int) -> Segment:
    """The segment that starts at ``first_iteration`` under ``spec``, with the budgets it adds."""
    first = first_iteration == 1
    cost_before = 0.0 if first else record.totals.cost_usd
    time_before = 0.0 if first else record.duration_s
    return Segment(
        started_at=record.started_at if first else now_iso(),
        first_iteration=first_iteration,
        max_iters=spec.max_iters - (first_iteration - 1),
        max_cost=None if spec.max_cost is None else round(spec.max_cost - cost_before, 6),
        max_time=None if spec.max_time is None else round(spec.max_time - time_before, 3),
        goal=spec.goal,
    )
