"""Tests for loope.verify.failures against outputs captured from the real runners.

The fixtures in tests/fixtures/test-output/ were produced by running pytest,
unittest, cargo test, go test/build, jest and vitest on tiny projects (see the
README.md there); they are not hand-written.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from loope.verify import failures as failures_module
from loope.verify.failures import Failure, parse_failures

FIXTURES = Path(__file__).parent.parent / "fixtures" / "test-output"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def ids(found: list[Failure]) -> list[tuple[str, str]]:
    return [(f.runner, f.test) for f in found]


def in_cargo_order(text: str, names: list[str]) -> list[str]:
    """cargo runs tests in parallel: failures are listed in completion order."""
    marker = "{} ... FAILED" if "... FAILED" in text else "{} --- FAILED"
    return sorted(names, key=lambda name: text.index(marker.format(name)))


# (fixture, [(runner, test id, substrings the message must contain)])
EXPECTED: dict[str, list[tuple[str, str, list[str]]]] = {
    "pytest-default.txt": [
        ("pytest", "tests/test_calc.py::test_add_large", ["assert 11 == 10", "where 11 = add(7, 3)"]),
        ("pytest", "tests/test_calc.py::test_divide_by_zero", ["ZeroDivisionError: division by zero"]),
    ],
    "pytest-q.txt": [
        ("pytest", "tests/test_calc.py::test_add_large", ["assert 11 == 10"]),
        ("pytest", "tests/test_calc.py::test_divide_by_zero", ["ZeroDivisionError: division by zero"]),
    ],
    "pytest-color.txt": [
        ("pytest", "tests/test_calc.py::test_add_large", ["assert 11 == 10"]),
        ("pytest", "tests/test_calc.py::test_divide_by_zero", ["ZeroDivisionError: division by zero"]),
    ],
    "pytest-collection-error.txt": [
        (
            "pytest",
            "tests/test_broken.py",
            ["ImportError: cannot import name 'missing_function' from 'calc'"],
        ),
    ],
    "unittest-default.txt": [
        (
            "unittest",
            "test_divide_by_zero (test_calc.CalcTest.test_divide_by_zero)",
            ["ZeroDivisionError: division by zero"],
        ),
        ("unittest", "test_add_large (test_calc.CalcTest.test_add_large)", ["AssertionError: 11 != 10"]),
    ],
    "unittest-verbose.txt": [
        (
            "unittest",
            "test_divide_by_zero (test_calc.CalcTest.test_divide_by_zero)",
            ["ZeroDivisionError: division by zero"],
        ),
        ("unittest", "test_add_large (test_calc.CalcTest.test_add_large)", ["AssertionError: 11 != 10"]),
    ],
    "cargo-default.txt": [
        (
            "cargo",
            "tests::adds_large",
            ["assertion `left == right` failed: add(7, 3) should be 10", "left: 11", "right: 10"],
        ),
        ("cargo", "tests::divides_by_zero", ["attempted to divide 4 by zero"]),
    ],
    "cargo-backtrace.txt": [
        (
            "cargo",
            "tests::divides_by_zero",
            ["attempted to divide 4 by zero"],
        ),
        ("cargo", "tests::adds_large", ["add(7, 3) should be 10", "left: 11", "right: 10"]),
    ],
    "cargo-q.txt": [
        ("cargo", "tests::adds_large", ["assertion `left == right` failed", "left: 11"]),
        ("cargo", "tests::divides_by_zero", ["attempted to divide 4 by zero"]),
    ],
    "cargo-compile-error.txt": [
        ("cargo", "calc_rs", ["src/lib.rs:18:29", "error[E0308]: mismatched types"]),
    ],
    "go-default.txt": [
        ("go", "TestAdd/large", ["calc_test.go:19: Add(7, 3) = 11, want 10"]),
        ("go", "TestDivide", ["calc_test.go:27: Divide(4, 0) returned error: division by zero"]),
    ],
    "go-verbose.txt": [
        ("go", "TestAdd/large", ["calc_test.go:19: Add(7, 3) = 11, want 10"]),
        ("go", "TestDivide", ["calc_test.go:27: Divide(4, 0) returned error: division by zero"]),
    ],
    "go-build-error.txt": [
        ("go", "example.com/calc", ["./calc.go:9:17: undefined: c"]),
    ],
    "go-test-build-error.txt": [
        ("go", "example.com/calc", ["./calc.go:9:17: undefined: c"]),
    ],
    "jest-default.txt": [
        (
            "jest",
            "calc › adds large numbers",
            ["expect(received).toBe(expected)", "Expected: 10", "Received: 11"],
        ),
        ("jest", "calc › divides by zero", ["cannot divide 4 by zero"]),
    ],
    "jest-color.txt": [
        (
            "jest",
            "calc › adds large numbers",
            ["expect(received).toBe(expected)", "Expected: 10", "Received: 11"],
        ),
        ("jest", "calc › divides by zero", ["cannot divide 4 by zero"]),
    ],
    "jest-suite-error.txt": [
        ("jest", "calc › adds large numbers", ["Expected: 10", "Received: 11"]),
        ("jest", "calc › divides by zero", ["cannot divide 4 by zero"]),
        ("jest", "./broken.test.js", ["Cannot find module './missing' from 'broken.test.js'"]),
    ],
    "vitest-default.txt": [
        (
            "vitest",
            "calc.test.js > calc > adds large numbers",
            ["AssertionError: expected 11 to be 10", "- 10", "+ 11"],
        ),
        ("vitest", "calc.test.js > calc > divides by zero", ["Error: cannot divide 4 by zero"]),
    ],
    "vitest-nocolor.txt": [
        ("vitest", "calc.test.js > calc > adds large numbers", ["AssertionError: expected 11 to be 10"]),
        ("vitest", "calc.test.js > calc > divides by zero", ["Error: cannot divide 4 by zero"]),
    ],
    "vitest-suite-error.txt": [
        ("vitest", "broken.test.js", ["Error: Cannot find module './missing.js' imported from"]),
        ("vitest", "calc.test.js > calc > adds large numbers", ["AssertionError: expected 11 to be 10"]),
        ("vitest", "calc.test.js > calc > divides by zero", ["Error: cannot divide 4 by zero"]),
    ],
    # extra real captures: other layouts of the same runners
    "go-panic.txt": [
        ("go", "TestIndex", ["panic: runtime error: index out of range [3] with length 0"]),
    ],
    "pytest-class-setup-error.txt": [
        ("pytest", "tests/test_cls.py::TestCalc::test_list", ["assert [1, 2, 3] == [1, 5, 3]", "2 != 5"]),
        ("pytest", "tests/test_cls.py::TestCalc::test_uses_fixture", ["RuntimeError: fixture exploded"]),
    ],
    "unittest-subtest-import-error.txt": [
        (
            "unittest",
            "test_imp (unittest.loader._FailedTest.test_imp)",
            ["ModuleNotFoundError: No module named 'nosuchmodule'"],
        ),
        (
            "unittest",
            "test_dict (test_sub.SubTest.test_dict)",
            ["AssertionError: {'a': 1, 'b': 2} != {'a': 1"],
        ),
        ("unittest", "test_even (test_sub.SubTest.test_even) (i=1)", ["AssertionError: 1 != 0"]),
    ],
    "jest-nested-console.txt": [
        (
            "jest",
            "outer › inner › logs then fails",
            ["toEqual(expected) // deep equality", "-     3,", "+     2,"],
        ),
        ("jest", "top level", ["toContain(expected)", "Expected value: 3", "Received array: [1, 2]"]),
    ],
    "vitest-shared-error.txt": [
        ("vitest", "a.test.js > group > first", ["TypeError: same failure"]),
        ("vitest", "a.test.js > group > second", ["TypeError: same failure"]),
        (
            "vitest",
            "a.test.js > group > objects",
            ["to deeply equal { a: 1, b: [ 1, 3 ] }", "-     3,", "+     2,"],
        ),
    ],
    "cargo-integration-doctest.txt": [
        ("cargo", "doubles", ["double(3) was 6"]),
        (
            "cargo",
            "src/lib.rs - double (line 3)",
            ["assertion `left == right` failed", "left: 4", "right: 5"],
        ),
    ],
}

PASSING = [
    "pytest-pass.txt",
    "unittest-pass.txt",
    "cargo-pass.txt",
    "go-pass.txt",
    "jest-pass.txt",
    "vitest-pass.txt",
]


def test_every_fixture_is_covered() -> None:
    on_disk = {p.name for p in FIXTURES.glob("*.txt")}
    assert on_disk == set(EXPECTED) | set(PASSING) | {"pytest-many-short.txt"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_failures(name: str) -> None:
    text = fixture(name)
    found = parse_failures(text)
    expected = EXPECTED[name]
    if name.startswith("cargo-") and len(expected) > 1:
        order = in_cargo_order(text, [test for _, test, _ in expected])
        expected = sorted(expected, key=lambda item: order.index(item[1]))
    assert ids(found) == [(runner, test) for runner, test, _ in expected]
    for failure, (_, _, needles) in zip(found, expected, strict=True):
        for needle in needles:
            assert needle in failure.message, (failure, needle)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_messages_are_short_and_stripped(name: str) -> None:
    for failure in parse_failures(fixture(name)):
        assert failure.message
        assert failure.message == failure.message.strip()
        assert len(failure.message) <= 300
        assert len(failure.message.splitlines()) <= 3
        assert "\x1b" not in failure.message
        assert "\x1b" not in failure.test
        assert failure.test == failure.test.strip()


@pytest.mark.parametrize("name", PASSING)
def test_passing_runs_give_nothing(name: str) -> None:
    assert parse_failures(fixture(name)) == []


def test_pytest_messages_come_from_e_lines_not_the_truncated_summary() -> None:
    text = fixture("pytest-default.txt")
    assert "ZeroDivisionError: division ...\n" in text  # the summary line is cut by pytest
    found = parse_failures(text)
    assert found[1] == Failure(
        test="tests/test_calc.py::test_divide_by_zero",
        message="ZeroDivisionError: division by zero",
        runner="pytest",
    )
    assert found[0].message == "assert 11 == 10\n+  where 11 = add(7, 3)"


def test_pytest_collection_error_exact() -> None:
    assert parse_failures(fixture("pytest-collection-error.txt")) == [
        Failure(
            test="tests/test_broken.py",
            message=(
                "ImportError: cannot import name 'missing_function' from 'calc' (/work/scratch/failures/pycoll/calc.py)"
            ),
            runner="pytest",
        )
    ]


def test_pytest_without_summary_falls_back_to_sections() -> None:
    text = fixture("pytest-default.txt")
    head = text[: text.index("=" * 27 + " short test summary info")]
    assert ids(parse_failures(head)) == [("pytest", "test_add_large"), ("pytest", "test_divide_by_zero")]
    assert parse_failures(head)[1].message == "ZeroDivisionError: division by zero"


def test_exact_failures_for_other_runners() -> None:
    assert parse_failures(fixture("go-default.txt")) == [
        Failure("TestAdd/large", "calc_test.go:19: Add(7, 3) = 11, want 10", "go"),
        Failure("TestDivide", "calc_test.go:27: Divide(4, 0) returned error: division by zero", "go"),
    ]
    cargo = {f.test: f for f in parse_failures(fixture("cargo-default.txt"))}
    assert cargo["tests::adds_large"] == Failure(
        "tests::adds_large",
        "assertion `left == right` failed: add(7, 3) should be 10\nleft: 11\nright: 10",
        "cargo",
    )
    assert parse_failures(fixture("unittest-default.txt"))[1] == Failure(
        "test_add_large (test_calc.CalcTest.test_add_large)", "AssertionError: 11 != 10", "unittest"
    )
    assert parse_failures(fixture("jest-default.txt"))[0] == Failure(
        "calc › adds large numbers",
        "expect(received).toBe(expected) // Object.is equality\nExpected: 10\nReceived: 11",
        "jest",
    )
    assert parse_failures(fixture("vitest-nocolor.txt"))[0] == Failure(
        "calc.test.js > calc > adds large numbers",
        "AssertionError: expected 11 to be 10 // Object.is equality\n- 10\n+ 11",
        "vitest",
    )


def test_jest_console_block_and_pytest_diff_hint_are_not_reported() -> None:
    jest = fixture("jest-nested-console.txt")
    assert "console.log" in jest
    assert [f.test for f in parse_failures(jest)] == ["outer › inner › logs then fails", "top level"]
    pytest_text = fixture("pytest-class-setup-error.txt")
    assert "Use -v to get more diff" in pytest_text
    assert parse_failures(pytest_text)[0].message == "assert [1, 2, 3] == [1, 5, 3]\nAt index 1 diff: 2 != 5"


def test_unittest_reports_the_final_exception_of_a_chain() -> None:
    found = parse_failures(fixture("unittest-subtest-import-error.txt"))
    assert found[0] == Failure(
        "test_imp (unittest.loader._FailedTest.test_imp)",
        "ModuleNotFoundError: No module named 'nosuchmodule'",
        "unittest",
    )
    assert (
        found[1].message
        == "AssertionError: {'a': 1, 'b': 2} != {'a': 1, 'b': 3}\n- {'a': 1, 'b': 2}\n?               ^"
    )


def test_go_parent_with_only_failing_subtests_is_dropped() -> None:
    tests = [f.test for f in parse_failures(fixture("go-verbose.txt"))]
    assert "TestAdd/large" in tests
    assert "TestAdd" not in tests
    assert "TestAdd/small" not in tests  # it passed


@pytest.mark.parametrize(
    ("coloured", "plain"),
    [
        ("pytest-color.txt", "pytest-default.txt"),
        ("jest-color.txt", "jest-default.txt"),
        ("vitest-default.txt", "vitest-nocolor.txt"),
    ],
)
def test_ansi_colour_makes_no_difference(coloured: str, plain: str) -> None:
    assert "\x1b[" in fixture(coloured)
    assert "\x1b[" not in fixture(plain)
    assert parse_failures(fixture(coloured)) == parse_failures(fixture(plain))


def test_windows_line_endings() -> None:
    text = fixture("unittest-default.txt").replace("\n", "\r\n")
    assert parse_failures(text) == parse_failures(fixture("unittest-default.txt"))


def test_mixed_outputs_keep_order_of_appearance() -> None:
    cargo_text = fixture("cargo-q.txt")
    text = fixture("go-default.txt") + fixture("pytest-q.txt") + cargo_text
    cargo_order = in_cargo_order(cargo_text, ["tests::adds_large", "tests::divides_by_zero"])
    assert ids(parse_failures(text)) == [
        ("go", "TestAdd/large"),
        ("go", "TestDivide"),
        ("pytest", "tests/test_calc.py::test_add_large"),
        ("pytest", "tests/test_calc.py::test_divide_by_zero"),
        *[("cargo", name) for name in cargo_order],
    ]


def test_repeated_output_is_deduplicated() -> None:
    once = parse_failures(fixture("jest-default.txt"))
    assert parse_failures(fixture("jest-default.txt") * 3) == once
    assert len(once) == 2


def test_parametrized_ids_and_tb_short() -> None:
    found = parse_failures(fixture("pytest-many-short.txt"), limit=100)
    assert len(found) == 23
    assert found[0] == Failure(
        "tests/test_many.py::test_add_param[6]", "assert 8 == (6 + 1)\n+  where 8 = add(6, 1)", "pytest"
    )
    assert [f.test for f in found[:22]] == [f"tests/test_many.py::test_add_param[{a}]" for a in range(6, 28)]
    last = found[-1]
    assert last.test == "tests/test_many.py::test_words[a - b]"  # " - " inside the parametrize id
    assert last.message.startswith("AssertionError: assert 'A - B' == 'A - B '")
    assert len(last.message.splitlines()) == 3


def test_limit() -> None:
    text = fixture("pytest-many-short.txt")
    everything = parse_failures(text, limit=1000)
    assert len(everything) == 23
    assert parse_failures(text) == everything[:20]
    assert parse_failures(text, limit=3) == everything[:3]
    assert parse_failures(text, limit=0) == []
    assert parse_failures(text, limit=-1) == []
    mixed = "".join(fixture(name) for name in sorted(EXPECTED))
    # every fixture's ids, with the ids repeated across fixtures of one runner counted once
    assert len(parse_failures(mixed, limit=100)) == 30
    assert parse_failures(mixed, limit=5) == parse_failures(mixed)[:5]


def test_long_messages_are_cut() -> None:
    long_value = "x" * 1000
    text = fixture("pytest-default.txt").replace("E       assert 11 ==", f"E       assert {long_value} ==")
    message = parse_failures(text)[0].message
    assert message.startswith("assert xxxx")
    assert len(message) <= 300
    assert message.endswith("…")


def test_failure_is_frozen() -> None:
    failure = Failure("t", "m", "go")
    with pytest.raises(dataclasses.FrozenInstanceError):
        failure.test = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "\n\n\n",
        "hello world\nall good\n",
        "\x00\x01\x02\xff\xfe\x1b[31m\x1b]0;title\x07\x1b",
        "FAILED\nERROR\n--- FAIL:\n● \n FAIL  \ntest  ... FAILED\n---- x stdout ----",
        "=" * 70 + "\nFAIL: \n" + "-" * 70,
        "# heading\nsome text\n",
        "\x1b[" * 1000,
    ],
)
def test_garbage_gives_nothing(text: str) -> None:
    assert parse_failures(text) == []


def test_random_garbage_does_not_crash() -> None:
    rng = random.Random(1234)
    pieces = [line for name in sorted(EXPECTED) for line in fixture(name).splitlines()]
    for _ in range(200):
        raw = bytes(rng.randrange(256) for _ in range(rng.randrange(400)))
        shuffled = rng.sample(pieces, k=rng.randrange(1, 60))
        for text in (raw.decode("latin-1"), raw.decode("utf-8", "replace"), "\n".join(shuffled)):
            result = parse_failures(text)
            assert isinstance(result, list)
            lines = failures_module.clean_lines(text)
            for parser in failures_module._PARSERS:  # the parsers themselves, without the safety net
                parser(lines)


@pytest.mark.parametrize(
    "text",
    [
        "test " + "a " * 200_000 + "... FAILE",
        "thread '" + "' " * 200_000,
        "___ " + "_ " * 200_000,
        "E" + " " * 400_000 + "x",
        ("=" * 70 + "\nFAIL: x\n") * 20_000,
        ("--- FAIL: T/" + "a/" * 50 + "b (0.00s)\n") * 5_000,
        ("  ● a › b\n" + "    x\n" * 5) * 10_000,
        (" FAIL  a > b\n") * 50_000,
        "\x1b]" * 200_000,
        ("\x1b[31m" + "a" * 50 + "\x1b[0m\n") * 50_000,
    ],
)
def test_huge_and_pathological_inputs_stay_bounded(text: str) -> None:
    found = parse_failures(text)
    assert len(found) <= 20
    for failure in found:
        assert len(failure.message) <= 300
        assert len(failure.test) <= 300


def test_large_real_output_is_deduplicated() -> None:
    text = "".join(fixture(name) for name in sorted(EXPECTED)) * 300  # ~ 7 MB
    found = parse_failures(text, limit=100)
    assert len(found) == len({(f.runner, f.test) for f in found})


def _broken(lines: Sequence[str]) -> list[tuple[int, Failure]]:
    raise IndexError("a parser bug")


PYTEST_SUMMARY = "=== short test summary info ===\nFAILED tests/test_a.py::test_a - assert 1 == 2\n"


def test_a_broken_parser_is_skipped_and_reported_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(failures_module, "_PARSERS", (_broken, *failures_module._PARSERS))
    seen: list[tuple[str, str]] = []
    found = parse_failures(PYTEST_SUMMARY, on_error=lambda runner, exc: seen.append((runner, repr(exc))))
    assert [f.test for f in found] == ["tests/test_a.py::test_a"]  # the other parsers still ran
    assert seen == [("test_failures", "IndexError('a parser bug')")]


def test_without_a_handler_a_broken_parser_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(failures_module, "_PARSERS", (_broken,))
    with caplog.at_level("WARNING", logger="loope.verify.failures"):
        assert parse_failures(PYTEST_SUMMARY) == []
    assert "parser failed and was skipped: IndexError('a parser bug')" in caplog.text


def test_the_gate_writes_what_a_broken_parser_dropped_next_to_its_output(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from loope.verify.gate import PARSE_ERRORS, run_gate

    monkeypatch.setattr(failures_module, "_PARSERS", (_broken,))
    log = tmp_path / "step" / "output.log"
    log.parent.mkdir()
    result = run_gate("printf 'FAILED x\\n'; exit 1", cwd=tmp_path, log=log, timeout=30)
    assert not result.passed
    written = (log.parent / PARSE_ERRORS).read_text()
    assert "the test_failures output parser failed and was skipped" in written
    assert "IndexError: a parser bug" in written
