"""How many checks failed, as the test runner itself counted them in its closing summary.

The parsed failures are capped (the next prompt needs the first few, not all of them), so their
number is not the count: "failing 33" must agree with pytest's own "33 failed". Each runner's
summary line is read as it prints it; several runs in one gate command add up.
"""

from __future__ import annotations

from loope.record import record
from loope.text import strip_ansi
from loope.verify.failures import cargo, jest, pytest, unittest, vitest

__all__ = ["RunnerSummary", "runner_summary"]

# Each runner's module knows its own closing line; go test prints no count.
_COUNTERS = (
    pytest.summary_count,
    unittest.summary_count,
    cargo.summary_count,
    jest.summary_count,
    vitest.summary_count,
)


@record(frozen=True)
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
    for counter in _COUNTERS:
        count = counter(line)
        if count is not None:
            return count
    return None
