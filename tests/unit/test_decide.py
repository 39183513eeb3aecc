"""The convergence and keep-or-revert decisions (engine/decide.py): pure functions, every case."""

from __future__ import annotations

import pytest

from loope.engine.decide import (
    Outcome,
    converged,
    decide,
    decide_metric,
    improves,
    median,
    reached,
    without_progress,
)


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
    d = decide(outcome(iteration=3, gate_passed=True), previous_failures=None, streak=1, stall_after=2)
    assert (d.stop, d.converged, d.streak) == ("converged", True, 0)


def test_not_converged_goes_on_until_max_iters() -> None:
    first = decide(outcome(iteration=1, failures=("a",)), previous_failures=None, streak=0, stall_after=2)
    assert (first.stop, first.converged, first.streak) == (None, False, 0)
    last = decide(outcome(iteration=3, failures=("b",)), previous_failures=("a",), streak=0, stall_after=2)
    assert (last.stop, last.converged) == ("max_iters", False)
    assert "--max-iters 3" in last.why


def test_max_iters_1_is_a_single_pass() -> None:
    d = decide(outcome(iteration=1, max_iters=1), previous_failures=None, streak=0, stall_after=2)
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
    first = decide(outcome(changed=False, fresh_feedback=True), previous_failures=None, streak=0, stall_after=2)
    assert (first.stop, first.streak) == (None, 1)
    second = decide(
        outcome(iteration=2, changed=False, fresh_feedback=True),
        previous_failures=None,
        streak=first.streak,
        stall_after=2,
    )
    assert (second.stop, second.streak) == ("stalled", 2)
    assert "no effective change" in second.why


def test_the_same_failures_twice_more_stall() -> None:
    same = ("tests/test_calc.py::test_add: assert -1 == 5",)
    d1 = decide(outcome(iteration=1, failures=same), previous_failures=None, streak=0, stall_after=2)
    d2 = decide(outcome(iteration=2, failures=same), previous_failures=same, streak=d1.streak, stall_after=2)
    d3 = decide(
        outcome(iteration=3, max_iters=9, failures=same), previous_failures=same, streak=d2.streak, stall_after=2
    )
    assert [d1.stop, d2.stop, d3.stop] == [None, None, "stalled"]
    assert [d1.streak, d2.streak, d3.streak] == [0, 1, 2]
    assert "the same failures" in d3.why


def test_progress_resets_the_streak() -> None:
    d = decide(outcome(iteration=2, failures=("new",)), previous_failures=("old",), streak=1, stall_after=2)
    assert (d.stop, d.streak) == (None, 0)


def test_one_idle_iteration_with_fresh_feedback_is_not_a_stall_even_with_stall_after_1() -> None:
    d = decide(outcome(changed=False, fresh_feedback=True), previous_failures=None, streak=0, stall_after=1)
    assert (d.stop, d.streak) == (None, 1)


def test_stall_after_1_stops_an_idle_iteration_without_fresh_feedback() -> None:
    d = decide(outcome(changed=False, fresh_feedback=False), previous_failures=None, streak=0, stall_after=1)
    assert (d.stop, d.streak) == ("stalled", 1)


def test_fresh_feedback_does_not_excuse_a_second_idle_iteration() -> None:
    d = decide(
        outcome(iteration=2, changed=False, fresh_feedback=True), previous_failures=None, streak=1, stall_after=1
    )
    assert d.stop == "stalled"


def test_a_larger_stall_after_waits_longer() -> None:
    streak = 0
    stops = []
    for n in range(1, 5):
        d = decide(
            outcome(iteration=n, max_iters=9, changed=False), previous_failures=None, streak=streak, stall_after=3
        )
        streak = d.streak
        stops.append(d.stop)
    assert stops == [None, None, "stalled", "stalled"]


# -- metric mode -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("score", "best", "direction", "expected"),
    [
        (9.0, None, "lower", True),
        (9.0, 10.0, "lower", True),
        (10.0, 10.0, "lower", False),
        (11.0, 10.0, "lower", False),
        (11.0, 10.0, "higher", True),
        (10.0, 10.0, "higher", False),
        (9.0, 10.0, "higher", False),
        (-1.0, 0.0, "lower", True),
    ],
)
def test_improves_by_direction(score: float, best: float | None, direction: str, expected: bool) -> None:
    assert improves(score, best, direction) is expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("score", "best", "direction", "minimum", "expected"),
    [
        # absolute: the gain must reach the minimum
        (9.6, 10.0, "lower", (0.5, False), False),
        (9.5, 10.0, "lower", (0.5, False), True),
        (9.4, 10.0, "lower", (0.5, False), True),
        (10.4, 10.0, "higher", (0.5, False), False),
        (10.5, 10.0, "higher", (0.5, False), True),
        # relative: a share of the best
        (9.9, 10.0, "lower", (0.02, True), False),
        (9.8, 10.0, "lower", (0.02, True), True),
        (102.0, 100.0, "higher", (0.02, True), True),
        (101.0, 100.0, "higher", (0.02, True), False),
        (-98.0, -100.0, "higher", (0.02, True), True),
        # a zero minimum still needs a strict gain
        (10.0, 10.0, "lower", (0.0, True), False),
    ],
)
def test_min_improvement(
    score: float, best: float, direction: str, minimum: tuple[float, bool], expected: bool
) -> None:
    """The minimum is "the smallest gain that counts" (--min-improvement's help): reaching it counts."""
    assert improves(score, best, direction, minimum) is expected  # type: ignore[arg-type]


def test_reached() -> None:
    assert reached(0.5, 0.5, "lower")
    assert reached(0.4, 0.5, "lower")
    assert not reached(0.6, 0.5, "lower")
    assert reached(0.9, 0.9, "higher")
    assert not reached(0.8, 0.9, "higher")
    assert not reached(None, 0.5, "lower")
    assert not reached(0.1, None, "lower")


def test_median_of_repeats() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([1.0, 2.0, 3.0, 10.0]) == 2.5


def metric(**overrides: object):  # type: ignore[no-untyped-def]
    values: dict[str, object] = {
        "score": 9.0,
        "best": 10.0,
        "direction": "lower",
        "target": None,
        "min_improvement": (0.0, False),
        "idle": 0,
        "patience": None,
        "iteration": 1,
        "max_iters": 5,
    }
    values.update(overrides)
    return decide_metric(**values)  # type: ignore[arg-type]


def test_the_first_passing_score_sets_the_baseline() -> None:
    d = metric(score=42.0, best=None)
    assert (d.keep, d.best, d.stop, d.idle) == (True, 42.0, None, 0)
    assert "first passing score" in d.why


def test_an_improvement_is_kept_and_resets_idle() -> None:
    d = metric(score=9.0, best=10.0, idle=2, patience=5)
    assert (d.keep, d.best, d.idle, d.stop) == (True, 9.0, 0, None)


def test_anything_else_is_reverted_and_counts_as_idle() -> None:
    worse = metric(score=11.0, best=10.0, idle=0)
    assert (worse.keep, worse.best, worse.idle) == (False, 10.0, 1)
    assert "does not improve" in worse.why
    failed = metric(score=None, best=10.0, idle=1)
    assert (failed.keep, failed.best, failed.idle) == (False, 10.0, 2)
    assert "no score" in failed.why
    not_enough = metric(score=9.9, best=10.0, min_improvement=(0.5, False))
    assert (not_enough.keep, not_enough.best) == (False, 10.0)


def test_no_score_and_no_best_keeps_nothing() -> None:
    d = metric(score=None, best=None)
    assert (d.keep, d.best, d.idle) == (False, None, 1)


def test_reaching_the_target_converges() -> None:
    d = metric(score=0.5, best=1.0, target=0.5)
    assert (d.keep, d.stop) == (True, "converged")
    assert "target" in d.why
    higher = metric(score=0.95, best=0.9, direction="higher", target=0.95)
    assert higher.stop == "converged"
    short = metric(score=0.6, best=1.0, target=0.5)
    assert (short.keep, short.stop) == (True, None)


def test_the_target_wins_over_max_iters_on_the_last_attempt() -> None:
    d = metric(score=0.5, best=1.0, target=0.5, iteration=5, max_iters=5)
    assert d.stop == "converged"


def test_patience_stalls_after_n_attempts_without_improvement() -> None:
    idle = 0
    stops = []
    for n, score in enumerate([11.0, 12.0, 13.0], start=1):
        d = metric(score=score, best=10.0, idle=idle, patience=3, iteration=n, max_iters=9)
        idle = d.idle
        stops.append(d.stop)
    assert stops == [None, None, "stalled"]
    assert idle == 3


def test_without_patience_only_max_iters_stops() -> None:
    d = metric(score=None, best=10.0, idle=50, patience=None, iteration=2, max_iters=5)
    assert d.stop is None
    last = metric(score=None, best=10.0, idle=50, patience=None, iteration=5, max_iters=5)
    assert last.stop == "max_iters"
