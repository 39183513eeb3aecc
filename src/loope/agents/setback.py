"""Failures that are not the agent's fault: a transient provider error, or a plan's usage limit.

A step that failed this way is tried again (after a backoff, or once the limit resets) instead of
ending the run. Adapters read the CLI's own signal where it has one (claude's ``api_error_status``
and ``rate_limit_event``, the ``exec:`` protocol's ``retry`` / ``limit`` lines); ``from_text``
reads what the other CLIs print (codex, gemini, opencode, copilot, qwen …), phrases not bare
numbers, so a failing test named ``test_429`` earns no retry.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from typing import Literal

from loope.record import record

SetbackKind = Literal["transient", "limit"]


@record(frozen=True)
class Setback:
    """Why a failed step may succeed when tried again."""

    kind: SetbackKind
    reason: str
    reset_at: float | None = None
    """Unix seconds when a usage limit resets (None: unknown)."""
    retry_after: float | None = None
    """Seconds the provider asked to wait before the next try (a ``retry-after``)."""


def transient(reason: str, retry_after: float | None = None) -> Setback:
    return Setback("transient", reason, retry_after=retry_after)


def limit(reason: str, reset_at: float | None) -> Setback:
    return Setback("limit", reason, reset_at=reset_at)


_LIMIT = re.compile(
    r"usage.?limit|hit your (?:\S+ )?limit|limit (?:reached|will reset|resets)|quota (?:exceeded|exhausted)"
    r"|exhausted your (?:\S+ )?quota|resource.?exhausted|daily (?:request )?limit|plan(?:'s)? limit",
    re.I,
)
_TRANSIENT = re.compile(
    r"(?:http|status|code|error)\W{0,3}(?:429|5\d\d)\b|\b(?:429|5\d\d) (?:too many|internal|bad gateway|service"
    r"|gateway|overloaded)|too many requests|rate.?limit|\boverloaded|high demand|temporarily unavailable"
    r"|service unavailable|bad gateway|internal server error|server.?error|exceeded retry limit"
    r"|stream (?:disconnected|error|closed)|connection (?:reset|refused|error|closed|timed out|failed)"
    r"|econnreset|econnrefused|etimedout|eai_again|socket hang up|fetch failed|network error|premature close",
    re.I,
)
_IN = re.compile(
    r"(?:try again|retry|reset|resets|available again)\s+(?:in|after)\s+((?:\d+(?:\.\d+)?\s*"
    r"(?:hours?|hrs?|h|minutes?|mins?|ms|m|seconds?|secs?|s)(?![a-z])[\s,and]*)+)",
    re.I,
)
_UNIT = re.compile(r"(\d+(?:\.\d+)?)\s*(hours?|hrs?|h|minutes?|mins?|ms|m|seconds?|secs?|s)", re.I)
_RETRY_AFTER = re.compile(r"retry[-_ ]?after\W{0,3}(\d+(?:\.\d+)?)|\"retryDelay\"\W{0,3}\"?(\d+(?:\.\d+)?)s", re.I)
# Codex prints its local reset time to the minute: "try again at 10:50 AM" or "… at Dec 2nd, 2026 9:05 AM".
_AT = re.compile(
    r"(?:try again|resets?|available again)\s+(?:at\s+)?(?:(?P<month>[A-Z][a-z]{2}) (?P<day>\d{1,2})(?:st|nd|rd|th)?,?"
    r"\s+(?P<year>\d{4})\s+(?:at\s+)?)?(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)",
    re.I,
)


def from_text(text: str, *, now: float | None = None) -> Setback | None:
    """A setback named in an agent's error output, with the reset time when it says one; else None."""
    if not text.strip():
        return None
    now = time.time() if now is None else now
    reason = _first_line(text)
    if _LIMIT.search(text):
        return limit(reason, reset_from_text(text, now=now))
    if _TRANSIENT.search(text):
        after = _RETRY_AFTER.search(text)
        wait = float(after.group(1) or after.group(2)) if after else _seconds_in(text)
        return transient(reason, wait)
    return None


def reset_from_text(text: str, *, now: float) -> float | None:
    """Unix seconds of the reset a limit message names ("try again in 2 hours", "at 10:50 AM")."""
    seconds = _seconds_in(text)
    if seconds is not None:
        return now + seconds
    after = _RETRY_AFTER.search(text)
    if after:
        return now + float(after.group(1) or after.group(2))
    found = _AT.search(text)
    return _clock_time(found, now) if found else None


def _seconds_in(text: str) -> float | None:
    found = _IN.search(text)
    if not found:
        return None
    total = 0.0
    for amount, spelled in _UNIT.findall(found.group(1)):
        unit = spelled.lower()
        scale = 0.001 if unit == "ms" else {"h": 3600.0, "m": 60.0, "s": 1.0}[unit[0]]
        total += float(amount) * scale
    return total


def _clock_time(found: re.Match[str], now: float) -> float:
    """A printed local clock time as Unix seconds: the next such time, to the end of its minute (it was cut)."""
    hour = int(found["hour"]) % 12 + (12 if found["ampm"].lower().startswith("p") else 0)
    minute = int(found["minute"] or 0)
    local = datetime.fromtimestamp(now).astimezone()
    if found["year"]:
        month = datetime.strptime(found["month"], "%b").month
        at = local.replace(year=int(found["year"]), month=month, day=int(found["day"]))
    else:
        at = local
    at = at.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if not found["year"] and at.timestamp() + 60 < now:
        at += timedelta(days=1)  # "10:50 AM" printed after 10:50 is tomorrow's
    return at.timestamp() + 60


def iso(unix: float) -> str:
    """Unix seconds as ISO 8601 UTC, to the second."""
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_reset(value: object) -> float | None:
    """A reset time given as Unix seconds (or milliseconds) or ISO 8601; None when it is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) / 1000 if value > 1e11 else float(value)
    if isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            return parse_reset(float(text))
        except ValueError:
            pass
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        return (parsed if parsed.tzinfo else parsed.astimezone()).timestamp()
    return None


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.strip().splitlines() if ln.strip()), "")
    return line[:300]
