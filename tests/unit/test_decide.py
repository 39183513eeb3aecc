"""The convergence and stall decisions (engine/decide.py); metric mode's are in test_metric.py."""

from __future__ import annotations

import pytest

from loope.engine.decide import Outcome, converged, decide_gate, without_progress


def outcome(**overrides: object) -> Outcome:
    """An iteration that changed something, ran a failing gate, with no reviewers, 1 of 3."""
    values: dict[str, object] = {"iteration": 1, "max_iters": 3, "changed": True, "gate_passed": False}
    values.update(overrides)
    return Outcome(**values)  # type: ignore[arg-type]


# -- convergence -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"gate_passed": True}, True),
        ({"gate_passed": True, "has_reviewers": True}, True),
        ({"gate_passed": True, "has_reviewers": True, "blockers": 1}, False),
        ({"gate_passed": False, "has_reviewers": True}, False),
        ({"gate_passed": None, "has_reviewers": True}, True),
        ({"gate_passed": None, "has_reviewers": True, "blockers": 2}, False),
        # With no gate and no reviewer, the agent's own "done" is the gate ...
        ({"gate_passed": None}, False),
        ({"gate_passed": None, "state_status": "in-progress"}, False),
        ({"gate_passed": None, "state_status": "done"}, True),
        # ... but "done" never overrides a failing gate, and "blocked" stops convergence.
        ({"gate_passed": False, "state_status": "done"}, False),
        ({"gate_passed": True, "state_status": "blocked"}, False),
        ({"gate_passed": None, "has_reviewers": True, "state_status": "blocked"}, False),
        ({"gate_passed": True, "success_passed": False}, False),
        ({"gate_passed": None, "success_passed": True}, True),
        ({"gate_passed": None, "success_passed": False, "state_status": "done"}, False),
    ],
)
def test_converged_needs_every_check(fields: dict[str, object], expected: bool) -> None:
    assert converged(outcome(**fields)) is expected


def test_a_converged_iteration_stops_even_at_the_last_iteration_and_resets_the_streak() -> None:
    d = decide_gate(outcome(iteration=3, gate_passed=True), previous_failures=None, streak=1, stall_after=2)
    assert (d.stop, d.converged, d.streak) == ("converged", True, 0)


def test_not_converged_goes_on_until_max_iters() -> None:
    first = decide_gate(outcome(iteration=1, failures=("a",)), previous_failures=None, streak=0, stall_after=2)
    assert (first.stop, first.converged, first.streak) == (None, False, 0)
    last = decide_gate(outcome(iteration=3, failures=("b",)), previous_failures=("a",), streak=0, stall_after=2)
    assert (last.stop, last.converged) == ("max_iters", False)
    assert "--max-iters 3" in last.why


def test_max_iters_1_is_a_single_pass() -> None:
    d = decide_gate(outcome(iteration=1, max_iters=1), previous_failures=None, streak=0, stall_after=2)
    assert d.stop == "max_iters"


# -- progress and stalls -----------------------------------------------------------------------


def test_without_progress_no_change_or_the_same_failures() -> None:
    assert without_progress(outcome(changed=False), None)
    assert without_progress(outcome(changed=True, failures=("t: x",)), ("t: x",))
    assert not without_progress(outcome(changed=True, failures=("t: x",)), ("t: y",))
    assert not without_progress(outcome(changed=True, failures=("t: x",)), None)
    # Unparsed failures are not "the same": nothing says they are.
    assert not without_progress(outcome(changed=True, failures=()), ())
    # A passing gate has no failures to repeat.
    assert not without_progress(outcome(changed=True, gate_passed=True), ())


def test_two_idle_iterations_in_a_row_stall_by_default() -> None:
    first = decide_gate(outcome(changed=False, fresh_feedback=True), previous_failures=None, streak=0, stall_after=2)
    assert (first.stop, first.streak) == (None, 1)
    second = decide_gate(
        outcome(iteration=2, changed=False, fresh_feedback=True),
        previous_failures=None,
        streak=first.streak,
        stall_after=2,
    )
    assert (second.stop, second.streak) == ("stalled", 2)
    assert "no effective change" in second.why


def test_the_same_failures_twice_more_stall() -> None:
    same = ("tests/test_calc.py::test_add: assert -1 == 5",)
    d1 = decide_gate(outcome(iteration=1, failures=same), previous_failures=None, streak=0, stall_after=2)
    d2 = decide_gate(outcome(iteration=2, failures=same), previous_failures=same, streak=d1.streak, stall_after=2)
    d3 = decide_gate(
        outcome(iteration=3, max_iters=9, failures=same), previous_failures=same, streak=d2.streak, stall_after=2
    )
    assert [d1.stop, d2.stop, d3.stop] == [None, None, "stalled"]
    assert [d1.streak, d2.streak, d3.streak] == [0, 1, 2]
    assert "the same failures" in d3.why


def test_progress_resets_the_streak() -> None:
    d = decide_gate(outcome(iteration=2, failures=("new",)), previous_failures=("old",), streak=1, stall_after=2)
    assert (d.stop, d.streak) == (None, 0)


def test_one_idle_iteration_with_fresh_feedback_is_not_a_stall_even_with_stall_after_1() -> None:
    d = decide_gate(outcome(changed=False, fresh_feedback=True), previous_failures=None, streak=0, stall_after=1)
    assert (d.stop, d.streak) == (None, 1)


def test_stall_after_1_stops_an_idle_iteration_without_fresh_feedback() -> None:
    d = decide_gate(outcome(changed=False, fresh_feedback=False), previous_failures=None, streak=0, stall_after=1)
    assert (d.stop, d.streak) == ("stalled", 1)


def test_fresh_feedback_does_not_excuse_a_second_idle_iteration() -> None:
    d = decide_gate(
        outcome(iteration=2, changed=False, fresh_feedback=True), previous_failures=None, streak=1, stall_after=1
    )
    assert d.stop == "stalled"


def test_a_larger_stall_after_waits_longer() -> None:
    streak = 0
    stops = []
    for n in range(1, 5):
        d = decide_gate(
            outcome(iteration=n, max_iters=9, changed=False), previous_failures=None, streak=streak, stall_after=3
        )
        streak = d.streak
        stops.append(d.stop)
    assert stops == [None, None, "stalled", "stalled"]


# -- one decision for both modes ----------------------------------------------------------------


def test_decide_in_gate_mode_carries_the_streak_and_the_failures():
    from loope.engine.decide import Rules, decide
    from loope.engine.feedback import Findings
    from loope.records.model import LoopState

    findings = Findings(iteration=2)
    loop = LoopState(streak=1, previous_failures=["a"], idle=4)
    d = decide(outcome(iteration=2, failures=("a",)), findings, loop, Rules(stall_after=3))
    assert (d.stop, d.verdict, d.keep) == (None, "kept", True)
    assert (d.loop.streak, d.loop.previous_failures, d.loop.idle) == (2, ["a"], 4)
    assert d.findings is findings
    assert loop.streak == 1  # the carried state is a new value; the old one is untouched
    last = decide(outcome(iteration=3, gate_passed=True), findings, d.loop, Rules(stall_after=3))
    assert (last.stop, last.verdict, last.loop.streak) == ("converged", "converged", 0)


def test_decide_in_metric_mode_keeps_an_improvement_and_reverts_the_rest():
    from loope.engine.decide import MetricRules, Rules, decide
    from loope.engine.feedback import Findings
    from loope.records.model import LoopState

    rules = Rules(stall_after=2, metric=MetricRules("lower", target=1.0, patience=2))
    better = decide(outcome(gate_passed=True, score=3.0, best=5.0), Findings(iteration=1), LoopState(), rules)
    assert (better.stop, better.verdict, better.keep, better.loop.idle) == (None, "kept", True, 0)
    assert better.findings.metric_note == "Attempt 1: score 3.0; improved on 5; kept."
    worse = decide(
        outcome(iteration=2, gate_passed=True, score=6.0, best=3.0), Findings(iteration=2), better.loop, rules
    )
    assert (worse.verdict, worse.keep, worse.loop.idle) == ("reverted", False, 1)
    blocked = decide(
        outcome(iteration=3, gate_passed=True, score=0.5, best=3.0, blockers=1, metric_problem="slow"),
        Findings(iteration=3),
        worse.loop,
        rules,
    )
    assert (blocked.stop, blocked.verdict, blocked.keep) == ("stalled", "reverted", False)  # a block is no score
    assert blocked.findings.metric_note is not None
    assert blocked.findings.metric_note.endswith("reverted.\nslow")
    reached = decide(
        outcome(iteration=2, gate_passed=True, score=1.0, best=3.0), Findings(iteration=2), LoopState(), rules
    )
    assert (reached.stop, reached.verdict) == ("converged", "converged")
