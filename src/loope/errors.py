"""The one error type users see, and the process exit codes."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # the run stopped without converging, or a check failed
EXIT_USAGE = 2  # bad flag, config, run id, or environment
EXIT_INTERRUPTED = 130  # Ctrl-C; the run is recorded as stopped


MESSAGE_LIMIT = 2000
"""Characters of an error message shown at most: a message can quote what the user gave (a goal)."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


class LoopeError(Exception):
    """A problem the user can fix: the message says what is wrong and what to do.

    The CLI prints it on one line and exits with ``exit_code``; ``LOOPE_DEBUG=1`` adds the traceback.
    """

    def __init__(self, message: str, *, exit_code: int = EXIT_USAGE) -> None:
        message = clip(message, MESSAGE_LIMIT)
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message
