"""Metric mode: score each attempt, keep an improvement, revert anything else to the best kept state."""

from __future__ import annotations

from loope.engine import decide as decisions
from loope.engine.run import Halt, RunState
from loope.engine.steps import StepRunner
from loope.enums import StopReason
from loope.events import AttemptScored, BaselineMeasured
from loope.records.model import Best, now_iso
from loope.spec import parse_min_improvement
from loope.verify.metric import Measurement
from loope.workspace.guard import Guard


class MetricSearch:
    """Metric mode's steps and the runner-owned files they write (best, score.log)."""

    def __init__(self, run: RunState, steps: StepRunner, guard: Guard) -> None:
        self.run = run
        self.steps = steps
        self.guard = guard

    def rules(self) -> decisions.MetricRules:
        spec = self.run.spec
        assert spec.direction is not None
        return decisions.MetricRules(
            spec.direction, spec.target, parse_min_improvement(spec.min_improvement or "0"), spec.patience
        )

    def baseline(self) -> None:
        """Score the original tree; it is the baseline when it passes the gate and yields a number."""
        run, spec = self.run, self.run.spec
        assert spec.metric_cmd is not None
        assert spec.direction is not None
        self.run.loop.best_commit = run.workspace.base
        if spec.verify_cmd:
            _, gate = self.steps.gate(0, spec.verify_cmd)
            if not gate.passed:
                error = "the original tree fails the gate"
                run.bus.emit(BaselineMeasured(iteration=0, score=None, baseline=None, error=error))
                return
        result = self.steps.metric(0, spec.metric_cmd)
        if result.score is not None:
            run.record.baseline = result.score
            self._set_best(result.score, 0)
        run.bus.emit(BaselineMeasured(iteration=0, score=result.score, baseline=result.score, error=result.error))
        if decisions.reached(result.score, spec.target, spec.direction):
            raise Halt(StopReason.CONVERGED, f"the original tree already reaches the target {spec.target:g}")

    def score(self, n: int) -> Measurement:
        """Score attempt ``n``."""
        run = self.run
        assert run.spec.metric_cmd is not None
        run.precheck()
        result = self.steps.metric(n, run.spec.metric_cmd)
        best = run.record.best_score
        run.bus.emit(AttemptScored(iteration=n, score=result.score, runs=result.runs, error=result.error, best=best))
        return result

    def apply(self, n: int, decision: decisions.IterationDecision, score: float | None) -> None:
        """Keep attempt ``n`` as the new best, or revert the workspace to the best kept state; log its score."""
        run = self.run
        if decision.keep and score is not None:
            if run.record.best is None:
                run.record.baseline = score  # no score on the original tree: the first passing attempt's
            self._set_best(score, n)
        elif run.workspace.head != self.run.loop.best_commit:
            run.workspace.keep_ref(f"{run.record.run_id}/attempt-{n}", run.workspace.head)
            run.workspace.revert_to(self.run.loop.best_commit or run.workspace.base)
        line = f"{now_iso()}\t{n}\t{'' if score is None else f'{score:g}'}\t{decision.verdict}\n"
        log = run.rundir / "score.log"
        self.guard.write_sealed(log, (self.guard.sealed.get(log) or b"") + line.encode())

    def _set_best(self, score: float, iteration: int) -> None:
        run = self.run
        run.record.best = Best(score, iteration, run.workspace.head)
        self.run.loop.best_commit = run.workspace.head
        self.guard.write_sealed(run.rundir / "best", f"{score:g}\n".encode())
