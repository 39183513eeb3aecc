"""What a step's record says elsewhere: the fields its ``step_finished`` event shares, its commit message, its
adapter's name, and what tells apart agents that share an adapter (two exec reviewers, N candidates)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from loope.records.model import FileChange, StepRecord

if TYPE_CHECKING:
    from loope.agents.base import Agent
    from loope.enums import Role


class StepFields(TypedDict):
    step: int
    iteration: int
    role: str
    adapter: str
    ok: bool
    error: str | None
    duration_s: float
    cost_usd: float
    input_tokens: int
    output_tokens: int
    files: list[FileChange]
    violations: list[str]
    candidate: int | None


def finished_fields(record: StepRecord, changes: list[FileChange] | None = None) -> StepFields:
    """The fields every ``step_finished`` event shares, from the step's saved record."""
    return {
        "step": record.id,
        "iteration": record.iteration,
        "role": record.role,
        "adapter": record.adapter,
        "ok": record.ok,
        "error": record.error,
        "duration_s": record.duration_s,
        "cost_usd": record.cost_usd,
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "files": list(changes or []),
        "violations": list(record.violations),
        "candidate": record.candidate,
    }


def commit_message(text: str, fallback: str, trailers: str = "") -> str:
    """A commit message from an agent's final message: its first line as the subject, a few more as the body.

    ``trailers`` (``Key: value`` lines) end it, after a blank line.
    """
    lines = [line.rstrip() for line in text.strip().splitlines()]
    lines = [line.lstrip("#* ").rstrip() if i == 0 else line for i, line in enumerate(lines)]
    if not lines or not lines[0]:
        message = fallback
    else:
        subject = lines[0] if len(lines[0]) <= 72 else lines[0][:71].rstrip() + "…"
        body = "\n".join(lines[1:12]).strip()
        message = f"{subject}\n\n{body}" if body else subject
    return f"{message}\n\n{trailers}" if trailers else message


def repeat_indexes(agents: list[tuple[Agent, Role]]) -> list[int | None]:
    """1, 2, … for agents whose role and adapter repeat in ``agents``; None for the others."""
    keys = [(role, agent.label) for agent, role in agents]
    return [keys[: i + 1].count(key) if keys.count(key) > 1 else None for i, key in enumerate(keys)]


def adapter_name(agent: Agent) -> str:
    return f"{agent.label}:{agent.model}" if agent.model else agent.label


def candidate_env(candidate: int | None, count: int) -> dict[str, str]:
    """What an agent of candidate ``candidate`` (of ``count``) is told in its environment (nothing outside a race)."""
    return {} if candidate is None else {"LOOPE_CANDIDATE": str(candidate), "LOOPE_CANDIDATES": str(count)}
