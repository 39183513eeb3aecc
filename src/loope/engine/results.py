"""What one iteration's steps produced, and what deciding and the ledger read from it."""

from __future__ import annotations

from loope.engine.decide import IterationDecision, Outcome
from loope.engine.feedback import Findings, failure_signature
from loope.engine.run import RunState
from loope.engine.steps import AgentStep
from loope.events import Decision
from loope.record import record
from loope.records import ledger
from loope.records.rounds import Round
from loope.records.state_file import State
from loope.verify.metric import Measurement
from loope.verify.report import GateReport


@record(frozen=True)
class Attempted:
    """What an iteration's implementer and checks produced: one implementer's, or a round's winner's."""

    implementer: AgentStep
    agent_state: State
    gate: GateReport | None
    measured: Measurement | None
    reviews: list[AgentStep]
    raced: Round | None = None
    notes: tuple[str, ...] = ()
    """One line per losing candidate (what it tried, why it lost), for the next prompt."""

    def results(self, iteration: int, success: GateReport | None) -> IterationResults:
        return IterationResults(
            iteration,
            self.implementer,
            self.agent_state,
            self.gate,
            self.measured,
            self.reviews,
            success,
            self.raced,
            self.notes,
        )


@record(frozen=True)
class IterationResults:
    iteration: int
    implementer: AgentStep
    agent_state: State
    """The state file as the implementer left it."""
    gate: GateReport | None
    """None when there is no verify command (or in a dry run)."""
    measured: Measurement | None
    """Metric mode, once the gate passed."""
    reviews: list[AgentStep]
    """Reviewers and the agent verifier, once the gate passed."""
    success: GateReport | None
    """The success command, when there is one."""
    raced: Round | None = None
    """How the iteration's candidates did, when several raced."""
    notes: tuple[str, ...] = ()
    """More for the next prompt (the candidates that lost, and why)."""

    @property
    def score(self) -> float | None:
        return self.measured.score if self.measured else None

    def blockers(self) -> list[tuple[str, str]]:
        """(who, findings) for each review that blocked."""
        return [(s.record.adapter, s.verdict.findings) for s in self.reviews if s.verdict and s.verdict.blocks]

    def findings(self) -> Findings:
        problem = self.agent_state.problem
        return Findings(
            iteration=self.iteration,
            gate=self.gate,
            blockers=self.blockers(),
            violations=self.implementer.record.violations + [v for s in self.reviews for v in s.record.violations],
            success=self.success,
            notes=[*([f"Note: {problem}; keep the frontmatter valid."] if problem else []), *self.notes],
        )

    def outcome(self, run: RunState, *, fresh_feedback: bool) -> Outcome:
        gate, success = self.gate, self.success
        return Outcome(
            iteration=self.iteration,
            max_iters=run.spec.max_iters,
            changed=bool(self.implementer.changes),
            gate_passed=None if gate is None else gate.passed,
            failures=failure_signature(gate.failures) if gate else (),
            has_reviewers=bool(self.reviews),
            blockers=len(self.blockers()),
            state_status=self.agent_state.status,
            success_passed=None if success is None else success.passed,
            fresh_feedback=fresh_feedback,
            score=self.score,
            best=run.record.best_score,
            metric_problem=self.measured.error if self.measured else None,
        )

    def decision_event(self, decision: IterationDecision) -> Decision:
        return Decision(
            iteration=self.iteration,
            stop=decision.stop,
            verdict=decision.verdict,
            why=decision.why,
            blockers=len(self.blockers()),
        )

    def ledger_entry(self, run: RunState, decision: IterationDecision) -> ledger.Attempt:
        gate = self.gate
        return ledger.attempt(
            self.iteration,
            message=self.implementer.result.message,
            changes=self.implementer.changes,
            gate=None
            if gate is None
            else ledger.GateSummary(gate.passed, gate.exit_code, [t for t, _ in gate.failures]),
            score=self.score,
            best=run.record.best_score,
            verdict=decision.verdict,
            violations=[*decision.findings.violations, *(self.raced.undone if self.raced else ())],
            reviews={s.record.adapter: s.record.verdict or "failed" for s in self.reviews},
            steps=[s for s in run.record.steps if s.iteration == self.iteration],
            raced=self.raced,
        )
