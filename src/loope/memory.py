"""Lessons: what each finished run taught, recalled by full-text search at the start of later runs."""

from __future__ import annotations

import re
from typing import Any

from loope.records import ledger
from loope.records.model import RunRecord, now_iso
from loope.records.rundir import RunDir
from loope.store.db import Store

_WORD = re.compile(r"[A-Za-z0-9_]{3,}")
_STOP = frozenset(
    {"the", "and", "for", "with", "that", "this", "from", "into", "make", "makes", "should", "must", "when", "then"}
)


MIN_SHARED = 2
"""Meaningful words a lesson's goal (or the files it changed) must share with a new goal to be recalled."""


def meaningful_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def fts_query(text: str, *, words: int = 12) -> str:
    """An FTS5 query matching any of the meaningful words of ``text``."""
    seen: list[str] = []
    for word in _WORD.findall(text.lower()):
        if word not in _STOP and word not in seen:
            seen.append(word)
    return " OR ".join(f'"{w}"' for w in seen[:words])


def lesson_of(record: RunRecord, rundir: RunDir) -> dict[str, Any]:
    attempts = ledger.load(rundir / "ledger.jsonl")
    failed = []
    for a in attempts:
        if a.gate and not a.gate.passed:
            failed.append(f"iteration {a.iteration}: gate failed ({', '.join(a.gate.failures[:3])})")
        blocks = [who for who, v in a.reviews.items() if v == "BLOCK"]
        if blocks:
            failed.append(f"iteration {a.iteration}: blocked by {', '.join(blocks)}")
        if a.verdict == "reverted":
            failed.append(f"iteration {a.iteration}: reverted — {a.summary}")
    if record.stop_reason not in ("converged",) and record.stop_detail:
        failed.append(f"stopped: {record.stop_detail}")
    worked = [f"iteration {a.iteration}: {a.summary}" for a in attempts if _passed(a)]
    files = record.changes.files
    diffstat = ", ".join(f"{f.path} +{f.added or 0} −{f.removed or 0}" for f in files)
    return {
        "run_id": record.run_id,
        "goal": record.goal,
        "outcome": "converged" if record.converged else f"not converged ({record.stop_reason})",
        "stop_reason": record.stop_reason or "",
        "iterations": record.iterations,
        "failed": "\n".join(failed[-8:]),
        "worked": "\n".join(worked[-5:]),
        "diffstat": diffstat or "no changes",
        "created_at": now_iso(),
    }


def _passed(attempt: ledger.Attempt) -> bool:
    """An attempt that taught what works: kept, its gate passed (when there was one), no reviewer blocked."""
    gate_ok = attempt.gate is None or attempt.gate.passed
    return attempt.verdict in ("kept", "converged") and gate_ok and "BLOCK" not in attempt.reviews.values()


def render(lessons: list[dict[str, Any]]) -> str:
    out = []
    for lesson in lessons:
        out.append(
            f"- Run {lesson['run_id']} ({lesson['outcome']} after {lesson['iterations']} iteration(s)): "
            f"{lesson['goal'][:200]}"
        )
        if lesson.get("shared"):
            out.append(f"  Recalled because both goals are about: {', '.join(lesson['shared'])}")
        if lesson.get("failed"):
            out.append("  What failed: " + lesson["failed"].replace("\n", "; ")[:500])
        if lesson.get("worked"):
            out.append("  What worked: " + lesson["worked"].replace("\n", "; ")[:500])
        out.append(f"  Changed: {lesson['diffstat'][:300]}")
    return "\n".join(out)


class Lessons:
    """The engine's memory service, on the project's store."""

    def __init__(self, store: Store, *, limit: int = 3) -> None:
        self.store = store
        self.limit = limit

    def recall(self, goal: str, *, exclude: str | None = None) -> str:
        """The lessons that really match ``goal``: full-text candidates sharing enough meaningful words with it."""
        wanted = meaningful_words(goal)
        found = []
        for lesson in self.store.search_lessons(fts_query(goal), exclude=exclude, limit=self.limit * 8):
            shared = wanted & (meaningful_words(lesson["goal"]) | meaningful_words(lesson.get("diffstat") or ""))
            if wanted and len(shared) >= min(MIN_SHARED, len(wanted)):
                found.append({**lesson, "shared": sorted(shared)})
        found.sort(key=lambda lesson: -len(lesson["shared"]))  # stable: the search's rank breaks ties
        return render(found[: self.limit])

    def remember(self, record: RunRecord, rundir: RunDir) -> None:
        self.store.add_lesson(lesson_of(record, rundir))
