"""Pure decisions: has the loop converged, stalled, or run out of iterations; keep or revert a score.

:func:`decide` is the one decision after each iteration, in gate and metric mode alike; the
functions it is built from are tested on their own.
"""

from __future__ import annotations

from dataclasses import replace

from loope.engine.feedback import Findings
from loope.enums import AttemptVerdict, Direction, StopReason
from loope.record import record
from loope.records.model import LoopState


@record(frozen=True)
class Outcome:
    """What one iteration produced, as far as deciding goes."""

    iteration: int
    max_iters: int
    changed: bool
    """The implementer left an effective change (after the guard undid violations)."""
    gate_passed: bool | None
    """None when no gate is configured (or it was skipped)."""
    failures: tuple[str, ...] = ()
    """The gate's failing checks, as comparable strings."""
    has_reviewers: bool = False
    blockers: int = 0
    """Reviewers and agent verifiers that returned BLOCK."""
    state_status: str | None = None
    """The state file's ``status`` (in-progress, done, blocked)."""
    success_passed: bool | None = None
    """The success command's verdict, None when there is none."""
    fresh_feedback: bool = False
    """The feedback for the next iteration differs from what this iteration was given."""
    score: float | None = None
    """Metric mode: the attempt's score; None when the gate failed or the metric gave no number."""
    best: float | None = None
    """Metric mode: the best score before this attempt."""
    metric_problem: str | None = None
    """Metric mode: why the metric gave no number."""


@record(frozen=True)
class MetricRules:
    direction: Direction
    target: float | None = None
    min_improvement: tuple[float, bool] = (0.0, False)
    """The smallest gain that counts, absolute or (True) relative to the best."""
    patience: int | None = None
    """Stop after this many scored attempts in a row without improvement."""


@record(frozen=True)
class Rules:
    """What the spec says about when a loop stops."""

    stall_after: int
    metric: MetricRules | None = None
    """Set in metric mode."""


@record(frozen=True)
class IterationDecision:
    """What the loop does after an iteration, in either mode."""

    stop: StopReason | None
    """None: go on with the next iteration."""
    why: str
    verdict: AttemptVerdict
    """The ledger's verdict: kept, reverted or converged."""
    findings: Findings
    """What the next iteration is told (metric mode adds the score)."""
    loop: LoopState
    """The counters carried to the next iteration (streak, failures, idle attempts)."""
    keep: bool = True
    """Metric mode: keep the attempt as the new best; False reverts it."""


@record(frozen=True)
class Decision:
    stop: StopReason | None
    converged: bool
    streak: int
    """Iterations in a row without progress, this one included."""
    why: str


def converged(o: Outcome) -> bool:
    """The gate passes, nobody blocks, the agent is not blocked; with no check at all, the agent's ``done``."""
    if o.gate_passed is False or o.blockers or o.success_passed is False or o.state_status == "blocked":
        return False
    has_check = o.gate_passed is not None or o.has_reviewers or o.success_passed is not None
    return has_check or o.state_status == "done"


def without_progress(o: Outcome, previous_failures: tuple[str, ...] | None) -> bool:
    """No effective change, or exactly the same failures as the iteration before."""
    same_failures = o.gate_passed is False and bool(o.failures) and o.failures == previous_failures
    return not o.changed or same_failures


def decide(o: Outcome, findings: Findings, loop: LoopState, rules: Rules) -> IterationDecision:
    """Stop (and why) or go on after iteration ``o.iteration``; in metric mode, also keep or revert it."""
    if rules.metric is None:
        previous = tuple(loop.previous_failures) if loop.previous_failures is not None else None
        gate = decide_gate(o, previous_failures=previous, streak=loop.streak, stall_after=rules.stall_after)
        verdict = AttemptVerdict.CONVERGED if gate.converged else AttemptVerdict.KEPT
        carried = replace(loop, streak=gate.streak, previous_failures=list(o.failures))
        return IterationDecision(gate.stop, gate.why, verdict, findings, carried)
    m = rules.metric
    acceptable = o.gate_passed is not False and not o.blockers
    metric = decide_metric(
        score=o.score if acceptable else None,
        best=o.best,
        direction=m.direction,
        target=m.target,
        min_improvement=m.min_improvement,
        idle=loop.idle,
        patience=m.patience,
        iteration=o.iteration,
        max_iters=o.max_iters,
    )
    keep = metric.keep and o.score is not None
    if keep:
        verdict = AttemptVerdict.CONVERGED if metric.stop == StopReason.CONVERGED else AttemptVerdict.KEPT
    else:
        verdict = AttemptVerdict.REVERTED
    note = f"Attempt {o.iteration}: score {o.score if o.score is not None else 'none'}; {metric.why}; {verdict}."
    if o.metric_problem:
        note += f"\n{o.metric_problem}"
    noted = replace(findings, metric_note=note)
    return IterationDecision(metric.stop, metric.why, verdict, noted, replace(loop, idle=metric.idle), keep)


def decide_gate(o: Outcome, *, previous_failures: tuple[str, ...] | None, streak: int, stall_after: int) -> Decision:
    """Gate mode: stop (and why) or go on, after iteration ``o.iteration``."""
    if converged(o):
        return Decision(StopReason.CONVERGED, True, 0, "every check passed")
    streak = streak + 1 if without_progress(o, previous_failures) else 0
    # A single idle iteration that still produced new feedback gets its chance to act on it.
    if streak >= stall_after and not (streak == 1 and o.fresh_feedback):
        why = "no effective change" if not o.changed else "the same failures again"
        return Decision(StopReason.STALLED, False, streak, f"{streak} iteration(s) without progress ({why})")
    if o.iteration >= o.max_iters:
        return Decision(StopReason.MAX_ITERS, False, streak, f"reached --max-iters {o.max_iters}")
    return Decision(None, False, streak, "not converged yet")


# -- metric mode --------------------------------------------------------------------------------


def improves(
    score: float, best: float | None, direction: Direction, min_improvement: tuple[float, bool] = (0.0, False)
) -> bool:
    """Whether ``score`` beats ``best`` by at least the minimum (absolute, or relative to ``best``)."""
    if best is None:
        return True
    amount, relative = min_improvement
    needed = abs(best) * amount if relative else amount
    gain = best - score if direction == Direction.LOWER else score - best
    # The minimum is the smallest gain that counts; the tolerance absorbs float noise (10 - 9.8 < 0.2).
    tolerance = 1e-9 * max(1.0, abs(best), abs(score))
    return gain > 0 and gain >= needed - tolerance


def reached(score: float | None, target: float | None, direction: Direction) -> bool:
    if score is None or target is None:
        return False
    return score <= target if direction == Direction.LOWER else score >= target


@record(frozen=True)
class MetricDecision:
    keep: bool
    """Keep the attempt (it improved on the best, or set the first baseline)."""
    best: float | None
    stop: StopReason | None
    idle: int
    """Scored attempts in a row without improvement."""
    why: str


def decide_metric(
    *,
    score: float | None,
    best: float | None,
    direction: Direction,
    target: float | None,
    min_improvement: tuple[float, bool],
    idle: int,
    patience: int | None,
    iteration: int,
    max_iters: int,
) -> MetricDecision:
    """Keep-or-revert for one attempt. ``score`` is None when the gate or the metric failed."""
    keep = score is not None and improves(score, best, direction, min_improvement)
    new_best = score if keep else best
    idle = 0 if keep else idle + 1
    if keep:
        why = "first passing score" if best is None else f"improved on {best:g}"
    elif score is None:
        why = "no score (the gate or the metric failed)"
    else:
        why = f"{score:g} does not improve on {best:g}"
    if reached(new_best, target, direction):
        return MetricDecision(keep, new_best, StopReason.CONVERGED, idle, f"{why}; reached the target {target:g}")
    if patience is not None and idle >= patience:
        return MetricDecision(keep, new_best, StopReason.STALLED, idle, f"{why}; {idle} attempt(s) without improvement")
    if iteration >= max_iters:
        return MetricDecision(keep, new_best, StopReason.MAX_ITERS, idle, f"{why}; reached --max-iters {max_iters}")
    return MetricDecision(keep, new_best, None, idle, why)
