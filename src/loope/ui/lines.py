"""What the terminal shows for each engine event, as plain text; the views add colour and motion."""

from __future__ import annotations

from loope.agents.base import AgentEvent
from loope.events import (
    AgentStepFinished,
    BaselineMeasured,
    Critique,
    Decision,
    Event,
    IterationStarted,
    MetricStepFinished,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    SuccessFinished,
    VerifyFinished,
)
from loope.records.report import files_text
from loope.records.serial import to_data

ICONS = {"edit": "✎", "write": "✎", "read": "◦", "command": "▸", "search": "⌕", "other": "·"}


def step_label(event: StepStarted | StepFinished) -> str:
    return f"[{event.step:02d}] {event.role} {event.adapter}"


def action_text(event: AgentEvent) -> str | None:
    """``✎ edit src/x.py``, ``▸ run pytest -q``; None for events the view does not show."""
    if event.kind != "action":
        return None
    action = event.action or "other"
    verb = "run" if action == "command" else action
    target = event.target or ""
    return f"{ICONS.get(action, '·')} {verb} {target}".rstrip()


SCREENFUL = 20
"""Files named in a line of the live view or the summary; the rest are counted."""


def summary_lines(event: RunFinished) -> list[str]:
    """The closing lines: outcome, totals, and how to review and land the result."""
    from loope.records.report import landing_hints, money, outcome_line

    record = event.to_dict()
    out = [outcome_line(record)]
    totals = f"{money(record)}"
    if event.best:
        totals += f" · best score {event.best.score:g} (baseline {event.baseline})"
    out.append(totals)
    short = event.run_id.split("-", maxsplit=1)[0]
    if event.changes:
        out.append(f"changed: {files_text(record['changes'], limit=SCREENFUL)}")
        out += landing_hints(record, short)
    else:
        out.append(f"no files changed · details: loope show {short}")
    return out


def describe(event: Event) -> list[str]:
    """The lines one event adds to the log (not counting the live region)."""
    match event:
        case RunStarted():
            return _run_started(event)
        case IterationStarted():
            return [f"iteration {event.iteration}/{event.max_iters}"]
        case StepFinished():
            return [_step_finished(event)] + [f"     ⚠ {v}" for v in event.violations]
        case VerifyFinished():
            return [_verify_finished(event)]
        case BaselineMeasured():
            if event.baseline is None:
                return [f"     no baseline: {event.error or 'the original tree has no score'}"]
            return [f"     baseline {event.baseline:g}"]
        case Decision(verdict="reverted"):
            return [f"     reverted: {event.why}"]
        case Critique():
            first = (event.text or "").strip().splitlines()[:1]
            return [f"     critique: {first[0][:160]}" if first else "     critique given"]
    return []


def _run_started(event: RunStarted) -> list[str]:
    ws = event.workspace
    where = f"{ws.mode} {ws.path}" + (f" (branch {ws.branch})" if ws.branch else "")
    lines = [f"loope run {event.run_id} · {where}"]
    if event.resumed_at:
        lines.append(f"resuming at iteration {event.resumed_at}")
    if event.dry_run:
        lines.append("dry run: stub agents, no commands")
    lines += [f"warning: {w}" for w in event.warnings]
    return lines


def _step_finished(event: StepFinished) -> str:
    head = step_label(event)
    if isinstance(event, SuccessFinished):
        return f"{head}  {'passed' if event.passed else 'failed'} {event.duration_s:.1f}s"
    if isinstance(event, MetricStepFinished):
        score = f"score {event.score:g}" if event.score is not None else f"no score: {event.error}"
        return f"{head}  {score} {event.duration_s:.1f}s"
    if not event.ok:
        return f"{head}  failed {event.duration_s:.1f}s: {event.error}"
    parts = [f"{head}  ok {event.duration_s:.1f}s"]
    if isinstance(event, AgentStepFinished) and event.verdict:
        parts.append(event.verdict + (" (inferred)" if event.verdict_inferred else ""))
    if event.cost_usd:
        parts.append(f"${event.cost_usd:.4f}")
    if event.files:
        parts.append(files_text(to_data(event.files), limit=SCREENFUL))
    elif event.role in ("implementer", "designer"):
        parts.append("no changes")
    return "  ".join(parts)


def _verify_finished(event: VerifyFinished) -> str:
    head = f"[{event.step:02d}] verifier gate"
    if event.passed:
        return f"{head}  passed {event.duration_s:.1f}s"
    status = "timed out" if event.timed_out else f"failed (exit {event.exit_code})"
    detail = ""
    if event.failures:
        detail = f": {len(event.failures)} failing, first {event.failures[0].test}"
    return f"{head}  {status} {event.duration_s:.1f}s{detail}"
