"""Turn an agent CLI's error text into one line that says what happened and what to do."""

from __future__ import annotations

import re

# Phrases providers and CLIs use, not bare words: a test named test_authentication.py or a
# traceback's "line 429" must not earn login or rate-limit advice.
_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"rate.?limit|(?:http|status|code|error)\W{0,3}429\b|\b429 too many|too many requests"
            r"|quota exceeded|resource.?exhausted|\boverloaded",
            re.I,
        ),
        "rate limited by the model provider; wait and retry, or lower the loop's concurrency",
    ),
    (
        re.compile(
            r"(?:http|status|code|error)\W{0,3}401\b|\b401 unauthori|unauthori[sz]ed"
            r"|(?:invalid|incorrect) (or missing )?(x-)?api.?key|authentication.?(?:failed|error|required)"
            r"|failed to authenticate|not logged in|please (run )?/?login|run '?[\w-]+ login\b"
            r"|(?:token|session|login|credentials?|key) (?:has |is )?expired|(?:invalid|missing) credentials",
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
    advice = classify(error) or classify("\n".join(stderr_tail.strip().splitlines()[-5:]))
    first = error.strip().splitlines()[0][:300] if error.strip() else "failed"
    return f"{first} — {advice}" if advice and advice not in first else first
