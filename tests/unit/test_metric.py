"""Metric mode's pure parts: reading a score, the median of K runs, and keep / revert / stop."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from loope.engine.decide import decide_metric, improves, reached
from loope.spec import parse_min_improvement
from loope.verify.metric import measure, median, parse_score

PYTHON = shlex.quote(sys.executable)

# -- reading the score ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("42\n", 42.0),
        ("score: 3.25\n", 3.25),
        ("warming up 1\nrun 2\nscore 7\n", 7.0),  # the last number printed wins
        ("loss=0.5 after 12 epochs: final 0.125", 0.125),
        ("score: -3\n", -3.0),
        ("delta -0.75", -0.75),
        ("+2.5", 2.5),
        ("1e-3\n", 0.001),
        ("score 2.5E+2", 250.0),
        ("6.02e23", 6.02e23),
        ("-1.5e-2", -0.015),
        (".5", 0.5),
        ("accuracy: 95%", 95.0),
        ("ends with a full stop: 4.", 4.0),
        ("score 8\n\n\n", 8.0),
    ],
)
def test_the_score_is_the_last_number_printed(output: str, expected: float) -> None:
    assert parse_score(output) == pytest.approx(expected)


@pytest.mark.parametrize(
    "output",
    [
        "",
        "\n\n",
        "no number here\n",
        "all good, nothing to report",
        "version 1.2.3",  # a dotted version is not a score
        "build x86_64 v2 sha1abc",  # digits glued to words are not numbers
        "nan inf",
    ],
)
def test_no_number_is_none(output: str) -> None:
    assert parse_score(output) is None


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("ops/sec: 1,234,567\n", 1234567.0),  # thousands separators are part of one number
        ("score: 1,234.5", 1234.5),
        ("-1,000", -1000.0),
        ("values 1,2,3", 3.0),  # a list is not a number with separators
        ("10,20", 20.0),
        ("1,2345", 2345.0),
        ("total: 1,234.", 1234.0),
    ],
)
def test_thousands_separators_do_not_split_a_number(output: str, expected: float) -> None:
    assert parse_score(output) == expected


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("\x1b[32m0.95\x1b[0m\n", 0.95),
        ("score: \x1b[1;33m42\x1b[0m", 42.0),
        ("\x1b[2K\rprogress 100%\nfinal \x1b[1m7.5\x1b[22m", 7.5),
    ],
)
def test_colour_codes_around_a_score_are_ignored(output: str, expected: float) -> None:
    assert parse_score(output) == expected


def test_a_number_after_a_version_string_is_still_found() -> None:
    assert parse_score("tool 1.2.3\nscore: 17\n") == 17.0
    assert parse_score("score: 17\ntool 1.2.3\n") == 17.0


# -- measuring: real commands ----------------------------------------------------------------------


def test_measure_runs_the_command_and_reads_its_last_number(tmp_path: Path) -> None:
    result = measure(f"{PYTHON} -c \"print('warm up 100'); print('score: 12.5')\"", cwd=tmp_path,
                     log_dir=tmp_path, repeat=1, timeout=60)  # fmt: skip
    assert (result.score, result.runs, result.error) == (12.5, [12.5], None)
    assert "score: 12.5" in (tmp_path / "metric.log").read_text()


def test_measure_repeats_k_times_and_takes_the_median(tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    script = tmp_path / "noisy.py"
    script.write_text(
        "import pathlib\n"
        f"counter = pathlib.Path({str(counter)!r})\n"
        "n = int(counter.read_text()) if counter.exists() else 0\n"
        "counter.write_text(str(n + 1))\n"
        "print([9.0, 1.0, 4.0][n])\n"
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    result = measure(f"{PYTHON} {script}", cwd=tmp_path, log_dir=logs, repeat=3, timeout=60)
    assert result.runs == [9.0, 1.0, 4.0]
    assert result.score == 4.0
    assert result.error is None
    assert counter.read_text() == "3"
    assert sorted(p.name for p in logs.glob("metric*.log")) == ["metric-1.log", "metric-2.log", "metric-3.log"]
    assert (logs / "metric-2.log").read_text().strip() == "1.0"


def test_measure_reports_a_command_that_prints_no_number(tmp_path: Path) -> None:
    result = measure("echo 'all good'", cwd=tmp_path, log_dir=tmp_path, repeat=3, timeout=60)
    assert result.score is None
    assert result.runs == []
    assert result.error is not None
    assert "printed no number" in result.error
    assert "'all good'" in result.error


def test_measure_reports_a_failing_command_and_keeps_no_score(tmp_path: Path) -> None:
    result = measure("echo 5; exit 3", cwd=tmp_path, log_dir=tmp_path, repeat=1, timeout=60)
    assert result.score is None
    assert result.error is not None
    assert "the metric command failed" in result.error
    assert "echo 5; exit 3" in result.error


def test_measure_stops_at_the_first_failing_repeat(tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    command = f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}; [ $n -lt 1 ] && echo 3"
    result = measure(command, cwd=tmp_path, log_dir=tmp_path, repeat=3, timeout=60)
    assert result.score is None
    assert result.runs == [3.0]
    assert counter.read_text().strip() == "2"


# -- median ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([5.0], 5.0),
        ([3.0, 1.0, 2.0], 2.0),
        ([10.0, -10.0, 0.5], 0.5),
        ([1.0, 2.0, 3.0, 10.0], 2.5),
        ([7.0, 7.0, 100.0], 7.0),  # one outlier does not move it
    ],
)
def test_median_of_k(scores: list[float], expected: float) -> None:
    assert median(scores) == expected


# -- minimum improvement --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", (0.0, False)), ("0.5", (0.5, False)), ("2%", (0.02, True)), (" 10% ", (0.1, True)), ("3", (3.0, False))],
)
def test_min_improvement_is_absolute_or_a_percentage(text: str, expected: tuple[float, bool]) -> None:
    amount, relative = parse_min_improvement(text)
    assert amount == pytest.approx(expected[0])
    assert relative is expected[1]


@pytest.mark.parametrize("text", ["much", "-1", "-5%", "%", ""])
def test_min_improvement_rejects_what_is_not_a_non_negative_amount(text: str) -> None:
    with pytest.raises(ValueError, match=r"number|negative"):
        parse_min_improvement(text)


@pytest.mark.parametrize(
    ("score", "best", "direction", "minimum", "expected"),
    [
        # lower is better, absolute
        (9.0, 10.0, "lower", "0.5", True),
        (9.5, 10.0, "lower", "0.5", True),
        (9.6, 10.0, "lower", "0.5", False),
        (10.4, 10.0, "lower", "0.5", False),
        # higher is better, absolute
        (11.0, 10.0, "higher", "0.5", True),
        (10.5, 10.0, "higher", "0.5", True),
        (10.4, 10.0, "higher", "0.5", False),
        (9.0, 10.0, "higher", "0.5", False),
        # percentages are of the best score
        (95.0, 100.0, "lower", "5%", True),
        (96.0, 100.0, "lower", "5%", False),
        (105.0, 100.0, "higher", "5%", True),
        (104.0, 100.0, "higher", "5%", False),
        (0.19, 0.2, "lower", "5%", True),  # 0.01 of 0.2 is exactly 5%
        (0.195, 0.2, "lower", "5%", False),
        (-10.5, -10.0, "lower", "5%", True),  # a negative best: 5% of its size
        (-9.6, -10.0, "higher", "5%", False),
        # no minimum: any strict gain counts, a tie never does
        (9.999, 10.0, "lower", "0", True),
        (10.0, 10.0, "lower", "0", False),
        (10.0, 10.0, "higher", "0%", False),
    ],
)
def test_improves_by_at_least_the_minimum_in_both_directions(
    score: float, best: float, direction: str, minimum: str, expected: bool
) -> None:
    assert improves(score, best, direction, parse_min_improvement(minimum)) is expected  # type: ignore[arg-type]


def test_anything_improves_on_no_best() -> None:
    assert improves(1e9, None, "lower", (5.0, False))
    assert improves(-1e9, None, "higher", (0.5, True))


# -- keep, revert, target, patience ---------------------------------------------------------------


def decision(**overrides: object):  # type: ignore[no-untyped-def]
    values: dict[str, object] = {
        "score": 5.0,
        "best": 10.0,
        "direction": "lower",
        "target": None,
        "min_improvement": (0.0, False),
        "idle": 0,
        "patience": None,
        "iteration": 1,
        "max_iters": 10,
    }
    values.update(overrides)
    return decide_metric(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("direction", "scores", "kept", "best"),
    [
        ("lower", [5.0, 3.0, 9.0], [True, True, False], 3.0),
        ("higher", [5.0, 3.0, 9.0], [False, False, False], 10.0),
        ("higher", [12.0, 11.0, 15.0], [True, False, True], 15.0),
        ("lower", [12.0, 10.0, 9.0], [False, False, True], 9.0),
        ("higher", [10.0, 10.0, 10.0], [False, False, False], 10.0),
    ],
)
def test_a_sequence_of_attempts_keeps_only_improvements(
    direction: str, scores: list[float], kept: list[bool], best: float
) -> None:
    current: float | None = 10.0
    seen = []
    for n, score in enumerate(scores, start=1):
        d = decision(score=score, best=current, direction=direction, iteration=n)
        seen.append(d.keep)
        current = d.best
        assert d.stop is None
    assert seen == kept
    assert current == best


def test_keep_says_what_it_improved_on_and_revert_says_why() -> None:
    kept = decision(score=3.0, best=5.0)
    assert (kept.keep, kept.best, kept.idle) == (True, 3.0, 0)
    assert kept.why == "improved on 5"
    reverted = decision(score=9.0, best=3.0, idle=1)
    assert (reverted.keep, reverted.best, reverted.idle) == (False, 3.0, 2)
    assert reverted.why == "9 does not improve on 3"


def test_a_failed_gate_or_metric_is_reverted_and_counts_against_patience() -> None:
    d = decision(score=None, best=3.0, idle=0, patience=1)
    assert (d.keep, d.best, d.stop, d.idle) == (False, 3.0, "stalled", 1)
    assert "no score" in d.why


def test_without_a_baseline_the_first_passing_score_is_kept() -> None:
    failing = decision(score=None, best=None)
    assert (failing.keep, failing.best) == (False, None)
    first = decision(score=50.0, best=None, direction="higher", idle=failing.idle)
    assert (first.keep, first.best, first.idle) == (True, 50.0, 0)
    assert first.why == "first passing score"


@pytest.mark.parametrize(
    ("direction", "score", "target", "stop"),
    [
        ("lower", 3.0, 3.0, "converged"),
        ("lower", 2.0, 3.0, "converged"),
        ("lower", 4.0, 3.0, None),
        ("higher", 0.9, 0.9, "converged"),
        ("higher", 0.95, 0.9, "converged"),
        ("higher", 0.85, 0.9, None),
    ],
)
def test_reaching_the_target_converges_in_both_directions(
    direction: str, score: float, target: float, stop: str | None
) -> None:
    best = 5.0 if direction == "lower" else 0.5
    d = decision(score=score, best=best, direction=direction, target=target)
    assert d.keep is True
    assert d.stop == stop
    assert reached(score, target, direction) is (stop == "converged")  # type: ignore[arg-type]


def test_a_baseline_already_at_the_target_converges_even_when_the_attempt_is_worse() -> None:
    d = decision(score=4.0, best=2.0, target=3.0)
    assert (d.keep, d.best, d.stop) == (False, 2.0, "converged")


def test_a_worse_score_past_the_target_does_not_converge() -> None:
    """A worse attempt is reverted, so its score never counts toward the target."""
    d = decision(score=1.0, best=0.5, direction="higher", target=0.9)
    assert (d.keep, d.best, d.stop) == (True, 1.0, "converged")
    worse = decision(score=0.95, best=1.0, direction="higher", target=0.9)
    assert worse.keep is False
    assert worse.best == 1.0


@pytest.mark.parametrize("direction", ["lower", "higher"])
def test_patience_stops_as_stalled_after_n_attempts_without_improvement(direction: str) -> None:
    worse = 11.0 if direction == "lower" else 9.0
    better = 9.0 if direction == "lower" else 11.0
    idle, best, stops = 0, 10.0, []
    for n, score in enumerate([worse, better, worse, worse], start=1):
        d = decision(score=score, best=best, direction=direction, idle=idle, patience=2, iteration=n)
        idle, best = d.idle, d.best  # type: ignore[assignment]
        stops.append(d.stop)
    assert stops == [None, None, None, "stalled"]  # the improvement in attempt 2 reset the count
    assert best == better
    assert idle == 2


def test_min_improvement_counts_a_too_small_gain_as_no_improvement() -> None:
    small = decision(score=9.8, best=10.0, min_improvement=(0.5, False), patience=1)
    assert (small.keep, small.best, small.stop) == (False, 10.0, "stalled")
    pct = decision(score=9.6, best=10.0, min_improvement=parse_min_improvement("5%"))
    assert (pct.keep, pct.best) == (False, 10.0)
    enough = decision(score=9.5, best=10.0, min_improvement=parse_min_improvement("5%"))
    assert (enough.keep, enough.best) == (True, 9.5)


def test_the_last_attempt_stops_at_max_iters_keep_or_not() -> None:
    kept = decision(score=1.0, best=2.0, iteration=3, max_iters=3)
    assert (kept.keep, kept.stop) == (True, "max_iters")
    reverted = decision(score=3.0, best=2.0, iteration=3, max_iters=3)
    assert (reverted.keep, reverted.stop) == (False, "max_iters")


# -- more keep, revert and stop cases -------------------------------------------------------------------------------


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


def test_the_first_passing_score_sets_the_baseline() -> None:
    d = decision(score=42.0, best=None)
    assert (d.keep, d.best, d.stop, d.idle) == (True, 42.0, None, 0)
    assert "first passing score" in d.why


def test_an_improvement_is_kept_and_resets_idle() -> None:
    d = decision(score=9.0, best=10.0, idle=2, patience=5)
    assert (d.keep, d.best, d.idle, d.stop) == (True, 9.0, 0, None)


def test_anything_else_is_reverted_and_counts_as_idle() -> None:
    worse = decision(score=11.0, best=10.0, idle=0)
    assert (worse.keep, worse.best, worse.idle) == (False, 10.0, 1)
    assert "does not improve" in worse.why
    failed = decision(score=None, best=10.0, idle=1)
    assert (failed.keep, failed.best, failed.idle) == (False, 10.0, 2)
    assert "no score" in failed.why
    not_enough = decision(score=9.9, best=10.0, min_improvement=(0.5, False))
    assert (not_enough.keep, not_enough.best) == (False, 10.0)


def test_no_score_and_no_best_keeps_nothing() -> None:
    d = decision(score=None, best=None)
    assert (d.keep, d.best, d.idle) == (False, None, 1)


def test_reaching_the_target_converges() -> None:
    d = decision(score=0.5, best=1.0, target=0.5)
    assert (d.keep, d.stop) == (True, "converged")
    assert "target" in d.why
    higher = decision(score=0.95, best=0.9, direction="higher", target=0.95)
    assert higher.stop == "converged"
    short = decision(score=0.6, best=1.0, target=0.5)
    assert (short.keep, short.stop) == (True, None)


def test_the_target_wins_over_max_iters_on_the_last_attempt() -> None:
    d = decision(score=0.5, best=1.0, target=0.5, iteration=5, max_iters=5)
    assert d.stop == "converged"


def test_patience_stalls_after_n_attempts_without_improvement() -> None:
    idle = 0
    stops = []
    for n, score in enumerate([11.0, 12.0, 13.0], start=1):
        d = decision(score=score, best=10.0, idle=idle, patience=3, iteration=n, max_iters=9)
        idle = d.idle
        stops.append(d.stop)
    assert stops == [None, None, "stalled"]
    assert idle == 3


def test_without_patience_only_max_iters_stops() -> None:
    d = decision(score=None, best=10.0, idle=50, patience=None, iteration=2, max_iters=5)
    assert d.stop is None
    last = decision(score=None, best=10.0, idle=50, patience=None, iteration=5, max_iters=5)
    assert last.stop == "max_iters"
