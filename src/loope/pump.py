"""Moving a running process's bytes on the caller's own thread: its stdin in, its stdout and stderr out.

One ``poll`` over the pipes and the process's pidfd does what a reader thread per pipe and a
writer thread did, without starting any (each start waits for the new thread to be scheduled:
about a millisecond on a busy machine, several per git command, several git commands per
iteration). Only output still arriving after the process ended and its group was killed (a
grandchild in a session of its own holding a pipe) is left to a thread, read to its end so that
writer never blocks.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import threading
import time

from loope.streams import CHUNK_BYTES, Stream

STEP_S = 0.05
"""How often to look again when nothing can wake the poll: no pidfd, or a timeout or stop to watch for."""
_READ = select.POLLIN | select.POLLHUP | select.POLLERR
_WRITE = select.POLLOUT | select.POLLERR


class Pump:
    """Feeds ``data`` to ``proc`` and drains its pipes into ``streams``, while waiting for it."""

    def __init__(self, proc: subprocess.Popen[bytes], streams: list[Stream], data: bytes | None) -> None:
        self.proc = proc
        self._poll = select.poll()
        self._readers: dict[int, Stream] = {}
        for stream in streams:
            fd = stream.pipe.fileno()
            self._readers[fd] = stream
            self._poll.register(fd, _READ)
        self._data = memoryview(data or b"")
        self._stdin: int | None = None
        if data is not None:
            assert proc.stdin is not None
            self._stdin = proc.stdin.fileno()
            os.set_blocking(self._stdin, False)
            self._poll.register(self._stdin, _WRITE)
            if not data:
                self._close_stdin()
        self._exit: int | None = None
        with contextlib.suppress(AttributeError, OSError):  # no pidfd here: look again every STEP_S
            self._exit = os.pidfd_open(proc.pid)
            self._poll.register(self._exit, select.POLLIN)

    def wait(self, seconds: float | None) -> bool:
        """Move bytes until the process exits (True) or ``seconds`` pass (False; None: no limit)."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while self.proc.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            if self._exit is None:
                if not self._readers and self._stdin is None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.proc.wait(timeout=left)
                    continue
                left = STEP_S if left is None else min(left, STEP_S)
            self._move(-1 if left is None else max(1, int(left * 1000)))
        return True

    def drain(self, seconds: float) -> None:
        """Once the process has ended: read its pipes to their end, for at most ``seconds``, then let go."""
        self._close_stdin()
        deadline = time.monotonic() + seconds
        while self._readers and (left := deadline - time.monotonic()) > 0:
            self._move(max(1, int(left * 1000)))  # the end of a pipe wakes the poll
        for fd, stream in list(self._readers.items()):
            self._poll.unregister(fd)
            # Whoever still holds the pipe keeps writing: read on, so it never blocks (what arrives is kept
            # only until the caller detaches the stream).
            threading.Thread(target=stream.drain, name="loope-proc-drain", daemon=True).start()
        self._readers.clear()
        if self._exit is not None:
            with contextlib.suppress(OSError):
                os.close(self._exit)
            self._exit = None

    def _move(self, wait_ms: int) -> None:
        for fd, _ in self._poll.poll(wait_ms):
            if fd in self._readers:
                self._read(fd)
            elif fd == self._stdin:
                self._write()
            elif fd == self._exit:
                self._poll.unregister(fd)  # exited: the loop reaps it; keep it open until drain closes it

    def _read(self, fd: int) -> None:
        stream = self._readers[fd]
        try:
            chunk = os.read(fd, CHUNK_BYTES)
        except OSError:
            chunk = b""
        if chunk:
            stream.take(chunk)
            return
        stream.take(b"", last=True)
        self._poll.unregister(fd)
        del self._readers[fd]
        stream.pipe.close()

    def _write(self) -> None:
        assert self._stdin is not None
        try:
            sent = os.write(self._stdin, self._data[:CHUNK_BYTES])
        except BlockingIOError:
            return
        except OSError:  # it closed its stdin (or exited): the rest is not wanted
            sent = len(self._data)
        self._data = self._data[sent:]
        if not self._data:
            self._close_stdin()

    def _close_stdin(self) -> None:
        if self._stdin is None:
            return
        with contextlib.suppress(KeyError):
            self._poll.unregister(self._stdin)
        self._stdin = None
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
