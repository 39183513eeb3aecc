"""The failing count is the runner's own: read from its closing summary, on outputs of the real runners."""

from __future__ import annotations

from pathlib import Path

import pytest

from loope.verify.summary import runner_summary

FIXTURES = Path(__file__).parent.parent / "fixtures" / "test-output"

# (fixture, failing as the runner's summary line counts it, that line)
COUNTED = [
    ("pytest-default.txt", 2, "2 failed, 1 passed in 0.02s"),
    ("pytest-q.txt", 2, "2 failed, 1 passed in 0.02s"),
    ("pytest-color.txt", 2, "2 failed, 1 passed in 0.07s"),
    ("pytest-many-short.txt", 23, "23 failed, 1 passed in 0.06s"),
    ("pytest-class-setup-error.txt", 2, "1 failed, 1 passed, 1 error in 0.03s"),
    ("pytest-collection-error.txt", 1, "1 error in 0.11s"),
    ("unittest-default.txt", 2, "FAILED (failures=1, errors=1)"),
    ("unittest-subtest-import-error.txt", 3, "FAILED (failures=2, errors=1)"),
    ("cargo-default.txt", 2, "test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out;"),
    ("jest-default.txt", 2, "Tests:       2 failed, 1 passed, 3 total"),
    ("vitest-default.txt", 2, "Tests  2 failed | 1 passed (3)"),
]


@pytest.mark.parametrize(("name", "failing", "line"), COUNTED)
def test_the_count_is_the_runners_own(name: str, failing: int, line: str) -> None:
    found = runner_summary((FIXTURES / name).read_text(encoding="utf-8"))
    assert found is not None
    assert found.failing == failing
    assert found.line.startswith(line)


@pytest.mark.parametrize("name", ["pytest-pass.txt", "unittest-pass.txt", "cargo-pass.txt", "vitest-pass.txt"])
def test_a_passing_run_counts_no_failure(name: str) -> None:
    found = runner_summary((FIXTURES / name).read_text(encoding="utf-8"))
    assert found is None or found.failing == 0


def test_go_prints_no_count() -> None:
    assert runner_summary((FIXTURES / "go-default.txt").read_text(encoding="utf-8")) is None


def test_several_runs_in_one_gate_add_up() -> None:
    text = "===== 3 failed, 2 passed in 0.1s =====\nmore\n2 failed in 0.3s\n"
    found = runner_summary(text)
    assert found is not None
    assert (found.failing, found.line) == (5, "2 failed in 0.3s")


def test_lines_that_only_look_like_a_summary_do_not_count() -> None:
    assert runner_summary("I think 3 failed in 2s would be bad\nprint('FAILED (nope)')\n") is None
