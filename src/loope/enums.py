"""The closed sets of loope's vocabulary (DESIGN.md), each defined once.

Each is a ``StrEnum``: a member is its string, so run.json, events.jsonl, the ledger and the CLI
keep the plain strings they always carried, and comparing with a string still works.
"""

from __future__ import annotations

from enum import StrEnum


class StopReason(StrEnum):
    """Why a run stopped (run.json ``stop_reason``; a finished run's ``status``)."""

    CONVERGED = "converged"
    MAX_ITERS = "max_iters"
    BUDGET_EXCEEDED = "budget_exceeded"
    USAGE_LIMITED = "usage_limited"
    STALLED = "stalled"
    STEP_FAILED = "step_failed"
    TIMED_OUT = "timed_out"
    STOPPED = "stopped"
    FAILED = "failed"


class Direction(StrEnum):
    """Which way a metric improves."""

    LOWER = "lower"
    HIGHER = "higher"


class WorkspaceMode(StrEnum):
    """How agents get a tree to edit."""

    WORKTREE = "worktree"
    COPY = "copy"
    IN_PLACE = "in-place"
    OVERLAY = "overlay"
    AUTO = "auto"
    """An overlay where one works on this machine, else the default (never recorded: the mode chosen is)."""


class SandboxMode(StrEnum):
    """``--sandbox``: bubblewrap around every step where it works, always (or refuse), or never."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"


class Switch(StrEnum):
    ON = "on"
    OFF = "off"


class Role(StrEnum):
    """What an agent step is for."""

    DESIGNER = "designer"
    IMPLEMENTER = "implementer"
    REVIEWER = "reviewer"
    VERIFIER = "verifier"
    CRITIC = "critic"


class ReviewVerdict(StrEnum):
    """A reviewer's ``VERDICT:`` line."""

    PASS = "PASS"
    BLOCK = "BLOCK"


class AttemptVerdict(StrEnum):
    """What the loop did with an attempt (the ledger's ``verdict``)."""

    KEPT = "kept"
    REVERTED = "reverted"
    CONVERGED = "converged"


class StepKind(StrEnum):
    """The command steps a verifier runs; their ``adapter`` in step records and events."""

    GATE = "gate"
    METRIC = "metric"
    SUCCESS = "success"
