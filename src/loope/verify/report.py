"""What a check command reported: passed or not, its failing checks, the tail of its output."""

from __future__ import annotations

from collections.abc import Sequence

from loope.record import record

MAX_FAILURES = 20
"""Failing checks named in a report (and in the next prompt); the rest are counted."""
TAIL_LINES = 40
TAIL_BYTES = 4096


@record(frozen=True)
class GateReport:
    command: str
    passed: bool
    exit_code: int | None
    failures: Sequence[tuple[str, str]] = ()
    """(test id, assertion line) pairs parsed from the output."""
    output: str = ""
    timed_out: bool = False
    failing: int = 0
    """How many checks failed (the runner's own count); ``failures`` holds the first of them."""


def tail(text: str, *, lines: int = TAIL_LINES, limit: int = TAIL_BYTES) -> str:
    """The last ``lines`` lines of ``text``, cut to at most ``limit`` bytes (at a line boundary when one fits)."""
    kept = text.rstrip().splitlines()[-lines:]
    out: list[str] = []
    size = 0
    for line in reversed(kept):
        encoded = len(line.encode("utf-8")) + 1
        if size + encoded > limit:
            if not out:  # one line longer than the limit: keep its end rather than nothing
                out.append(line.encode("utf-8")[-limit:].decode("utf-8", "ignore"))
            break
        out.append(line)
        size += encoded
    return "\n".join(reversed(out))
