"""What the next iteration is told about the last one (engine/feedback.py): pure composition."""

from __future__ import annotations

from loope.engine.feedback import MAX_FAILURES, Findings, compose, failure_signature
from loope.verify.report import TAIL_BYTES, TAIL_LINES, GateReport, tail

GATE = "python -m pytest -q"


def failed_gate(output: str = "", failures: list[tuple[str, str]] | None = None, **kw: object) -> GateReport:
    values: dict[str, object] = {"command": GATE, "passed": False, "exit_code": 1, "output": output}
    values["failures"] = failures or []
    values.update(kw)
    return GateReport(**values)  # type: ignore[arg-type]


# -- the bounded tail --------------------------------------------------------------------------


def test_tail_keeps_the_last_40_lines() -> None:
    text = "\n".join(f"line {i}" for i in range(1, 101))
    shown = tail(text).splitlines()
    assert len(shown) == TAIL_LINES == 40
    assert shown[0] == "line 61"
    assert shown[-1] == "line 100"


def test_tail_keeps_at_most_4_kb_cut_at_a_line_boundary() -> None:
    text = "\n".join(f"{i:03d}" + "x" * 197 for i in range(30))  # 30 lines of 200 bytes
    shown = tail(text)
    assert len(shown.encode("utf-8")) <= TAIL_BYTES == 4096
    lines = shown.splitlines()
    assert lines[-1].startswith("029")
    assert all(len(line) == 200 for line in lines)  # whole lines only
    assert len(lines) == 20


def test_tail_counts_bytes_not_characters() -> None:
    text = "\n".join("é" * 100 for _ in range(40))  # 200 bytes a line
    assert len(tail(text).encode("utf-8")) <= TAIL_BYTES


def test_tail_of_short_output_is_the_output() -> None:
    assert tail("one\ntwo\n\n") == "one\ntwo"
    assert tail("") == ""


def test_tail_of_one_huge_line_keeps_its_end_within_the_bound() -> None:
    """A gate whose last line is longer than 4 KB (minified output) still shows something."""
    text = "start\n" + "a" * 10_000 + "THE-END"
    shown = tail(text)
    assert shown.endswith("THE-END")
    assert len(shown.encode("utf-8")) <= TAIL_BYTES


# -- composition -------------------------------------------------------------------------------


def test_nothing_to_act_on_is_empty() -> None:
    assert compose(Findings(iteration=1)) == ""
    passed = GateReport(command=GATE, passed=True, exit_code=0, output="2 passed")
    assert compose(Findings(iteration=1, gate=passed)) == ""


def test_a_failing_gate_lists_its_failing_checks_then_a_tail() -> None:
    output = "\n".join(f"noise {i}" for i in range(100)) + "\nFAILED tests/test_calc.py::test_add_negative"
    text = compose(
        Findings(
            iteration=2,
            gate=failed_gate(
                output,
                [
                    ("tests/test_calc.py::test_add_negative", "assert 1 == -5"),
                    ("tests/test_calc.py::test_add", ""),
                ],
            ),
        )
    )
    assert text.startswith("## Feedback from iteration 2\n")
    assert f"failed (exit code 1): `{GATE}`" in text
    assert (
        "Failing checks:\n- `tests/test_calc.py::test_add_negative`: assert 1 == -5\n- `tests/test_calc.py::test_add`\n"
        in text
    )
    assert text.index("Failing checks:") < text.index("Last lines of its output:")
    assert "noise 60" not in text  # bounded: only the last 40 lines
    assert "noise 61" in text
    assert "FAILED tests/test_calc.py::test_add_negative" in text


def test_the_tail_in_the_feedback_is_bounded_even_for_a_long_report() -> None:
    output = "\n".join("y" * 300 for _ in range(200))
    text = compose(Findings(iteration=1, gate=failed_gate(output)))
    fenced = text.split("```text\n", 1)[1].split("\n```", 1)[0]
    assert len(fenced.encode("utf-8")) <= TAIL_BYTES
    assert len(fenced.splitlines()) <= TAIL_LINES


def test_many_failures_are_capped_with_a_count_of_the_rest() -> None:
    failures = [(f"t::test_{i}", "boom") for i in range(MAX_FAILURES + 7)]
    text = compose(Findings(iteration=1, gate=failed_gate("", failures)))
    assert f"t::test_{MAX_FAILURES - 1}" in text
    assert f"t::test_{MAX_FAILURES}`" not in text
    assert "… and 7 more" in text


def test_a_timed_out_or_unstarted_gate_says_so() -> None:
    timed = compose(Findings(iteration=1, gate=failed_gate("", exit_code=None, timed_out=True)))
    assert "failed (timed out)" in timed
    never = compose(Findings(iteration=1, gate=failed_gate("command not found: nope", exit_code=None)))
    assert "failed (did not run)" in never
    assert "command not found: nope" in never


def test_blocking_findings_are_under_a_heading_that_asks_to_address_them() -> None:
    text = compose(
        Findings(
            iteration=1,
            blockers=[("codex", "  calc.py:2 subtracts instead of adding.\n"), ("exec", "")],
        )
    )
    assert "### codex blocked: address these blocking findings\ncalc.py:2 subtracts instead of adding.\n" in text
    assert "### exec blocked: address these blocking findings\n(no findings given)" in text


def test_violations_success_metric_and_notes_are_all_fed_back_in_order() -> None:
    success = GateReport(command="./done.sh", passed=False, exit_code=3, output="not yet")
    text = compose(
        Findings(
            iteration=4,
            gate=failed_gate("1 failed"),
            blockers=[("claude", "missing docstring")],
            violations=["tests/test_calc.py is protected; your change to it was undone"],
            success=success,
            metric_note="Attempt 4: score 12; reverted.",
            notes=["Note: the state file has no --- frontmatter ---; keep the frontmatter valid."],
        )
    )
    order = [
        "### Changes that were undone",
        "- tests/test_calc.py is protected",
        "### The verify command failed",
        "### The success command failed (exit code 3): `./done.sh`",
        "### claude blocked: address these blocking findings",
        "### Score\nAttempt 4: score 12; reverted.",
        "Note: the state file has no --- frontmatter ---",
    ]
    positions = [text.index(part) for part in order]
    assert positions == sorted(positions)


def test_a_passing_gate_is_not_reported_but_blockers_still_are() -> None:
    passed = GateReport(command=GATE, passed=True, exit_code=0, output="2 passed")
    text = compose(Findings(iteration=1, gate=passed, blockers=[("codex", "needs a test")]))
    assert "verify command" not in text
    assert "needs a test" in text


def test_failure_signature_ignores_order_and_includes_the_message() -> None:
    a = failure_signature([("t::b", "assert 2"), ("t::a", "assert 1")])
    b = failure_signature([("t::a", "assert 1"), ("t::b", "assert 2")])
    assert a == b == ("t::a: assert 1", "t::b: assert 2")
    assert failure_signature([("t::a", "assert 3")]) != failure_signature([("t::a", "assert 1")])
    assert failure_signature([]) == ()
