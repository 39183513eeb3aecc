"""The review step: reviewers and the agent verifier, in parallel and read-only, on one workspace."""

from __future__ import annotations

from loope.agents.base import Agent
from loope.agents.verdict import finding_lines
from loope.engine.prompts import PromptContext, review_inputs
from loope.engine.steps import AgentStep, StepRunner
from loope.enums import Role
from loope.events import ReviewerVerdict, ReviewFinished
from loope.verify.report import GateReport


def review(
    runner: StepRunner, agents: list[tuple[Agent, Role]], n: int, context: PromptContext, gate: GateReport | None
) -> list[AgentStep]:
    """Review what ``runner``'s workspace holds (the run's, or a candidate's); each step carries its verdict."""
    if not agents:
        return []
    runner.run.precheck()
    changes, gate_summary = review_inputs(runner.run.workspace, gate)
    prompts = [context.reviewer(changes, gate_summary, verifier=role == Role.VERIFIER) for _, role in agents]
    steps = [runner.checked(step) for step in runner.reviews(agents, n, prompts)]
    runner.run.bus.emit(ReviewFinished(iteration=n, verdicts=verdicts_of(steps)))
    return steps


def verdicts_of(steps: list[AgentStep]) -> list[ReviewerVerdict]:
    """What the reviews said, for their ``review_finished`` event: a block carries its findings."""
    return [
        ReviewerVerdict(
            s.record.id,
            s.record.adapter,
            s.record.verdict,
            s.record.verdict_inferred,
            findings=finding_lines(s.verdict.findings) if s.verdict and s.verdict.blocks else [],
        )
        for s in steps
    ]
