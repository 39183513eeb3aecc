"""Reading a process's output: in chunks to its file, split into lines for callbacks, a bounded tail kept.

:func:`loope.proc.run_process` feeds each pipe's chunks to a :class:`Stream` (:mod:`loope.pump`).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from typing import IO

LineCallback = Callable[[str], None]

CHUNK_BYTES = 1 << 16
"""How much is read from a pipe at once (a pipe holds 64 KiB): the file is written and flushed per chunk."""
LINE_LIMIT = 1 << 20
"""The longest line handed to a callback; the rest of a longer line is dropped (the file keeps it all)."""
TAIL_BYTES = 1 << 16
TAIL_LINES = 200
_TAIL_LINE_CHARS = 4000

BlockCallback = Callable[[bytes], None]


class LineSplitter:
    """Cuts a stream of chunks into lines in memory, no line longer than ``limit`` bytes."""

    def __init__(self, limit: int = LINE_LIMIT) -> None:
        self.limit = limit
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> bytes:
        """The complete lines ``chunk`` finishes, as one block of newline-ended lines (maybe empty)."""
        end = chunk.rfind(b"\n")
        if end < 0:
            self._keep(chunk)
            return b""
        first = chunk.find(b"\n")
        head = b""
        if self._partial:
            self._keep(chunk[:first])
            head, rest = bytes(self._partial) + b"\n", chunk[first + 1 : end + 1]
            self._partial.clear()
        else:
            rest = chunk if end == len(chunk) - 1 else chunk[: end + 1]
        self._keep(chunk[end + 1 :])
        if len(rest) > self.limit:  # only a chunk larger than the limit can hold a line longer than it
            rest = b"".join(line[: self.limit] + b"\n" for line in rest.split(b"\n")[:-1])
        return head + rest

    def _keep(self, piece: bytes) -> None:
        room = self.limit - len(self._partial)
        self._partial += piece[: max(room, 0)]

    def rest(self) -> bytes:
        """The last line, when the stream ended without a newline."""
        line, self._partial = bytes(self._partial), bytearray()
        return line + b"\n" if line else b""


def split_lines(block: bytes) -> list[str]:
    """A block of newline-ended lines as text lines (UTF-8 with replacement, ``\\r`` dropped)."""
    return [line.rstrip("\r") for line in block.decode("utf-8", "replace").split("\n")[:-1]]


class Stream:
    """Drains one pipe: to a file, to a callback, and into a bounded tail.

    Output is read in chunks: each chunk is written (and flushed) to the file, then cut into lines
    in memory for the callbacks; only the last ``TAIL_BYTES`` stay in memory. The drain thread can
    outlive ``run_process`` (a grandchild that left the group holds the pipe), so what the caller
    reads is copied under ``lock``, and ``detach`` stops every use of the sink and the callback
    before the caller closes the file.

    A plain class, not a dataclass: ``loope doctor`` defines it before its first program, and a
    dataclass compiles its methods from source when it is defined.
    """

    def __init__(
        self,
        pipe: IO[bytes],
        sink: IO[bytes] | None,
        on_line: LineCallback | None,
        capture: bool,
        on_block: BlockCallback | None = None,
    ) -> None:
        self.pipe = pipe
        self.sink = sink
        self.on_line = on_line
        self.capture = capture
        self.on_block = on_block
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.tail_cut = False
        self.chunks: list[bytes] = []
        self.callback_error: BaseException | None = None
        self.sink_error: str | None = None
        self.lock = threading.Lock()
        self.detached = False
        self.splitter = LineSplitter()

    def drain(self) -> None:
        fd = self.pipe.fileno()
        try:
            while chunk := os.read(fd, CHUNK_BYTES):
                self.take(chunk)
            self.take(b"", last=True)
        finally:
            self.pipe.close()

    def take(self, chunk: bytes, *, last: bool = False) -> None:
        """One chunk read from the pipe (``last``: the pipe ended)."""
        with self.lock:
            if self.detached:
                return  # read on, so the writer never blocks, but keep nothing
            if chunk:
                self._write(chunk)
                if self.capture:
                    self.chunks.append(chunk)
                self.tail.append(chunk)
                self.tail_size += len(chunk)
                while self.tail_size - len(self.tail[0]) >= TAIL_BYTES:
                    self.tail_size -= len(self.tail.popleft())
                    self.tail_cut = True
            wanted = self.callback_error is None and (self.on_line is not None or self.on_block is not None)
            block = (self.splitter.rest() if last else self.splitter.feed(chunk)) if wanted else b""
        if block:
            self._deliver(block)

    def _deliver(self, block: bytes) -> None:
        try:
            if self.on_block is not None:
                self.on_block(block)
            if self.on_line is not None:
                for line in split_lines(block):
                    self.on_line(line)
        except Exception as exc:  # noqa: BLE001 - re-raised by run_process once the pipe is drained (Ctrl-C goes at once)
            self.callback_error = exc

    def _write(self, raw: bytes) -> None:
        if self.sink is None:
            return
        try:
            self.sink.write(raw)
            self.sink.flush()
        except OSError as exc:
            self.sink_error = f"could not write {self.sink.name}: {exc.strerror or exc}; the rest was not saved"
            self.sink = None  # the pipe is still drained: a full disk must not block the process

    def tail_text(self) -> str:
        with self.lock:
            raw, cut = b"".join(self.tail)[-TAIL_BYTES:], self.tail_cut or self.tail_size > TAIL_BYTES
        lines = [line.rstrip("\r") for line in raw.decode("utf-8", "replace").split("\n")]
        if cut:
            lines = lines[1:]  # the first line starts somewhere in the middle
        if lines and not lines[-1]:
            lines.pop()
        return "\n".join(line[:_TAIL_LINE_CHARS] for line in lines[-TAIL_LINES:])

    def captured(self) -> bytes:
        with self.lock:
            return b"".join(self.chunks)

    def detach(self) -> None:
        """No more writes to the sink, no more callbacks (the caller is about to close the file)."""
        with self.lock:
            self.detached = True
            self.sink = None
