"""Turn an agent CLI's error text into one line that says what happened and what to do."""

from __future__ import annotations

import re

_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"rate.?limit|\b429\b|too many requests|quota exceeded|resource.?exhausted|overloaded", re.I),
        "rate limited by the model provider; wait and retry, or lower the loop's concurrency",
    ),
    (
        re.compile(
            r"\b401\b|unauthori[sz]ed|invalid (or missing )?(x-)?api.?key|authentication|not logged in"
            r"|please (run )?/?login|run '?[\w-]+ login\b"
            r"|expired|oauth token|credentials",
            re.I,
        ),
        "not logged in or the login expired; log in with the agent's own CLI or set its API key (see `loope doctor`)",
    ),
)


def classify(text: str) -> str | None:
    """The kind of failure in ``text`` ("rate limit", "login") as an advice line, or None."""
    for pattern, advice in _KINDS:
        if pattern.search(text):
            return advice
    return None


def explain(error: str, stderr_tail: str = "") -> str:
    """``error`` with advice appended when the failure is a known kind."""
    advice = classify(error) or classify(stderr_tail[-2000:])
    first = error.strip().splitlines()[0][:300] if error.strip() else "failed"
    return f"{first} — {advice}" if advice and advice not in first else first
