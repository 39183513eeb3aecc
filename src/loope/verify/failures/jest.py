"""jest: the ``●`` blocks naming each failing test."""

from __future__ import annotations

import re
from collections.abc import Sequence

from loope.verify.failures.common import JS_FILE_HEAD, Found, failure_of, js_message

_JEST_BULLET = re.compile(r"^\s*● (\S.*)$")
_JEST_NOT_TESTS = ("Console", "Validation Error", "Validation Error:")


def _jest_stop(line: str) -> bool:
    return bool(_JEST_BULLET.match(line) or JS_FILE_HEAD.match(line)) or line.startswith(
        ("Test Suites:", "PASS ", " PASS ")
    )


def parse_jest(lines: Sequence[str]) -> list[Found]:
    found: list[Found] = []
    current_file = ""
    has_summary = any(x.startswith("Test Suites:") for x in lines)
    for pos, line in enumerate(lines):
        head = JS_FILE_HEAD.match(line)
        if head is not None:
            current_file = head.group(1).strip()
            continue
        bullet = _JEST_BULLET.match(line)
        if bullet is None:
            continue
        name = bullet.group(1).strip()
        if not (current_file or has_summary):
            continue
        if name in _JEST_NOT_TESTS or name.endswith(("Warning", "Warning:")):
            continue
        if name == "Test suite failed to run":
            name = current_file or name
        found.append((pos, failure_of(name, js_message(lines, pos + 1, stop=_jest_stop), "jest")))
    return found


_SUMMARY = re.compile(r"^Tests:\s+(\d+) failed\b")


def summary_count(line: str) -> int | None:
    """Failed tests in jest's ``Tests:  2 failed, 5 passed, 7 total``, else None."""
    return int(match.group(1)) if (match := _SUMMARY.match(line)) else None
