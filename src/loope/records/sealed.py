"""A JSON-lines log only the runner writes: numbered lines, put back when anything else changed it.

``events.jsonl`` lies in the run directory, which an agent reaches when the sandbox is off. The
runner writes it through a descriptor it holds, numbers each line (``seq``: 1, 2, …) and keeps a
copy of every byte in a file with no name beside it (nothing can open it by path). Before each
line it adds, and after every step, it compares the file with what it wrote (the same file, the
same size, the same change time: any write, rename or link changes one of them); when anything
else wrote, moved or replaced it, the file is put back from the copy and the step is told.

Readers (``records.tails.EventTail``) take a line only when its ``seq`` is the next one, so a line an
agent appends is not believed even before the runner puts the file back, unless it was forged with
the right number, which a live view may then show until the runner's next line. With the sandbox on,
the run directory is read-only to the agent and none of this is needed.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class SealedLog:
    """Appends numbered JSON lines to ``path``; ``verify`` undoes what anything else did to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seq = 0
        self._lock = threading.Lock()
        self._dir = -1
        self._fd = -1
        self._copy: Any = None
        self._size = 0
        """How long the file is by the runner's own count."""
        self._mark: tuple[int, int, int, int] | None = None
        """(device, inode, size, change time) of the file after the runner's last write."""
        self._found: list[str] = []

    # -- writing -------------------------------------------------------------------------------

    def append(self, data: dict[str, Any]) -> None:
        """Add one event (a single write: lines never interleave)."""
        with self._lock:
            try:
                self.open()
                with contextlib.suppress(FileNotFoundError):  # its directory is gone: see ``verify``
                    self._repair()
                line = (json.dumps({**data, "seq": self.seq + 1}, ensure_ascii=False, default=str) + "\n").encode()
                os.write(self._fd, line)
                os.write(self._copy.fileno(), line)
                self.seq += 1
                self._size += len(line)
                self._mark = self._stamp()
            except OSError as exc:
                if exc.filename is None:
                    raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
                raise

    def verify(self) -> list[str]:
        """Put the file back if anything else changed it since the runner last wrote; a line for each time."""
        with self._lock:
            if self._fd >= 0:
                if os.fstat(self._dir).st_nlink == 0:
                    # Its directory was deleted (and made again since, by ``records.anchor``): carry on there.
                    os.close(self._dir)
                    self._dir = os.open(self.path.parent, _DIR_FLAGS)
                self._repair()
            found, self._found = self._found, []
            return found

    def close(self) -> None:
        with self._lock:
            for fd in (self._fd, self._dir):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            if self._copy is not None:
                self._copy.close()
            self._fd = self._dir = -1
            self._copy = None

    # -- the file as the runner left it --------------------------------------------------------

    def open(self) -> None:
        """Hold the file from now on, as it is (a resumed or continued run's earlier lines are kept and counted).

        Called before anything else can move what lies above it; ``append`` calls it when needed.
        """
        import tempfile  # loads random and shutil: the writer only, not the readers of events.jsonl

        if self._fd >= 0:
            return
        self._dir = os.open(self.path.parent, _DIR_FLAGS)
        self._fd = os.open(self.path.name, _APPEND_FLAGS, 0o644, dir_fd=self._dir)
        # The copy lives as long as the run: closed by ``close``, not by a block.
        self._copy = tempfile.TemporaryFile(dir=self.path.parent, buffering=0)  # noqa: SIM115 - see above
        earlier = os.open(self.path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self._dir)
        with open(earlier, "rb", closefd=True) as handle:
            for line in handle:
                self._copy.write(line)
                self.seq = _seq_of(line, self.seq)
        self._size = self._copy.tell()
        self._mark = self._stamp()

    def _stamp(self) -> tuple[int, int, int, int]:
        info = os.fstat(self._fd)
        return info.st_dev, info.st_ino, self._size, info.st_ctime_ns

    def _repair(self) -> None:
        """Put the runner's bytes back when the file there is not the one it wrote, as it wrote it."""
        try:
            there = os.stat(self.path.name, dir_fd=self._dir, follow_symlinks=False)
        except FileNotFoundError:
            there = None
        if there is not None and (there.st_dev, there.st_ino, there.st_size, there.st_ctime_ns) == self._mark:
            return
        what = "removed" if there is None else "changed"
        self._put_back()
        self._found.append(f"{self.path.name} is written only by loope; it was {what} and is put back")

    def _put_back(self) -> None:
        import shutil  # loads the compression modules: only when the file was tampered with

        tmp = f".{self.path.name}.{os.getpid()}.loope-tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=self._dir)
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=self._dir)
        try:
            with open(out, "wb", closefd=True) as handle:
                self._copy.seek(0)
                shutil.copyfileobj(self._copy, handle)
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISDIR(os.stat(self.path.name, dir_fd=self._dir, follow_symlinks=False).st_mode):
                    shutil.rmtree(self.path.name, dir_fd=self._dir)
            os.replace(tmp, self.path.name, src_dir_fd=self._dir, dst_dir_fd=self._dir)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self._dir)
            raise
        self._size = self._copy.seek(0, os.SEEK_END)
        os.close(self._fd)
        self._fd = os.open(self.path.name, _APPEND_FLAGS, 0o644, dir_fd=self._dir)
        self._mark = self._stamp()


def _seq_of(line: bytes, last: int) -> int:
    """The number of an earlier runner's line (a line without one, from an older loope, counts as the next)."""
    try:
        data = json.loads(line)
    except ValueError:
        return last
    seq = data.get("seq") if isinstance(data, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else last + 1
