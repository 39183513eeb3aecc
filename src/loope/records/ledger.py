"""ledger.jsonl: one runner-owned line per attempt, and the compact view of it the next prompt carries."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loope.records.atomic import append_line

RECENT = 5
DEAD_ENDS = 8


@dataclass
class Attempt:
    iteration: int
    summary: str
    """The first lines of the implementer's final message."""
    changed_files: list[str] = field(default_factory=list)
    diffstat: str = ""
    gate: dict[str, Any] | None = None
    """passed, exit_code, failures[]"""
    score: float | None = None
    best: float | None = None
    verdict: str = "kept"
    """kept, reverted or converged."""
    violations: list[str] = field(default_factory=list)
    reviews: dict[str, str] = field(default_factory=dict)
    cost_usd: float = 0.0
    tokens: int = 0
    duration_s: float = 0.0


def summarize(message: str, *, lines: int = 3, chars: int = 300) -> str:
    kept = [ln.strip() for ln in message.strip().splitlines() if ln.strip()][:lines]
    text = " / ".join(kept)
    return text[:chars] + ("…" if len(text) > chars else "")


def append(path: Path, attempt: Attempt) -> str:
    """Append ``attempt``; the line written (the runner keeps it to detect tampering)."""
    line = json.dumps(asdict(attempt), ensure_ascii=False)
    append_line(path, line)
    return line


def load(path: Path) -> list[Attempt]:
    if not path.exists():
        return []
    attempts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            names = Attempt.__dataclass_fields__
            attempts.append(Attempt(**{k: v for k, v in data.items() if k in names}))
    return attempts


def _line(a: Attempt) -> str:
    parts = [f"iteration {a.iteration}: {a.verdict}"]
    if a.score is not None:
        parts.append(f"score {a.score:g}")
    if a.gate is not None:
        parts.append("gate passed" if a.gate.get("passed") else "gate failed")
    if a.diffstat:
        parts.append(a.diffstat)
    if a.violations:
        parts.append(f"{len(a.violations)} violation(s) undone")
    head = ", ".join(parts)
    return f"- {head} — {a.summary or '(no summary)'}"


def compact(attempts: list[Attempt], *, best: float | None = None, metric: bool = False) -> str:
    """The best so far, the last few attempts, and the dead ends not to retry."""
    if not attempts:
        return ""
    out: list[str] = []
    if metric:
        out.append(f"Best score so far: {best:g}" if best is not None else "No passing score yet.")
    out.append("Recent attempts (newest last):")
    out += [_line(a) for a in attempts[-RECENT:]]
    dead = [a for a in attempts[:-RECENT] if a.verdict == "reverted"][-DEAD_ENDS:]
    if dead:
        out.append("Dead ends (reverted; do not retry these ideas):")
        out += [_line(a) for a in dead]
    return "\n".join(out)
