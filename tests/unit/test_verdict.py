"""Reading a reviewer's verdict (agents/verdict.py): the last VERDICT line wins, else the wording."""

from __future__ import annotations

import pytest

from loope.agents.verdict import MAX_FINDINGS, parse_verdict


def test_a_verdict_line_is_read_and_not_inferred() -> None:
    v = parse_verdict("Looks right.\nVERDICT: PASS")
    assert (v.value, v.inferred, v.blocks) == ("PASS", False, False)
    b = parse_verdict("calc.py:2 still subtracts.\nVERDICT: BLOCK\n")
    assert (b.value, b.inferred, b.blocks) == ("BLOCK", False, True)


def test_the_last_verdict_line_wins() -> None:
    assert parse_verdict("VERDICT: BLOCK\nOn second thought it is fine.\nVERDICT: PASS").value == "PASS"
    assert parse_verdict("VERDICT: PASS\nWait: the negative case fails.\nVERDICT: BLOCK").value == "BLOCK"


def test_the_findings_are_the_message_without_its_verdict_line() -> None:
    v = parse_verdict("calc.py:2 subtracts.\nAdd a test for negatives.\nVERDICT: BLOCK\n")
    assert v.findings == "calc.py:2 subtracts.\nAdd a test for negatives."
    assert "VERDICT" not in v.findings


def test_findings_are_bounded() -> None:
    v = parse_verdict("x" * (MAX_FINDINGS * 3) + "\nVERDICT: BLOCK")
    assert len(v.findings) <= MAX_FINDINGS


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ("VERDICT: PASS", "PASS"),
        ("verdict: block", "BLOCK"),
        ("Verdict: Pass", "PASS"),
        ("**VERDICT: PASS**", "PASS"),
        ("**VERDICT:** BLOCK", "BLOCK"),
        ("**Verdict**: BLOCK", "BLOCK"),
        ("__VERDICT__: PASS", "PASS"),
        ("`VERDICT: BLOCK`", "BLOCK"),
        ("> VERDICT: PASS", "PASS"),
        ("## Verdict: BLOCK", "BLOCK"),
        ("- VERDICT: **PASS**", "PASS"),
        ("  VERDICT: PASS.  ", "PASS"),
        ("VERDICT: BLOCK!", "BLOCK"),
        ("VERDICT = PASS", "PASS"),
        ("*VERDICT*: *BLOCK*", "BLOCK"),
    ],
)
def test_markdown_decoration_around_the_verdict_line_is_tolerated(line: str, value: str) -> None:
    v = parse_verdict(f"Some review text.\n{line}\n")
    assert (v.value, v.inferred) == (value, False)


@pytest.mark.parametrize(
    "line",
    [
        "End with VERDICT: PASS or VERDICT: BLOCK",
        "The VERDICT: PASS line is missing",
        "VERDICT: PASSABLE",
        "VERDICT: maybe",
    ],
)
def test_a_line_that_only_mentions_a_verdict_is_not_one(line: str) -> None:
    v = parse_verdict(f"Everything is in order.\n{line}")
    assert v.inferred


@pytest.mark.parametrize(
    "message",
    [
        "Blocking: add() subtracts; tests fail for negatives.",
        "This is a blocker: the tests are not run.",
        "Changes requested. calc.py:2 is wrong.",
        "Do not merge: the change breaks test_add.",
        "I reject this change; it ignores the goal.",
        "The change fails to meet the acceptance criteria.",
        "There is a critical bug in add().",
        "The sign handling must be fixed before this lands.",
        "You must fix the negative case.",
        "This is not acceptable as is.",
    ],
)
def test_blocker_wording_without_a_verdict_line_counts_as_an_inferred_block(message: str) -> None:
    v = parse_verdict(message)
    assert (v.value, v.inferred) == ("BLOCK", True)
    assert v.findings == message


@pytest.mark.parametrize(
    "message",
    [
        "Looks good. No blocking issues.",
        "No blockers found; approve.",
        "Nothing blocking here. LGTM.",
        "Non-blocking nit: rename x to total.",
        "This is not a blocker, just a suggestion.",
        "I found zero blocking problems.",
        "The change is correct and complete.",
    ],
)
def test_no_blocker_wording_is_an_inferred_pass(message: str) -> None:
    v = parse_verdict(message)
    assert (v.value, v.inferred) == ("PASS", True)


def test_an_empty_message_approves_nothing() -> None:
    for message in ("", "   \n\n"):
        v = parse_verdict(message)
        assert (v.value, v.inferred) == ("BLOCK", True)
        assert "empty" in v.findings


def test_a_verdict_line_beats_the_wording() -> None:
    v = parse_verdict("A blocking issue was found earlier, now fixed.\nVERDICT: PASS")
    assert (v.value, v.inferred) == ("PASS", False)
    b = parse_verdict("No blocking issues in style, but the logic is wrong.\nVERDICT: BLOCK")
    assert (b.value, b.inferred) == ("BLOCK", False)


@pytest.mark.parametrize(
    "message",
    [
        "**verdict: block** - fix it",
        "Verdict: BLOCK.",
        "## VERDICT: BLOCK",
        "## Verdict\n\n**BLOCK** - add() still subtracts",
        "Verdict: BLOCK - the negative case fails",
        "VERDICT — BLOCK",
        "> **Verdict:** `BLOCK`, see above",
        "| Verdict | BLOCK |",
    ],
)
def test_an_explicit_block_in_any_decoration_is_a_block(message: str) -> None:
    v = parse_verdict(f"calc.py:2 subtracts.\n{message}\n")
    assert (v.value, v.inferred) == ("BLOCK", False)


@pytest.mark.parametrize(
    "line",
    ["VERDICT: PASS, but the tests must be fixed first", "Verdict: pass (blocking: x)"],
)
def test_a_pass_with_more_words_is_unclear_and_inferred_from_the_wording(line: str) -> None:
    v = parse_verdict(f"Review.\n{line}")
    assert v.inferred
    assert v.value == "BLOCK"


def test_an_unclear_pass_never_turns_an_explicit_block_into_a_pass() -> None:
    v = parse_verdict("VERDICT: BLOCK - test_add fails\nAfter a second look:\nVERDICT: PASS, I think")
    assert (v.value, v.inferred) == ("BLOCK", True)
    clean = parse_verdict("Looks right.\nVERDICT: PASS, nice work")
    assert (clean.value, clean.inferred) == ("PASS", True)


def test_pass_only_when_it_says_so() -> None:
    for message in ("VERDICT: approve", "VERDICT:", "Verdict: LGTM"):
        assert parse_verdict(message).inferred
