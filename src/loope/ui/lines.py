"""What the terminal shows for each engine event, as plain text; the views add colour and motion."""

from __future__ import annotations

from typing import Any

from loope.engine.events import Event
from loope.records.report import files_text

ICONS = {"edit": "✎", "write": "✎", "read": "◦", "command": "▸", "search": "⌕", "other": "·"}


def step_label(data: dict[str, Any]) -> str:
    return f"[{data['step']:02d}] {data['role']} {data['adapter']}"


def action_text(event: dict[str, Any]) -> str | None:
    """``✎ edit src/x.py``, ``▸ run pytest -q``; None for events the view does not show."""
    if event.get("kind") != "action":
        return None
    action = event.get("action", "other")
    verb = "run" if action == "command" else action
    target = event.get("target") or ""
    return f"{ICONS.get(action, '·')} {verb} {target}".rstrip()


def summary_lines(data: dict[str, Any], run_id: str) -> list[str]:
    """The closing lines: outcome, totals, and how to review and land the result."""
    from loope.records.report import money, outcome_line

    record = {**data, "run_id": run_id}
    out = [outcome_line(record)]
    totals = f"{money(record)}"
    if data.get("best"):
        totals += f" · best score {data['best']['score']:g} (baseline {data.get('baseline')})"
    out.append(totals)
    files = data.get("changes") or []
    short = run_id.split("-", maxsplit=1)[0]
    if files:
        out.append(f"changed: {files_text(files)}")
        out.append(f"review: loope show {short} --diff")
        land = f"land:   loope apply {short}"
        branch = (data.get("workspace") or {}).get("branch")
        if branch:
            land += f"   (or: git merge {branch})"
        out.append(land)
    else:
        out.append(f"no files changed · details: loope show {short}")
    return out


def describe(event: Event) -> list[str]:
    """The lines one event adds to the log (not counting the live region)."""
    d = event.data
    kind = event.type
    if kind == "run_started":
        ws = d["workspace"]
        where = f"{ws['mode']} {ws['path']}" + (f" (branch {ws['branch']})" if ws.get("branch") else "")
        lines = [f"loope run {event.run_id} · {where}"]
        if d.get("resumed_at"):
            lines.append(f"resuming at iteration {d['resumed_at']}")
        if d.get("dry_run"):
            lines.append("dry run: stub agents, no commands")
        lines += [f"warning: {w}" for w in d.get("warnings", [])]
        return lines
    if kind == "iteration_started":
        return [f"iteration {d['iteration']}/{d['max_iters']}"]
    if kind == "step_finished":
        return [_step_finished(d)] + [f"     ⚠ {v}" for v in d.get("violations", [])]
    if kind == "verify_finished":
        return [_verify_finished(d)]
    if kind == "metric" and d.get("iteration") == 0:
        if d.get("baseline") is None:
            return [f"     no baseline: {d.get('error') or 'the original tree has no score'}"]
        return [f"     baseline {d['baseline']:g}"]
    if kind == "decision" and d.get("verdict") in ("reverted",):
        return [f"     reverted: {d.get('why')}"]
    if kind == "critique":
        first = (d.get("text") or "").strip().splitlines()[:1]
        return [f"     critique: {first[0][:160]}" if first else "     critique given"]
    return []


def _step_finished(d: dict[str, Any]) -> str:
    head = step_label(d)
    if d.get("adapter") == "success":
        return f"{head}  {'passed' if d.get('passed') else 'failed'} {d['duration_s']:.1f}s"
    if d.get("adapter") == "metric":
        score = f"score {d['score']:g}" if d.get("score") is not None else f"no score: {d.get('error')}"
        return f"{head}  {score} {d['duration_s']:.1f}s"
    if not d.get("ok"):
        return f"{head}  failed {d['duration_s']:.1f}s: {d.get('error')}"
    parts = [f"{head}  ok {d['duration_s']:.1f}s"]
    if d.get("verdict"):
        parts.append(d["verdict"] + (" (inferred)" if d.get("verdict_inferred") else ""))
    if d.get("cost_usd"):
        parts.append(f"${d['cost_usd']:.4f}")
    if d.get("files"):
        parts.append(files_text(d["files"]))
    elif d.get("role") in ("implementer", "designer"):
        parts.append("no changes")
    return "  ".join(parts)


def _verify_finished(d: dict[str, Any]) -> str:
    head = f"[{d['step']:02d}] verifier gate"
    if d.get("passed"):
        return f"{head}  passed {d['duration_s']:.1f}s"
    status = "timed out" if d.get("timed_out") else f"failed (exit {d.get('exit_code')})"
    failures = d.get("failures") or []
    detail = ""
    if failures:
        first = failures[0]["test"]
        detail = f": {len(failures)} failing, first {first}"
    return f"{head}  {status} {d['duration_s']:.1f}s{detail}"
