"""How many checks failed, as the test runner itself counted them in its closing summary.

The parsed failures are capped (the next prompt needs the first few, not all of them), so their
number is not the count: "failing 33" must agree with pytest's own "33 failed". Each runner's
summary line is read as it prints it; several runs in one gate command add up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from loope.text import strip_ansi

__all__ = ["RunnerSummary", "runner_summary"]

_PYTEST = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s\b.*?=*$")
_PYTEST_PART = re.compile(r"(\d+) (failed|errors?)\b")
_UNITTEST = re.compile(r"^FAILED \(((?:\w+=\d+(?:, )?)+)\)$")
_UNITTEST_PART = re.compile(r"\b(failures|errors|unexpected successes)=(\d+)")
_CARGO = re.compile(r"^test result: FAILED\. \d+ passed; (\d+) failed;")
_JEST = re.compile(r"^Tests:\s+(\d+) failed\b")
_VITEST = re.compile(r"^Tests\s+(\d+) failed\b")


@dataclass(frozen=True)
class RunnerSummary:
    failing: int
    """Failed tests (and errors) as the runner reported them."""
    line: str
    """The runner's own summary line (the last one, when the gate ran several)."""


def runner_summary(output: str) -> RunnerSummary | None:
    """The failing count of the runner's closing summary line(s); None when no runner printed one."""
    total = 0
    last = ""
    for raw in strip_ansi(output).splitlines():
        line = raw.strip()
        if len(line) > 300:
            continue
        count = _count(line)
        if count is not None:
            total += count
            last = line.strip("= ")
    return RunnerSummary(total, last) if last else None


def _count(line: str) -> int | None:
    if match := _PYTEST.match(line):
        parts = _PYTEST_PART.findall(match.group(1))
        return sum(int(n) for n, _ in parts) if parts else None
    if match := _UNITTEST.match(line):
        return sum(int(n) for _, n in _UNITTEST_PART.findall(match.group(1)))
    for pattern in (_CARGO, _JEST, _VITEST):
        if match := pattern.match(line):
            return int(match.group(1))
    return None
