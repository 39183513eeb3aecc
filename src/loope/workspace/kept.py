"""What the first run over a snapshot keeps beside it, so that later runs start without asking git.

Every overlay run's start lists the files of its snapshot's index (``ls-files``: about 20 ms at
20,000 files) and splits its own copy of that index (``update-index --split-index``: about 60 ms,
writing 1.6 MB). Both answers depend on the snapshot alone, which never changes once made, so the
first run keeps them in the layer's directory (hidden from every step, as the layer is) and the
next runs copy them. Kept before any agent has run, from the run's own copy of the snapshot index;
a kept answer that is missing or damaged is asked of git again, as the first run did.

The layer's directory is reached through a descriptor opened before the store is hidden from this
process (the mount that hides it covers it here too).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

_TRACKED = "tracked"
"""``ls-files -z --full-name`` of the snapshot's index."""
_SPLIT = "split-index"
"""A split copy of the snapshot's index: its shared part's file name on the first line, then its own part."""
_SHARED = "sharedindex."
_INDEX = "index"
"""The snapshot's own index (its stat data matches the merged view)."""


class Kept:
    """The answers kept beside one snapshot (``layer_dir``: where its index is), for a run's ``git_dir``."""

    def __init__(self, layer_dir: Path, git_dir: Path) -> None:
        self.git_dir = git_dir
        self.split = False
        """Whether the kept split index was put in place (and need not be kept again)."""
        self._dir = os.open(layer_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        self.listing = _read(self._dir, _TRACKED)
        """The tracked files as kept (None: none were)."""

    def tracked(self) -> set[str] | None:
        """The kept list of tracked files, if it holds as many as the snapshot's index."""
        if self.listing is None:
            return None
        paths = set(self.listing.decode("utf-8", "surrogateescape").split("\0")) - {""}  # as os.fsdecode does
        try:
            fd = os.open(_INDEX, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self._dir)
            with os.fdopen(fd, "rb") as index:
                header = index.read(12)  # "DIRC", the version, the number of entries
        except OSError:
            return None
        if header[:4] == b"DIRC" and int.from_bytes(header[8:12], "big") == len(paths):
            return paths
        self.listing = None  # to be kept again
        return None

    def split_into(self, index: Path) -> bool:
        """Put a kept split copy of the snapshot's index in place: its own part at ``index``, its shared part in
        the run's git dir (where git looks for it, for this index and for copies of it)."""
        kept = _read(self._dir, _SPLIT)
        name, _, own = (kept or b"").partition(b"\n")
        if not (name.startswith(_SHARED.encode()) and name.isascii() and b"/" not in name and own[:4] == b"DIRC"):
            return False
        shared = _read(self._dir, name.decode())
        if shared is None:
            return False
        (self.git_dir / name.decode()).write_bytes(shared)
        index.write_bytes(own)
        self.split = True
        return True

    def keep(self, tracked: set[str], index: Path) -> None:
        """Keep what this run asked git for: ``tracked``, and the split ``index`` with its shared part."""
        try:
            if self.listing is None:
                _publish(self._dir, _TRACKED, b"".join(os.fsencode(p) + b"\0" for p in sorted(tracked)))
            shared = [p for p in self.git_dir.glob(f"{_SHARED}*") if p.is_file()]
            if not self.split and len(shared) == 1 and self._clean(index):
                _publish(self._dir, shared[0].name, shared[0].read_bytes())  # first: the own part names it
                _publish(self._dir, _SPLIT, shared[0].name.encode() + b"\n" + index.read_bytes())
        except OSError:  # no room, say: a later run asks git, as this one did
            pass
        finally:
            self.close()

    def _clean(self, index: Path) -> bool:
        """Whether ``index`` was written in a later second than the snapshot's (so after its every file).

        git marks the entries of files written in the second its index is as racily clean, smudging
        their stat data: a split made then would send every later run's ``git status`` reading them.
        """
        return int(index.stat().st_mtime) > int(os.stat(_INDEX, dir_fd=self._dir).st_mtime)

    def close(self) -> None:
        if self._dir >= 0:
            os.close(self._dir)
            self._dir = -1


def _read(dir_fd: int, name: str) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _publish(dir_fd: int, name: str, data: bytes) -> None:
    """Write ``name`` in ``dir_fd`` through a temporary name and a rename (another run's copy is the same)."""
    tmp = f".{name}-{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
