"""What the terminal says about each event, as plain text; the live view adds colour and motion.

Every line here is drawn from a :class:`~loope.records.runview.RunView` that has already taken the event in,
so a line can say "failing 33 → 12" (the view remembers the last gate) or name the second of two
reviewers that share an adapter.
"""

from __future__ import annotations

from typing import Any

from loope.records.lanes import Lanes
from loope.records.report import files_text, landing_hints, money, outcome_line
from loope.records.runview import RETRY_TYPES, RunView, sparkline
from loope.records.viewparts import Gate

INDENT = "     "
SCREENFUL = 20
"""Files named in a line of the live view or the summary; the rest are counted."""
SHOWN_FAILURES = 3
SHOWN_OUTPUT = 5
SHOWN_FINDINGS = 3


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def tokens_text(n: int) -> str:
    return f"{n / 1_000_000:.1f}M" if n >= 1_000_000 else f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def cost_text(view: RunView) -> str:
    cap = view.budgets.get("cost_usd")
    return f"${view.cost_usd:.4f}" + (f" of ${cap:.2f}" if cap else "")


def progress_text(view: RunView, at: float | None = None) -> str:
    """``iteration 2/5 · 1m12s · $0.0123 of $1.00 · 1.2k tokens``."""
    return " · ".join(
        [
            f"iteration {view.iteration}/{view.max_iters or '?'}",
            duration(view.elapsed(at)),
            cost_text(view),
            f"{tokens_text(view.tokens)} tokens",
        ]
    )


def gate_lines(gate: Gate) -> list[str]:
    """The gate's verdict line, and why it failed: the first failing ids with their assertion, or its output."""
    head = f"[{gate.step:02d}] verifier gate" + (f" c{gate.candidate}" if gate.candidate else "")
    if gate.passed:
        was = f" (was failing {gate.previous_failing})" if gate.previous_failing else ""
        return [f"{head}  passed {gate.duration_s:.1f}s{was}"]
    status = "timed out" if gate.timed_out else f"failed (exit {gate.exit_code})"
    count = ""
    if gate.failing:
        was = f"{gate.previous_failing} → " if gate.previous_failing else ""
        count = f": failing {was}{gate.failing}"
    out = [f"{head}  {status} {gate.duration_s:.1f}s{count}"]
    if gate.summary:
        out.append(f"{INDENT}{gate.summary}")
    shown = gate.failures[:SHOWN_FAILURES]
    for failure in shown:
        message = (failure.get("message") or "").splitlines()
        out.append(f"{INDENT}✗ {failure.get('test')}" + (f" — {message[0][:160]}" if message else ""))
    more = max(gate.failing, len(gate.failures)) - len(shown)
    if shown and more > 0:
        out.append(f"{INDENT}  … and {more} more")
    if not gate.failures:
        out += [f"{INDENT}| {line[:200]}" for line in gate.output_tail[-SHOWN_OUTPUT:]]
    return out


def review_lines(view: RunView) -> list[str]:
    """Each verdict, with the first lines of each blocking finding."""
    out = []
    for review in view.reviews:
        out.append(f"{INDENT}{review.label}: {review.verdict or 'no verdict'}")
        out += [f"{INDENT}  │ {line}" for line in review.findings[:SHOWN_FINDINGS]]
    return out


def attempt_line(view: RunView, iteration: int) -> list[str]:
    """Metric mode: ``attempt 3: score 12.3, kept · best 12.3 · baseline 15 · ▇▅▃``."""
    for attempt in view.attempts:
        if attempt.iteration != iteration:
            continue
        score = f"score {attempt.score:g}" if attempt.score is not None else f"no score ({attempt.error or 'gate'})"
        parts = [f"attempt {iteration}: {score}, {attempt.verdict or '?'}"]
        best = view.best()
        if best is not None:
            parts.append(f"best {best:g}")
        if view.baseline is not None:
            parts.append(f"baseline {view.baseline:g}")
        if len(view.scores()) > 1:
            parts.append(sparkline(view.scores()))
        return [INDENT + " · ".join(parts)]
    return []


def next_command(data: dict[str, Any], run_id: str) -> str:
    """The command that makes sense after this outcome."""
    short = run_id.split("-", maxsplit=1)[0]
    reason = data.get("stop_reason")
    if data.get("changes") and (reason == "converged" or data.get("best")):
        if (data.get("workspace") or {}).get("mode") == "in-place":
            return f"next: loope show {short} --diff (the changes are already in your workdir)"
        return f"next: loope show {short} --diff, then loope apply {short}"
    if reason in ("step_failed", "timed_out", "failed"):
        return f"next: loope show {short} (the failed step: loope show {short} --step N)"
    if reason in ("max_iters", "budget_exceeded", "stalled"):
        return f"next: loope continue {short} --max-iters N (or read why: loope show {short})"
    return f"next: loope show {short}"


def summary_lines(data: dict[str, Any], run_id: str, view: RunView | None = None) -> list[str]:
    """The closing lines: outcome, time, totals, what changed, and the next command."""

    record = {**data, "run_id": run_id}
    out = [outcome_line(record)]
    totals = money(record)
    if view is not None and view.started is not None:
        totals = f"{duration(view.elapsed())} · {totals}"
    if data.get("best"):
        baseline = data.get("baseline")
        totals += f" · best score {data['best']['score']:g}" + (
            f" (baseline {baseline:g})" if baseline is not None else ""
        )
    out.append(totals)
    files = data.get("changes") or []
    short = run_id.split("-", maxsplit=1)[0]
    if files:
        out.append(f"changed: {files_text(files, limit=SCREENFUL)}")
        out += landing_hints(record, short)
    else:
        out.append("no files changed")
    note = (data.get("workspace") or {}).get("note")
    if note:
        out.append(f"workspace {note}")
    out.append(next_command(data, run_id))
    return out


def describe(event: dict[str, Any], view: RunView) -> list[str]:
    """The lines one event adds to the log, given the view that has taken it in."""
    d = event
    kind = event.get("type")
    if kind == "run_started":
        return _started(d, view)
    if kind == "iteration_started":
        return [progress_text(view, at=view.last_ts)]
    if kind == "step_finished":
        said = [f"{INDENT}» {d['summary']}"] if d.get("summary") and d.get("role") != "reviewer" else []
        return [_step_finished(d, view), *said] + [f"{INDENT}⚠ undone: {v}" for v in d.get("violations", [])]
    if kind == "verify_finished" and view.gate is not None:
        return gate_lines(view.gate)
    if kind == "review_finished":
        return review_lines(view)
    if kind == "metric" and d.get("iteration") == 0:
        if d.get("baseline") is None:
            return [f"{INDENT}no baseline: {d.get('error') or 'the original tree has no score'}"]
        return [f"{INDENT}baseline {d['baseline']:g}"]
    if kind == "decision":
        if view.metric and any(a.iteration == d.get("iteration") for a in view.attempts):
            return attempt_line(view, int(d.get("iteration") or 0))
        if d.get("stop") is None and d.get("why"):
            return [f"{INDENT}→ {d.get('why')}"]
        return []
    if kind in _OWN_LINES:
        return _OWN_LINES[str(kind)](d)
    if view.wait is not None and view.wait.get("type") == kind:
        return [INDENT + wait_text(view.wait)]
    return []


def lane_lines(lanes: Lanes, clock: float) -> list[str]:
    """A line per candidate (★ the winner, - the others once decided): ``★ c2 codex  1m05s  gate passed  score 3``."""
    out = []
    for lane in (lanes.lanes[c] for c in sorted(lanes.lanes)):
        mark = {True: "★", False: "-", None: "·"}[lane.won]
        parts = [f"{mark} c{lane.candidate} {lane.agent}"]
        if lane.started is not None:
            parts.append(duration((lane.ended or clock) - lane.started))
        parts += [x for x in (lane.gate, "" if lane.score is None else f"score {lane.score:g}") if x]
        if lane.ended is None and lane.action:
            parts.append(lane.action)
        out.append("  ".join(parts))
    return out


def critique_lines(d: dict[str, Any]) -> list[str]:
    first = (d.get("text") or "").strip().splitlines()[:1]
    return [f"{INDENT}critique: {first[0][:160]}" if first else f"{INDENT}critique given"]


def selection_lines(d: dict[str, Any]) -> list[str]:
    """``★ candidate 2 (codex) won: gate passed, 3 changed line(s)``, then a line per loser."""
    ranked = list(d.get("candidates") or [])
    winner: dict[str, Any] = next((c for c in ranked if c.get("candidate") == d.get("winner")), {})
    out = [f"{INDENT}★ candidate {d.get('winner')} ({winner.get('agent', '?')}) won: {d.get('why')}"]
    for c in ranked:
        if c.get("candidate") != d.get("winner"):
            out.append(f"{INDENT}  c{c.get('candidate')} {c.get('agent')}: {c.get('why')}")
    return out


_OWN_LINES = {"critique": critique_lines, "selection": selection_lines}
"""Events whose lines need nothing but the event."""


def wait_text(wait: dict[str, Any]) -> str:
    """``waiting out the usage limit until 2026-12-01T14:05:00Z`` / ``retry 2 in 30s: overloaded``."""
    reason = wait.get("reason") or ""
    if wait.get("type") in RETRY_TYPES:
        delay = wait.get("delay_s")
        text = f"retry {wait.get('attempt') or ''}".rstrip() + (f" in {duration(float(delay))}" if delay else "")
    else:
        until = wait.get("until") or wait.get("reset_at")
        what = str(wait.get("kind") or "usage_limit").replace("_", " ")
        text = f"waiting out the {what}" + (f" until {until}" if until else "")
    return text + (f": {reason}" if reason else "")


def _started(d: dict[str, Any], view: RunView) -> list[str]:
    ws = d.get("workspace") or {}
    where = f"{ws.get('mode')} {ws.get('path')}" + (f" (branch {ws['branch']})" if ws.get("branch") else "")
    lines = [f"loope run {view.run_id} · {where}", f"goal: {_first_line(view.goal, 200)}"]
    budgets = [f"{view.max_iters} iterations"]
    for key, fmt in (("cost_usd", "${:.2f}"), ("tokens", "{} tokens"), ("time_s", "{:.0f}s")):
        if view.budgets.get(key) is not None:
            budgets.append(fmt.format(view.budgets[key]))
    lines.append("budget: " + " · ".join(budgets))
    if d.get("resumed_at"):
        lines.append(f"resuming at iteration {d['resumed_at']}")
    if d.get("dry_run"):
        lines.append("dry run: stub agents, no commands")
    lines += [f"warning: {w}" for w in d.get("warnings", [])]
    return lines


def _first_line(text: str, limit: int) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _step_finished(d: dict[str, Any], view: RunView) -> str:
    head = view.labels.get(int(d.get("step") or 0)) or f"[{d.get('step', 0):02d}] {d.get('role')} {d.get('adapter')}"
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
        parts.append(files_text(d["files"], limit=SCREENFUL))
    elif d.get("role") in ("implementer", "designer"):
        parts.append("no changes")
    return "  ".join(parts)
