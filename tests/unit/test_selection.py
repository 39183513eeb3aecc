"""Selection between an iteration's candidates: the order the rules give, and why each one lost."""

from __future__ import annotations

from loope.engine.decide import MetricRules
from loope.engine.selection import Contender, beats, rank, strengths, why_lost
from loope.enums import Direction

LOWER = MetricRules(Direction.LOWER, min_improvement=(0.5, False))


def c(index: int, **kw: object) -> Contender:
    fields: dict[str, object] = {"ok": True, "gate_passed": True, "failing": 0, "diff_lines": 10, **kw}
    return Contender(index=index, **fields)  # type: ignore[arg-type]


def order(contenders: list[Contender], metric: MetricRules | None = None) -> list[int]:
    return [x.index for x in rank(contenders, metric)]


def test_a_passing_gate_beats_a_failing_one_whatever_the_diff():
    assert order([c(1, gate_passed=False, failing=1, diff_lines=1), c(2, diff_lines=500)]) == [2, 1]


def test_a_failed_step_and_a_guard_violation_rank_below_every_clean_candidate():
    ranked = order([c(1, ok=False), c(2, violations=1), c(3, gate_passed=False, failing=9), c(4)])
    assert ranked == [4, 3, 2, 1]


def test_failing_candidates_tie_break_on_fewer_failures_then_the_smaller_diff_then_the_number():
    ranked = order(
        [
            c(1, gate_passed=False, failing=3, diff_lines=1),
            c(2, gate_passed=False, failing=1, diff_lines=9),
            c(3, gate_passed=False, failing=1, diff_lines=2),
            c(4, gate_passed=False, failing=None, diff_lines=0),
            c(5, gate_passed=False, failing=1, diff_lines=2),
        ]
    )
    assert ranked == [3, 5, 2, 1, 4]  # an uncounted failure ranks after every counted one


def test_no_gate_ranks_as_passing():
    assert order([c(1, gate_passed=None, failing=None, diff_lines=5), c(2, gate_passed=False, failing=1)]) == [1, 2]


def test_metric_mode_a_better_score_wins_over_the_smaller_diff():
    assert order([c(1, score=5.0, diff_lines=1), c(2, score=3.0, diff_lines=90)], LOWER) == [2, 1]
    higher = MetricRules(Direction.HIGHER)
    assert order([c(1, score=5.0), c(2, score=3.0)], higher) == [1, 2]


def test_metric_mode_a_difference_inside_the_noise_is_a_tie_broken_by_the_diff():
    ranked = rank([c(1, score=5.0, diff_lines=9), c(2, score=4.7, diff_lines=2)], LOWER)
    assert [x.index for x in ranked] == [2, 1]
    relative = MetricRules(Direction.LOWER, min_improvement=(0.1, True))  # 10% of 5 is 0.5
    assert order([c(1, score=5.0, diff_lines=1), c(2, score=4.6, diff_lines=2)], relative) == [1, 2]
    assert order([c(1, score=5.0, diff_lines=1), c(2, score=4.4, diff_lines=2)], relative) == [2, 1]


def test_metric_mode_a_score_beats_no_score_among_passing_candidates():
    assert order([c(1, score=None, diff_lines=1), c(2, score=50.0)], LOWER) == [2, 1]


def test_the_score_only_counts_between_passing_candidates():
    failing = c(1, gate_passed=False, failing=1, score=0.0)
    assert not beats(failing, c(2, score=99.0), LOWER)


def test_why_each_loser_lost_names_the_rule_that_decided():
    winner = c(1, score=3.0, diff_lines=2)
    assert why_lost(c(2, ok=False), winner, LOWER) == "its step failed"
    assert why_lost(c(3, violations=2), winner, LOWER) == "the guard undid 2 of its change(s)"
    assert why_lost(c(4, gate_passed=False, failing=2), winner, LOWER) == "its gate failed (2 failing)"
    assert why_lost(c(5, score=9.0), winner, LOWER) == "score 9 against score 3"
    assert why_lost(c(6, score=3.2, diff_lines=8), winner, LOWER) == "a tie, with a larger diff (8 against 2 lines)"
    assert why_lost(c(7, score=3.2, diff_lines=2), winner, LOWER) == "a tie, and a later candidate"
    tied = c(8, gate_passed=False, failing=4)
    assert why_lost(tied, c(1, gate_passed=False, failing=1), None) == ("a tie, with more failing checks (4 against 1)")


def test_what_the_winner_had_going_for_it():
    assert strengths(c(1, score=3.0, diff_lines=2), LOWER) == "gate passed, score 3, 2 changed line(s)"
    assert (
        strengths(c(1, gate_passed=False, failing=2, diff_lines=4), None)
        == "gate failed (2 failing), 4 changed line(s)"
    )
    assert strengths(c(1, ok=False), None).startswith("every candidate failed")
