"""vitest: the `` FAIL  file > suite > test`` blocks of its failure summary."""

from __future__ import annotations

import re
from collections.abc import Sequence

from loope.verify.failures.common import JS_FILE_HEAD, Found, failure_of, js_message

_VITEST_BANNER = re.compile(r"^\s*RUN\s+v\d")


def _vitest_head(line: str) -> str:
    """The test id of a vitest "FAIL" header, or "" when the line is none."""
    head = JS_FILE_HEAD.match(line)
    if head is None:
        return ""
    name = head.group(1).strip()
    if " > " in name:
        return name
    if name.endswith(" ]") and " [ " in name:  # a suite that failed to load
        return name[: name.find(" [ ")].strip()
    return ""


def _vitest_stop(line: str) -> bool:
    return "⎯" in line or bool(_vitest_head(line))


def parse_vitest(lines: Sequence[str]) -> list[Found]:
    if not any(_VITEST_BANNER.match(x) or x.lstrip().startswith("Test Files ") or "⎯" in x for x in lines):
        return []
    found: list[Found] = []
    group: list[tuple[int, str]] = []  # consecutive headers share one error
    for pos, line in enumerate(lines):
        name = _vitest_head(line)
        if name:
            group.append((pos, name))
            next_line = lines[pos + 1] if pos + 1 < len(lines) else ""
            if _vitest_head(next_line):
                continue
            message = js_message(lines, pos + 1, stop=_vitest_stop)
            found.extend((p, failure_of(n, message, "vitest")) for p, n in group)
            group = []
    return found


_SUMMARY = re.compile(r"^Tests\s+(\d+) failed\b")


def summary_count(line: str) -> int | None:
    """Failed tests in vitest's ``Tests  2 failed | 5 passed (7)``, else None."""
    return int(match.group(1)) if (match := _SUMMARY.match(line)) else None
