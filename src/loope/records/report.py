"""report.md: the run's outcome for people, rendered from run.json."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import groupby
from typing import Any


def outcome_line(run: Mapping[str, Any]) -> str:
    """``converged in 2 iterations`` / ``stopped after 3 iterations (max_iters)`` / ``running``."""
    n = run.get("iterations", 0)
    its = f"{n} iteration{'s' if n != 1 else ''}"
    reason = run.get("stop_reason")
    if reason is None:
        return f"running (iteration {n} of {run.get('max_iters', '?')})"
    if reason == "converged":
        why = f": {run['stop_detail']}" if n == 0 and run.get("stop_detail") else ""
        return f"converged in {its}{why}"
    if reason in ("step_failed", "timed_out", "failed"):
        return f"halted after {its} ({reason}): {run.get('stop_detail') or ''}".rstrip(": ")
    return f"stopped after {its} ({reason})"


def failing_trend(run: Mapping[str, Any]) -> str | None:
    """``33 failing at the start → 5 → 0``: the gate's failing checks, from the baseline on (None without one)."""
    base = run.get("gate_baseline")
    if not isinstance(base, dict):
        return None
    counts = [s.get("failing") for s in run.get("steps", []) if s.get("adapter") == "gate"]
    shown = ["?" if n is None else str(n) for n in counts]
    start = base.get("failing") if not base.get("passed") else 0
    return " → ".join([f"{start if start or base.get('passed') else '?'} failing at the start", *shown])


def money(run: Mapping[str, Any]) -> str:
    totals = run.get("totals", {})
    cost = f"${totals.get('cost_usd', 0):.4f}"
    notes = ["estimated"] if totals.get("cost_estimated") else []
    if totals.get("cost_unknown_steps"):
        notes.append(f"at least: cost unknown for {totals['cost_unknown_steps']} step(s)")
    if notes:
        cost += f" ({'; '.join(notes)})"
    return f"{cost}, {totals.get('input_tokens', 0)} tokens in / {totals.get('output_tokens', 0)} out"


def files_text(files: list[Mapping[str, Any]], limit: int | None = None) -> str:
    """``calc.py +1 −1, logo.png binary``: the files of a step or a run with their line counts.

    With ``limit``, at most that many files are named and the rest counted (``… and 1980 more``).
    """
    shown = files if limit is None else files[:limit]
    parts = []
    for f in shown:
        stat = "binary" if f.get("added") is None else f"+{f['added']} −{f['removed']}"
        parts.append(f"{f['path']} {stat}")
    if len(files) > len(shown):
        parts.append(f"… and {len(files) - len(shown)} more")
    return ", ".join(parts)


def _result(step: Mapping[str, Any]) -> str:
    if step.get("error") and not step.get("ok", True):
        return f"failed: {step['error']}"
    if step.get("gate_passed") is not None:
        return "passed" if step["gate_passed"] else "failed"
    if step.get("adapter") == "metric":
        return f"score {step['score']:g}" if step.get("score") is not None else f"no score: {step.get('error')}"
    return "ok"


def render(run: Mapping[str, Any]) -> str:
    """The whole report as markdown."""
    ws = run.get("workspace", {})
    lines = [
        f"# loope run {run['run_id']}",
        "",
        f"**Outcome:** {outcome_line(run)}",
        f"**Goal:** {run['goal']}",
        f"**Stop reason:** {run.get('stop_reason') or 'running'}"
        + (f" — {run['stop_detail']}" if run.get("stop_detail") else ""),
        f"**Cost:** {money(run)}; {run.get('duration_s', 0):.1f}s",
        f"**Workspace:** {ws.get('mode')} at `{ws.get('path')}`"
        + (" (removed when the run ended)" if ws.get("removed") else "")
        + (f", branch `{ws['branch']}`" if ws.get("branch") else "")
        + f", base {str(ws.get('base', ''))[:10]}",
    ]
    trend = failing_trend(run)
    if trend:
        lines.append(f"**Failing checks:** {trend}")
    if run.get("best"):
        best = run["best"]
        lines.append(
            f"**Best score:** {best['score']:g} (iteration {best['iteration']}; baseline {run.get('baseline')})"
        )
    steps = run.get("steps", [])
    for iteration, grouped in groupby(steps, key=lambda s: s["iteration"]):
        group = list(grouped)
        if iteration == 0:
            title = "Design" if any(s["role"] == "designer" for s in group) else "Baseline"
        else:
            title = f"Iteration {iteration}"
        lines += ["", f"## {title}", "", "| step | role | agent | result | verdict | time | cost | changes |"]
        lines.append("|---|---|---|---|---|---|---|---|")
        for s in group:
            verdict = (s.get("verdict") or "") + (" (inferred)" if s.get("verdict_inferred") else "")
            lines.append(
                f"| {s['id']:02d} | {s['role']} | {s['adapter']} | {_result(s)} | {verdict} | {s['duration_s']:.1f}s"
                f" | ${s.get('cost_usd', 0):.4f} | {files_text(s.get('files', []))} |"
            )
            lines += [f"|  |  |  | ⚠ {v} |  |  |  |  |" for v in s.get("violations", [])]
        lines += round_lines(run, iteration)
    files = run.get("changes", {}).get("files", [])
    lines += ["", "## Changes", ""]
    if files:
        lines += ["| file | status | + | − |", "|---|---|---|---|"]
        lines += [f"| {f['path']} | {f['status']} | {f.get('added', '-')} | {f.get('removed', '-')} |" for f in files]
    else:
        lines.append("No files changed.")
    lines += ["", "## Next", "", *next_steps(run)]
    return "\n".join(lines) + "\n"


NOT_ISOLATED = (
    "candidates were not isolated from each other (no sandbox): one could read another's tree, and write it while"
    " both ran; a change made after a candidate's agent ended was undone"
)


def round_lines(run: Mapping[str, Any], iteration: int) -> list[str]:
    """An iteration's candidates, best first: who won and why each other one lost (none without a race)."""
    found = next((r for r in run.get("rounds") or [] if r.get("iteration") == iteration), None)
    if found is None:
        return []
    lines = ["", f"Candidates (winner: {found['winner']}, {found.get('why')}):", ""]
    if found.get("isolated") is False:
        lines[-1:] = ["", NOT_ISOLATED, ""]
    lines += ["| rank | candidate | agent | gate | score | lines | cost | why |", "|---|---|---|---|---|---|---|---|"]
    for c in found.get("candidates") or []:
        gate = {True: "passed", False: "failed", None: "-"}[c.get("gate_passed")]
        score = "-" if c.get("score") is None else f"{c['score']:g}"
        why = str(c.get("why", "")).replace("|", "\\|")
        lines.append(
            f"| {c['rank']} | {iteration}.{c['candidate']} | {c['agent']} | {gate} | {score} | {c.get('diff_lines', 0)}"
            f" | ${c.get('cost_usd', 0):.4f} | {why} |"
        )
    return lines


def landing_hints(run: Mapping[str, Any], ref: str) -> list[str]:
    """How to review and land a finished run's change; a run that did not converge says so first."""
    ws = run.get("workspace") or {}
    out = []
    if run.get("stop_reason") != "converged":
        out.append(f"not converged ({run.get('stop_reason')}): review the change before you land it")
    out.append(f"review: loope show {ref} --diff")
    if ws.get("mode") == "in-place":
        out.append("land:   nothing to do, the run changed the workdir in place")
    else:
        out.append(f"land:   loope apply {ref}   (one commit on your branch: loope apply {ref} --commit)")
    return out


def next_steps(run: Mapping[str, Any]) -> list[str]:
    """How to review and land the run's result."""
    if run.get("stop_reason") is None or not run.get("changes", {}).get("files"):
        return [f"- details: `loope show {run['run_id']}`"]
    return [f"- {line}" for line in landing_hints(run, run["run_id"])]
