"""An agent's final message kept in bounded memory: its beginning and its end, never all of it.

An agent may print hundreds of megabytes; the whole output is in the step's transcript, while
the message (result.md, the ledger's summary, a reviewer's verdict) needs only its first lines and
its last ones.
"""

from __future__ import annotations

from collections import deque

HEAD_CHARS = 32_000
TAIL_CHARS = 96_000


def cut_note(dropped: int) -> str:
    return f"[… {dropped} characters cut here; the whole output is in the step's transcript …]"


def bounded(text: str, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> str:
    """``text`` itself when short; else its first ``head`` and last ``tail`` characters around a note."""
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}\n{cut_note(len(text) - head - tail)}\n{text[-tail:]}"


class MessageText:
    """Lines of a message, in order, of which only the first and last characters are kept."""

    def __init__(self, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> None:
        self._head_limit = head
        self._tail_limit = tail
        self._head: list[str] = []
        self._head_size = 0
        self._tail: deque[str] = deque()
        self._tail_size = 0
        self._dropped = 0
        self.last: str | None = None
        """The last line appended (whole, as long as one line may be)."""

    def append(self, line: str) -> None:
        """One line of the message."""
        self.last = line
        self._add(line + "\n")

    def extend(self, text: str) -> None:
        """Several lines at once (newline-ended), as one piece: cheap however many lines it holds."""
        if text:
            self.last = text.rstrip("\n").rpartition("\n")[2]
            self._add(text if text.endswith("\n") else text + "\n")

    def add(self, chunk: str) -> None:
        """A piece of a message streamed in chunks (deltas), taken as it is: no newline is added."""
        if chunk:
            self.last = chunk
            self._add(chunk)

    def _add(self, piece: str) -> None:
        room = self._head_limit - self._head_size
        if room > 0:
            cut = piece.rfind("\n", 0, room) + 1 if len(piece) > room else len(piece)
            if cut:
                self._head.append(piece[:cut])
                self._head_size += cut
                piece = piece[cut:]
            if not piece:
                return
            self._head_size = self._head_limit  # the head is closed: what follows goes to the tail
        self._tail.append(piece)
        self._tail_size += len(piece)
        while self._tail_size - len(self._tail[0]) >= self._tail_limit:
            dropped = self._tail.popleft()
            self._tail_size -= len(dropped)
            self._dropped += len(dropped)

    def __bool__(self) -> bool:
        return self.last is not None

    def text(self) -> str:
        """The message: all of it, or its beginning, a line saying how much was cut, and its end."""
        tail = "".join(self._tail)
        dropped = self._dropped
        if len(tail) > self._tail_limit:
            excess = len(tail) - self._tail_limit
            start = tail.find("\n", excess, excess + 1000) + 1 or excess  # a whole line if one starts near
            dropped += start
            tail = tail[start:]
        middle = f"{cut_note(dropped)}\n" if dropped else ""
        return "".join(self._head) + middle + tail
