"""Metric mode: score each attempt, keep an improvement, revert anything else to the best kept state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loope.engine import decide as decisions
from loope.engine.feedback import Findings
from loope.engine.state import Halt
from loope.enums import AttemptVerdict, StopReason
from loope.events import AttemptScored, BaselineMeasured
from loope.records.model import Best, now_iso
from loope.spec import parse_min_improvement
from loope.verify.metric import Measurement

if TYPE_CHECKING:
    from loope.engine.loop import Engine


class MetricSearch:
    """The engine's metric-mode decisions and the runner-owned files they write (best, score.log)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def baseline(self) -> None:
        """Score the original tree; it is the baseline when it passes the gate and yields a number."""
        run, spec = self.engine.run_state, self.engine.spec
        assert spec.metric_cmd is not None
        self.engine.loop.best_commit = run.workspace.base
        if spec.verify_cmd:
            _, gate = self.engine.steps.gate(0, spec.verify_cmd)
            if not gate.passed:
                self.engine.bus.emit(
                    BaselineMeasured(iteration=0, score=None, baseline=None, error="the original tree fails the gate")
                )
                return
        result = self.engine.steps.metric(0, spec.metric_cmd)
        if result.score is not None:
            run.record.baseline = result.score
            self.set_best(result.score, 0)
        self.engine.bus.emit(
            BaselineMeasured(iteration=0, score=result.score, baseline=result.score, error=result.error)
        )
        assert spec.direction is not None
        if decisions.reached(result.score, spec.target, spec.direction):
            raise Halt(StopReason.CONVERGED, f"the original tree already reaches the target {spec.target:g}")

    def score(self, n: int) -> Measurement:
        run, spec = self.engine.run_state, self.engine.spec
        assert spec.metric_cmd is not None
        self.engine.precheck()
        result = self.engine.steps.metric(n, spec.metric_cmd)
        self.engine.bus.emit(
            AttemptScored(
                iteration=n,
                score=result.score,
                runs=result.runs,
                error=result.error,
                best=run.record.best_score,
            )
        )
        return result

    def set_best(self, score: float, iteration: int) -> None:
        run = self.engine.run_state
        assert self.engine.guard is not None
        run.record.best = Best(score, iteration, run.workspace.head)
        self.engine.loop.best_commit = run.workspace.head
        self.engine.guard.write_sealed(run.rundir / "best", f"{score:g}\n".encode())

    def decide(
        self, n: int, score: float | None, acceptable: bool, findings: Findings, problem: str | None
    ) -> tuple[StopReason | None, str, AttemptVerdict, Findings]:
        run, spec = self.engine.run_state, self.engine.spec
        assert spec.direction is not None
        best = run.record.best_score
        decision = decisions.decide_metric(
            score=score if acceptable else None,
            best=best,
            direction=spec.direction,
            target=spec.target,
            min_improvement=parse_min_improvement(spec.min_improvement or "0"),
            idle=self.engine.loop.idle,
            patience=spec.patience,
            iteration=n,
            max_iters=spec.max_iters,
        )
        self.engine.loop.idle = decision.idle
        if decision.keep and score is not None:
            if best is None:
                run.record.baseline = score  # no score on the original tree: the first passing attempt's
            self.set_best(score, n)
            verdict = AttemptVerdict.CONVERGED if decision.stop == StopReason.CONVERGED else AttemptVerdict.KEPT
        else:
            verdict = AttemptVerdict.REVERTED
            if run.workspace.head != self.engine.loop.best_commit:
                run.workspace.keep_ref(f"{run.record.run_id}/attempt-{n}", run.workspace.head)
                run.workspace.revert_to(self.engine.loop.best_commit or run.workspace.base)
        assert self.engine.guard is not None
        line = f"{now_iso()}\t{n}\t{'' if score is None else f'{score:g}'}\t{verdict}\n"
        log = run.rundir / "score.log"
        self.engine.guard.write_sealed(log, (self.engine.guard.sealed.get(log) or b"") + line.encode())
        note = f"Attempt {n}: score {score if score is not None else 'none'}; {decision.why}; {verdict}."
        if problem:
            note += f"\n{problem}"
        return decision.stop, decision.why, verdict, Findings(**{**findings.__dict__, "metric_note": note})
