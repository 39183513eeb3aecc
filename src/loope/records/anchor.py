"""The run directory's place, held open: a step that moves it away, or puts something in its place, ends the run.

Run in place, the run directory lies in the agent's own workspace (``.loope/runs/<id>``); with the
sandbox off, an agent's shell can ``mv .loope elsewhere``, or leave a link or a directory of its own
there. Every directory from ``.loope`` down to the run directory is held open as the run starts.
After each step, before loope writes anything by path, each is compared with what stands at its
path now (outermost first). One that moved is put back where it was (whatever the step put in its
place is moved aside first, never written into), and the run ends with that said. One that is gone
(deleted, or moved to another file system: a copy and a delete) cannot be: its path is made again,
empty, for the run's last record, which says so.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class _Held:
    path: Path
    fd: int
    device: int
    inode: int


class RunDirAnchor:
    """The run directory and those above it, below ``top`` (the project's root), held open."""

    def __init__(self, rundir: Path, top: Path) -> None:
        self.top = top
        self._lock = threading.Lock()  # reviewers end in parallel
        chain = [rundir, *rundir.parents]
        below = [p for p in chain if p != top and top in p.parents]
        self.held: list[_Held] = []
        for path in reversed(below):
            fd = os.open(path, _DIR_FLAGS)
            info = os.fstat(fd)
            self.held.append(_Held(path, fd, info.st_dev, info.st_ino))

    def check(self, who: str) -> str | None:
        """None when every directory is where it was; else what ``who`` (a step) did, after putting it back."""
        with self._lock:
            for held in self.held:
                if self._moved(held):
                    return self._put_back(held, who)
        return None

    def close(self) -> None:
        for held in self.held:
            with contextlib.suppress(OSError):
                os.close(held.fd)
        self.held = []

    def _moved(self, held: _Held) -> bool:
        try:
            info = os.lstat(held.path)
            deleted = os.fstat(held.fd).st_nlink == 0  # a new directory may be given the deleted one's inode
        except OSError:
            return True
        return deleted or (info.st_dev, info.st_ino) != (held.device, held.inode)

    def _put_back(self, held: _Held, who: str) -> str:
        rel = held.path.relative_to(self.top)
        now = _where(held)
        aside = None
        if os.path.lexists(held.path):
            aside = held.path.with_name(f".{held.path.name.lstrip('.')}.replaced-{os.getpid()}")
            os.rename(held.path, aside)  # a rename: what the step put there is not followed, nor written into
        put = f"; what the step put in its place is now at {aside}" if aside else ""
        if now is None:
            os.makedirs(self.held[-1].path, exist_ok=True)  # down to the run directory, for its last record
            return f"{who} deleted {rel} and the run's records in it; loope stopped the run{put}"
        os.rename(now, held.path)
        return f"{who} moved {rel} away (to {now}); loope put it back and stopped the run{put}"


def _where(held: _Held) -> str | None:
    """Where the held directory is now (None when it was deleted)."""
    try:
        if os.fstat(held.fd).st_nlink == 0:
            return None
        now = os.readlink(f"/proc/self/fd/{held.fd}")
        info = os.lstat(now)
    except OSError:
        return None
    return now if (info.st_dev, info.st_ino) == (held.device, held.inode) else None
