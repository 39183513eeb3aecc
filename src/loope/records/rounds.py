"""An iteration raced by several candidates: how each one did and which one won (run.json ``rounds``)."""

from __future__ import annotations

from dataclasses import field

from loope.record import record


@record(frozen=True)
class CandidateResult:
    """One candidate of a round, as the selection saw it."""

    candidate: int
    """1…N within the iteration."""
    agent: str
    step: int
    """The candidate's implementer step."""
    ok: bool
    """The implementer step ended well (a timeout or crash disqualifies the candidate)."""
    gate_passed: bool | None
    failing: int | None
    """Failing checks of its gate (0 when it passed; None when none could be counted)."""
    score: float | None
    violations: int
    """Changes the guard undid (a candidate that broke a rule is ranked below every one that did not)."""
    diff_lines: int
    """Lines added and removed by its change."""
    verdict: str | None
    """``pass`` or ``block`` when reviewers looked at it, else None."""
    cost_usd: float
    summary: str
    """The first line of its final message."""
    commit: str | None
    """Its change's commit, kept under ``ref``; None when it changed nothing."""
    ref: str | None
    rank: int
    """1 for the winner."""
    why: str
    """Why it won, or why it lost to the winner."""


@record(frozen=True)
class Round:
    iteration: int
    winner: int
    why: str
    candidates: list[CandidateResult] = field(default_factory=list)
    undone: list[str] = field(default_factory=list)
    """What loope undid outside each candidate's own tree during the round (also in the ledger's ``violations``)."""
    isolated: bool = True
    """Each candidate's steps were sandboxed from the others' work (False: no sandbox, see ``workspace/late.py``)."""
