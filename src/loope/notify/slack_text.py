"""What the Slack messages say: pure functions from a run's facts to text and Block Kit blocks."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from loope.events import Budgets

BAR_CELLS = 10
CHUNK_CHARS = 3000
"""Slack shows long messages collapsed, and a section block holds at most 3,000 characters."""
STOP_ACTION = "loope_stop"

# A reaction on the run's message says where it stands at a glance.
STARTING = "hourglass"
RUNNING = "arrows_counterclockwise"
OUTCOMES: dict[str, tuple[str, str]] = {
    # stop reason: (reaction, label)
    "converged": ("white_check_mark", "Converged"),
    "stopped": ("octagonal_sign", "Stopped"),
    "budget_exceeded": ("warning", "Budget exceeded"),
    "failed": ("x", "Failed"),
    "step_failed": ("x", "A step failed"),
    "timed_out": ("alarm_clock", "Timed out"),
    "max_iters": ("heavy_minus_sign", "Out of iterations"),
    "stalled": ("heavy_minus_sign", "Stalled"),
}
UNKNOWN_OUTCOME = ("grey_question", "Finished")


@dataclass(frozen=True)
class Progress:
    """Where a run stands, as the progress line shows it."""

    iteration: int
    max_iters: int
    cost_usd: float
    max_cost_usd: float | None
    status: str


def escape(text: str) -> str:
    """Slack's three control characters, escaped (everything else is shown as written)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def excerpt(text: str, limit: int = 300) -> str:
    """The first ``limit`` characters of ``text`` with whitespace runs folded, ``…`` when cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def bar(done: int, total: int) -> str:
    """``[████░░░░░░]``: ``done`` of ``total`` in ten cells."""
    filled = min(BAR_CELLS, max(0, int(BAR_CELLS * done / total + 0.5))) if total > 0 else 0
    return "[" + "█" * filled + "░" * (BAR_CELLS - filled) + "]"


def progress_line(p: Progress) -> str:
    """``[████░░░░░░] 4/10 · $1.20/$5.00 · in-progress``."""
    cost = f"${p.cost_usd:.2f}" + (f"/${p.max_cost_usd:.2f}" if p.max_cost_usd is not None else "")
    return f"{bar(p.iteration, p.max_iters)} {p.iteration}/{p.max_iters} · {cost} · {p.status}"


def budget_line(max_iters: int, budgets: Budgets) -> str:
    """``budget: 10 iterations · $5.00 · 30m · 200000 tokens`` (only the limits that are set)."""
    parts = [f"{max_iters} iteration{'s' if max_iters != 1 else ''}"]
    if budgets.cost_usd is not None:
        parts.append(f"${budgets.cost_usd:.2f}")
    if budgets.time_s is not None:
        parts.append(_duration(budgets.time_s))
    if budgets.tokens is not None:
        parts.append(f"{budgets.tokens} tokens")
    return "budget: " + " · ".join(parts)


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def outcome(reason: str) -> tuple[str, str]:
    """(reaction, label) for a stop reason."""
    return OUTCOMES.get(reason, UNKNOWN_OUTCOME)


def outcome_line(reason: str, detail: str | None, iterations: int) -> str:
    """``:white_check_mark: Converged after 2 iterations — …``."""
    reaction, label = outcome(reason)
    line = f":{reaction}: {label} after {iterations} iteration{'s' if iterations != 1 else ''}"
    return line + (f" — {escape(excerpt(detail, 500))}" if detail else "")


def chunks(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, cut at line ends where there is one."""
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > size:
        cut = rest.rfind("\n", 0, size + 1)
        if cut <= 0:
            cut = size
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip("\n")
    if rest:
        pieces.append(rest)
    return pieces


def stop_value(workdir: str, run_id: str) -> str:
    """The Stop button's value: which run, in which project (``loope slack-listen`` reads it)."""
    return json.dumps({"workdir": workdir, "run_id": run_id}, separators=(",", ":"))


@dataclass(frozen=True)
class Message:
    """The run's one Slack message: its fallback text and its blocks."""

    text: str
    blocks: list[dict[str, Any]]


def run_message(
    *,
    run_id: str,
    goal: str,
    budget: str,
    status_line: str,
    stop: str | None,
) -> Message:
    """The run's message: header, goal, budget, where it stands; a Stop button while it runs."""
    header = f"loope run `{run_id}`"
    goal_text = escape(excerpt(goal))
    text = "\n".join([header, goal_text, budget, status_line])
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{header}*\n>{goal_text}"}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": budget}]},
        {"type": "section", "text": {"type": "mrkdwn", "text": status_line}},
    ]
    if stop is not None:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": STOP_ACTION,
                        "style": "danger",
                        "text": {"type": "plain_text", "text": "Stop"},
                        "value": stop,
                        "confirm": {
                            "title": {"type": "plain_text", "text": "Stop this run?"},
                            "text": {"type": "plain_text", "text": "It stops before its next step."},
                            "confirm": {"type": "plain_text", "text": "Stop"},
                            "deny": {"type": "plain_text", "text": "Keep going"},
                        },
                    }
                ],
            }
        )
    return Message(text, blocks)
