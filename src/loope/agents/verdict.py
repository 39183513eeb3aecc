"""Reading a reviewer's verdict from its final message (DESIGN.md: the last VERDICT line wins).

An explicit block is read as a block in any markdown decoration and with any words after it
(``**verdict: block** - fix it``, ``## VERDICT: BLOCK``, ``Verdict: BLOCK.``); a pass is read only
when the line says PASS and nothing else. Whatever is unclear is inferred from the wording, and an
inference never turns an explicit block into a pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from loope.enums import ReviewVerdict
from loope.record import record

_DECORATION = re.compile(r"[*_`~]+")
# After decoration is dropped: "verdict", a separator, then the value and whatever follows it.
_VERDICT = re.compile(r"^[\s>#\-+|]*verdict\s*(?:[:=|\-\u2013\u2014]+|\bis\b)?\s*(pass|block)\b(.*)$", re.I)
# A heading or label "## Verdict" whose value is on the next line.
_LABEL = re.compile(r"^[\s>#\-+|]*verdict\s*[:=\-\u2013\u2014]*\s*$", re.I)
_VALUE = re.compile(r"^[\s>#\-+|]*(pass|block)\b(.*)$", re.I)
_ONLY_PUNCTUATION = re.compile(r"^[\s.!|]*$")
_BLOCKER = re.compile(
    r"\b(blocking|blocker|must (be )?fix(ed)?|must change|changes requested|request changes|do not merge"
    r"|not (be )?(approved|acceptable|mergeable)|reject(ed)?|fails? to meet|critical (bug|issue))\b",
    re.I,
)

_NEGATED = re.compile(r"\b(no|non|not|nothing|without|zero)[\s-]+(\w+[\s-]+)?(blocking|blockers?)\b", re.I)

MAX_FINDINGS = 4000


@record(frozen=True)
class Verdict:
    value: ReviewVerdict
    inferred: bool
    """True when no clear VERDICT line was found and the value was read from the wording."""
    findings: str
    """The message without its verdict line, bounded, for the next iteration's feedback."""

    @property
    def blocks(self) -> bool:
        return self.value == ReviewVerdict.BLOCK


@dataclass(frozen=True)
class _Line:
    index: int
    """The line the verdict was read from (the value's line for a heading with the value below it)."""
    value: ReviewVerdict
    clear: bool
    """False for a PASS with more words after it (``VERDICT: PASS, but fix the tests``)."""


def _verdict_lines(lines: list[str]) -> list[_Line]:
    found: list[_Line] = []
    plain = [_DECORATION.sub("", line) for line in lines]
    for number, line in enumerate(plain):
        index, match = number, _VERDICT.match(line)
        if match is None and _LABEL.match(line):
            following = next((i for i in range(number + 1, len(plain)) if plain[i].strip()), None)
            if following is not None:
                index, match = following, _VALUE.match(plain[following])
        if match is None:
            continue
        value = ReviewVerdict.BLOCK if match.group(1).lower() == "block" else ReviewVerdict.PASS
        clear = value == ReviewVerdict.BLOCK or bool(_ONLY_PUNCTUATION.match(match.group(2)))
        if not found or found[-1].index != index:
            found.append(_Line(index, value, clear))
    return found


def parse_verdict(message: str) -> Verdict:
    """The verdict in a reviewer's message; without a clear VERDICT line, blocker wording counts as BLOCK."""
    lines = message.splitlines()
    verdicts = _verdict_lines(lines)
    if verdicts:
        last = verdicts[-1]
        rest = "\n".join(lines[: last.index] + lines[last.index + 1 :]).strip()
        if last.clear:
            return Verdict(last.value, False, rest[:MAX_FINDINGS])
        # "VERDICT: PASS but ..." is unclear: a pass only when nothing in the message blocks.
        blocked = any(v.value == ReviewVerdict.BLOCK for v in verdicts) or _has_blocker(message)
        return Verdict(ReviewVerdict.BLOCK if blocked else ReviewVerdict.PASS, True, message.strip()[:MAX_FINDINGS])
    text = message.strip()
    if not text:
        return Verdict(ReviewVerdict.BLOCK, True, "The reviewer returned an empty message, so nothing was approved.")
    value = ReviewVerdict.BLOCK if _has_blocker(text) else ReviewVerdict.PASS
    return Verdict(value, True, text[:MAX_FINDINGS])


def _has_blocker(text: str) -> bool:
    return bool(_BLOCKER.search(_NEGATED.sub(" ", text)))


def finding_lines(findings: str, count: int = 5, width: int = 200) -> list[str]:
    """The first non-empty lines of a reviewer's findings, each cut to ``width``: what the views show."""
    lines = [line.strip() for line in findings.splitlines() if line.strip()]
    return [line if len(line) <= width else line[: width - 1] + "…" for line in lines[:count]]
