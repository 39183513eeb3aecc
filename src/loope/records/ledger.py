"""ledger.jsonl: one runner-owned line per attempt, and the compact view of it the next prompt carries."""

from __future__ import annotations

import json
import os
from dataclasses import field
from pathlib import Path

from loope.record import record
from loope.records.model import FileChange, LoopState, StepRecord
from loope.records.rounds import CandidateResult, Round
from loope.records.serial import from_data, to_data

RECENT = 5
DEAD_ENDS = 8


@record(frozen=True)
class GateSummary:
    """What the ledger keeps of a gate run."""

    passed: bool
    exit_code: int | None
    failures: list[str] = field(default_factory=list)
    """The failing checks' names."""


@record()
class Attempt:
    iteration: int
    summary: str
    """The first lines of the implementer's final message."""
    changed_files: list[str] = field(default_factory=list)
    diffstat: str = ""
    gate: GateSummary | None = None
    score: float | None = None
    best: float | None = None
    verdict: str = "kept"
    """kept, reverted or converged."""
    violations: list[str] = field(default_factory=list)
    reviews: dict[str, str] = field(default_factory=dict)
    cost_usd: float = 0.0
    tokens: int = 0
    duration_s: float = 0.0
    candidate: int | None = None
    """The winning candidate, when several raced (its summary, changes and checks are the ones above)."""
    candidates: list[CandidateResult] = field(default_factory=list)
    """Every candidate of the round: agent, summary, gate, score, verdict, cost, and why it won or lost."""


def attempt(
    iteration: int,
    *,
    message: str,
    changes: list[FileChange],
    gate: GateSummary | None,
    score: float | None,
    best: float | None,
    verdict: str,
    violations: list[str],
    reviews: dict[str, str],
    steps: list[StepRecord],
    raced: Round | None = None,
) -> Attempt:
    """An iteration's ledger entry: the implementer's ``message`` and ``changes``, the checks, the cost."""
    added = sum(c.added or 0 for c in changes)
    removed = sum(c.removed or 0 for c in changes)
    return Attempt(
        iteration=iteration,
        summary=summarize(message),
        changed_files=[c.path for c in changes],
        diffstat=f"{len(changes)} file(s) +{added} −{removed}" if changes else "no change",
        gate=gate,
        score=score,
        best=best,
        verdict=verdict,
        violations=violations,
        reviews=reviews,
        cost_usd=round(sum(s.cost_usd for s in steps), 6),
        tokens=sum(s.input_tokens + s.output_tokens for s in steps),
        duration_s=round(sum(s.duration_s for s in steps), 3),
        candidate=raced.winner if raced else None,
        candidates=list(raced.candidates) if raced else [],
    )


def note(loop: LoopState, iteration: int, verdict: str, message: str) -> None:
    """Carry an attempt's one-line summary (the last ten are kept) and the implementer's last words to the critic."""
    loop.summaries = [*loop.summaries, f"iteration {iteration}: {verdict} — {summarize(message)}"][-10:]
    loop.last_response = message[-1000:]


def summarize(message: str, *, lines: int = 3, chars: int = 300) -> str:
    kept = [ln.strip() for ln in message.strip().splitlines() if ln.strip()][:lines]
    text = " / ".join(kept)
    return text[:chars] + ("…" if len(text) > chars else "")


def line(attempt: Attempt) -> str:
    """``attempt`` as its ledger.jsonl line (newline included)."""
    return json.dumps(to_data(attempt), ensure_ascii=False) + "\n"


def load(path: Path) -> list[Attempt]:
    if not path.exists():
        return []
    return _parse(path.read_bytes())


def _parse(data: bytes) -> list[Attempt]:
    attempts = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            attempts.append(from_data(Attempt, found))
    return attempts


class Reader:
    """The attempts in one ledger file, each line read and parsed once however long the run goes on.

    Only what was appended since the last call is read; a file replaced (a resumed run's ledger cut
    back) or shortened is read again from its start.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._attempts: list[Attempt] = []
        self._file: tuple[int, int] | None = None
        self._read = 0

    def attempts(self) -> list[Attempt]:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            info = None
        if info is None or (info.st_dev, info.st_ino) != self._file or info.st_size < self._read:
            self._attempts, self._read = [], 0
            self._file = None if info is None else (info.st_dev, info.st_ino)
        if info is not None and info.st_size > self._read:
            with self.path.open("rb") as handle:
                handle.seek(self._read)
                data = handle.read(info.st_size - self._read)
            whole = data[: data.rfind(b"\n") + 1]  # a line still being written is read next time
            self._attempts += _parse(whole)
            self._read += len(whole)
        return list(self._attempts)


def _line(a: Attempt) -> str:
    parts = [f"iteration {a.iteration}: {a.verdict}"]
    if a.score is not None:
        parts.append(f"score {a.score:g}")
    if a.gate is not None:
        parts.append("gate passed" if a.gate.passed else "gate failed")
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
