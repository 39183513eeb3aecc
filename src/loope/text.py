"""Small text helpers shared by the agent parsers and the checks: terminal codes, last lines, numbers."""

from __future__ import annotations

import math
import re
from datetime import datetime

from loope.errors import LoopeError

# Patterns compiled on first use (re keeps them): status, show and logs import this module and use neither.
_ANSI = (
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor movement
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: titles, hyperlinks
    r"|\x1b[()][0-9A-Za-z]"  # character set selection
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
)


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colours, cursor moves, hyperlinks)."""
    return re.sub(_ANSI, "", text)


def last_line(text: str, limit: int = 300) -> str:
    """The last non-empty line of ``text``, without escape codes, at most ``limit`` characters."""
    for line in reversed(strip_ansi(text).splitlines()):
        if line.strip():
            return line.strip()[:limit]
    return ""


def one_line(text: str, limit: int = 300) -> str:
    """All the non-empty lines of ``text`` joined into one, at most ``limit`` characters."""
    lines = [ln.strip() for ln in strip_ansi(text).splitlines() if ln.strip()]
    return " ".join(lines)[:limit]


def count(value: object) -> int:
    """A token count from untrusted JSON: a finite, non-negative number, else 0."""
    number = amount(value)
    return int(number) if number is not None else 0


def amount(value: object) -> float | None:
    """A finite, non-negative number from untrusted JSON (NaN, infinities, negatives and bools are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def local_clock(unix: float) -> str:
    """A moment as a local wall-clock time: ``15:00`` (seconds when not on the minute), dated when not today."""
    at = datetime.fromtimestamp(unix).astimezone()
    shown = at.strftime("%H:%M" if at.second == 0 else "%H:%M:%S")
    if at.date() != datetime.now().astimezone().date():
        shown = at.strftime("%Y-%m-%d ") + shown
    return shown


# Longer spellings first: the alternation takes the first that matches.
_DURATION = r"(?i)(\d+(?:\.\d+)?)\s*(hours?|hrs?|h|minutes?|mins?|ms|m|seconds?|secs?|s)?"
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str | float | int, *, what: str = "duration") -> float:
    """Seconds in ``90``, ``90s``, ``30m``, ``1h30m``, ``2h``; a LoopeError otherwise."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        seconds = float(text)
    else:
        raw = str(text).strip().replace(" ", "")
        pos, seconds = 0, 0.0
        for match in re.finditer(_DURATION, raw):
            if match.start() != pos or not match.group(0):
                break
            unit = (match.group(2) or "s").lower()
            key = "ms" if unit == "ms" else unit[0]
            seconds += float(match.group(1)) * _UNIT_S[key]
            pos = match.end()
        if not raw or pos != len(raw):
            raise LoopeError(f"{what}: {text!r} is not a duration; use for example 90s, 30m, 2h or 1h30m")
    if seconds <= 0:
        raise LoopeError(f"{what}: must be more than zero (got {text!r})")
    return seconds


def parse_min_improvement(text: str) -> tuple[float, bool]:
    """(amount, relative) from ``0.5`` or ``2%``."""
    raw = str(text).strip()
    relative = raw.endswith("%")
    try:
        amount = float(raw.rstrip("%"))
    except ValueError:
        raise ValueError(f"{text!r} is not a number or a percentage such as 0.5 or 2%") from None
    if amount < 0:
        raise ValueError("cannot be negative")
    return (amount / 100 if relative else amount), relative
