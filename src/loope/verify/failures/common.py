"""What every test-runner parser shares: the Failure record, line cleaning, bounded messages."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from loope.text import strip_ansi


@dataclass(frozen=True)
class Failure:
    """One failing check."""

    test: str
    """Test id as the runner names it, e.g. ``tests/test_calc.py::test_add``."""
    message: str
    """The assertion / error line(s): at most 3 lines and 300 characters."""
    runner: str
    """``pytest``, ``unittest``, ``cargo``, ``go``, ``jest`` or ``vitest``."""


MAX_MESSAGE_LINES = 3
MAX_MESSAGE_CHARS = 300
_MAX_TEST_CHARS = 300
_MAX_LINE_CHARS = 2000  # longer lines are cut before matching
MAX_SCAN = 60  # lines looked at after a header when collecting its message


Found = tuple[int, Failure]
"""(line index where it was reported, failure)"""
Parser = Callable[[Sequence[str]], list[Found]]

_CONTROL = {c: None for c in (*range(0, 9), *range(11, 32), 127)}


def clean_lines(output: str) -> list[str]:
    text = strip_ansi(output)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.translate(_CONTROL)
    return [line[:_MAX_LINE_CHARS].rstrip() for line in text.split("\n")]


def first_lines(lines: Iterable[str]) -> str:
    kept: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped:
            kept.append(stripped)
            if len(kept) == MAX_MESSAGE_LINES:
                break
    text = "\n".join(kept)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1].rstrip() + "…"
    return text


def failure_of(test: str, message: str, runner: str) -> Failure:
    test = test.strip()
    if len(test) > _MAX_TEST_CHARS:
        test = test[: _MAX_TEST_CHARS - 1] + "…"
    return Failure(test=test, message=message, runner=runner)


def is_rule(line: str, char: str) -> bool:
    """A separator line made only of ``char`` (unittest, pytest)."""
    return len(line) >= 20 and not line.strip(char)


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip())


# -- jest and vitest print the same code frames and diffs ------------------------------------------

JS_FILE_HEAD = re.compile(r"^\s*FAIL\s+(\S.*)$")
_JS_CODE_FRAME = re.compile(r"^\s*>?\s*\d+\s?\|")
_JS_DIFF_LEGEND = re.compile(r"^[-+] (?:Expected|Received)\b")


def js_message(lines: Sequence[str], start: int, *, stop: Callable[[str], bool]) -> str:
    collected: list[str] = []
    in_diff = False  # after "- Expected / + Received" only the changed lines matter
    for line in lines[start : start + MAX_SCAN]:
        stripped = line.strip()
        if stop(line) or _JS_CODE_FRAME.match(line) or stripped.startswith(("at ", "❯ ")):
            break
        if _JS_DIFF_LEGEND.match(stripped):
            in_diff = True
            continue
        if in_diff and not stripped.startswith(("-", "+")):
            continue
        if stripped:
            collected.append(stripped)
            if len(collected) == MAX_MESSAGE_LINES:
                break
    return first_lines(collected)
