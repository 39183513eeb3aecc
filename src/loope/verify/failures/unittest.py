"""unittest (and Django's runner): ``FAIL:``/``ERROR:`` blocks, the message from the traceback's end."""

from __future__ import annotations

import re
from collections.abc import Sequence

from loope.verify.failures.common import Found, failure_of, first_lines, is_rule

_UNITTEST_HEAD = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\S.*)$")


def _unittest_message(body: Sequence[str]) -> str:
    """The exception at the end of a traceback (the last one when chained)."""
    message: list[str] = []
    state = "start"  # start | frames | message | between
    for line in body:
        if line.startswith("Traceback (most recent call last)"):
            state, message = "frames", []
            continue
        if line.startswith(("During handling of the above exception", "The above exception was")):
            state = "between"
            continue
        if state == "frames":
            if not line or line[:1].isspace():
                continue
            state = "message"
        if state in ("message", "start"):
            message.append(line)
    return first_lines(message)


def parse_unittest(lines: Sequence[str]) -> list[Found]:
    found: list[Found] = []
    n = len(lines)
    i = 0
    while i < n - 1:
        if not is_rule(lines[i], "="):
            i += 1
            continue
        head = _UNITTEST_HEAD.match(lines[i + 1])
        if head is None:
            i += 1
            continue
        kind, test = head.group(1), head.group(2)
        start = i + 2
        for j in range(i + 2, min(i + 8, n)):  # optional docstring lines, then "----"
            if is_rule(lines[j], "-"):
                start = j + 1
                break
        end = start
        while end < n and not is_rule(lines[end], "=") and not is_rule(lines[end], "-"):
            end += 1
        message = _unittest_message(lines[start:end])
        if not message and kind == "UNEXPECTED SUCCESS":
            message = "unexpected success"
        found.append((i + 1, failure_of(test, message, "unittest")))
        i = max(end, i + 1)
    return found


_SUMMARY = re.compile(r"^FAILED \(((?:\w+=\d+(?:, )?)+)\)$")
_SUMMARY_PART = re.compile(r"\b(failures|errors|unexpected successes)=(\d+)")


def summary_count(line: str) -> int | None:
    """Failures, errors and unexpected successes in unittest's ``FAILED (failures=2, errors=1)``, else None."""
    if match := _SUMMARY.match(line):
        return sum(int(n) for _, n in _SUMMARY_PART.findall(match.group(1)))
    return None
