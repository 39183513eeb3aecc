"""Reading a reviewer's verdict from its final message (DESIGN.md: the last VERDICT line wins)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from loope.enums import ReviewVerdict

# A whole line reading "VERDICT: PASS|BLOCK", allowing markdown around and inside it (**, `, >, #, -, _).
_VERDICT = re.compile(r"^[\s>#*_`~\-]*verdict[*_`~]*\s*[:=]\s*[*_`~]*\s*(pass|block)\b[\s*_`~.!]*$", re.I)
_BLOCKER = re.compile(
    r"\b(blocking|blocker|must (be )?fix(ed)?|must change|changes requested|request changes|do not merge"
    r"|not (be )?(approved|acceptable|mergeable)|reject(ed)?|fails? to meet|critical (bug|issue))\b",
    re.I,
)

_NEGATED = re.compile(r"\b(no|non|not|nothing|without|zero)[\s-]+(\w+[\s-]+)?(blocking|blockers?)\b", re.I)

MAX_FINDINGS = 4000


@dataclass(frozen=True)
class Verdict:
    value: ReviewVerdict
    inferred: bool
    """True when no VERDICT line was found and the value was read from the wording."""
    findings: str
    """The message without its verdict line, bounded, for the next iteration's feedback."""

    @property
    def blocks(self) -> bool:
        return self.value == ReviewVerdict.BLOCK


def parse_verdict(message: str) -> Verdict:
    """The verdict in a reviewer's message; without a VERDICT line, blocker wording counts as BLOCK."""
    lines = message.splitlines()
    for index in range(len(lines) - 1, -1, -1):
        match = _VERDICT.match(lines[index])
        if match:
            rest = "\n".join(lines[:index] + lines[index + 1 :]).strip()
            return Verdict(ReviewVerdict(match.group(1).upper()), False, rest[:MAX_FINDINGS])
    text = message.strip()
    if not text:
        return Verdict(ReviewVerdict.BLOCK, True, "The reviewer returned an empty message, so nothing was approved.")
    value = ReviewVerdict.BLOCK if _BLOCKER.search(_NEGATED.sub(" ", text)) else ReviewVerdict.PASS
    return Verdict(value, True, text[:MAX_FINDINGS])
