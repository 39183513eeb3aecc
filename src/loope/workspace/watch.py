"""Which paths changed in the workspace since the last look, from Linux inotify.

Finding an agent's changes by scanning costs what the repository weighs (git stats every file);
listening to the kernel costs what the agent touched. Where inotify is unavailable, its watch
limit is reached or its queue overflows, ``drain`` returns None and the caller scans instead.
A file given a second name in the tree (a hard link) is reported at every drain from then on, under
all its names: a write through one name raises no event for the others. (A link made from outside
the tree raises no event at all; the sandbox leaves an agent no such place.)
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import struct
import sys
from collections.abc import Iterable
from pathlib import Path

_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_FROM = 0x040
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_ISDIR = 0x40000000
_IN_ONLYDIR = 0x01000000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_MASK = (
    _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
) | _IN_ONLYDIR
_HEADER = struct.Struct("iIII")
_SKIP_DIRS = frozenset({".git"})


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    # The C library the interpreter already links (no `ldconfig -p` run, as find_library would do).
    for name in (None, "libc.so.6"):
        try:
            lib = ctypes.CDLL(name, use_errno=True)
            lib.inotify_init1  # noqa: B018 - present on glibc and musl; absent elsewhere
        except (OSError, AttributeError):
            continue
        return lib
    return None


def _linked(path: Path) -> bool:
    """Whether ``path`` is a regular file with more than one name."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_nlink > 1


class Watcher:
    """Watches every directory under ``root`` that holds files loope tracks, and any created later."""

    def __init__(self, root: Path, dirs: Iterable[str]) -> None:
        self.root = root
        self._lib = _libc()
        self._fd = -1
        self._dirs: dict[int, str] = {}
        self._changed: set[str] = set()
        self._linked: set[str] = set()
        """Files with another hard link: a write through the other name raises no event here."""
        self.broken = self._lib is None
        if self._lib is None:
            return
        fd = self._lib.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            self.broken = True
            return
        self._fd = fd
        for rel in sorted({"", *dirs}):
            self._watch(rel)

    @property
    def active(self) -> bool:
        return not self.broken

    def _watch(self, rel: str) -> None:
        if self.broken or self._lib is None or any(part in _SKIP_DIRS for part in Path(rel).parts):
            return
        path = os.path.join(self.root, rel) if rel else str(self.root)
        wd = self._lib.inotify_add_watch(self._fd, os.fsencode(path), _MASK)
        if wd < 0:
            code = ctypes.get_errno()
            if code in (errno.ENOENT, errno.ENOTDIR):
                return  # gone already; its parent's event reports the change
            self._give_up()  # ENOSPC (the watch limit) or worse: scanning is the fallback
            return
        self._dirs[wd] = rel

    def _watch_tree(self, rel: str) -> None:
        """A directory appeared (created or moved in): watch it and everything under it."""
        self._watch(rel)
        top = self.root / rel
        for current, subdirs, _files in os.walk(top):
            subdirs[:] = [d for d in subdirs if d not in _SKIP_DIRS]
            for name in subdirs:
                self._watch(os.path.relpath(os.path.join(current, name), self.root))

    def _give_up(self) -> None:
        self.broken = True
        self.close()

    def drain(self) -> set[str] | None:
        """Paths (relative to the root) changed since the last call; None when only a scan can tell."""
        if self.broken:
            return None
        while True:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                break
            except OSError:
                self._give_up()
                return None
            self._parse(data)
            if self.broken:
                return None
        changed, self._changed = self._changed, set()
        self._linked = {p for p in self._linked if _linked(self.root / p)}
        return changed | self._linked

    def _parse(self, data: bytes) -> None:
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, size = _HEADER.unpack_from(data, offset)
            raw = data[offset + _HEADER.size : offset + _HEADER.size + size].rstrip(b"\0")
            offset += _HEADER.size + size
            if mask & _IN_Q_OVERFLOW:
                self._give_up()
                return
            if mask & _IN_IGNORED:
                self._dirs.pop(wd, None)
                continue
            parent = self._dirs.get(wd)
            if parent is None or not raw:
                continue
            name = os.fsdecode(raw)
            rel = os.path.join(parent, name) if parent else name
            if name in _SKIP_DIRS:
                continue
            self._changed.add(rel)
            if not mask & _IN_ISDIR and mask & (_IN_CREATE | _IN_MOVED_TO) and _linked(self.root / rel):
                self._linked.update(self._names_of(rel))
            if mask & _IN_ISDIR and mask & (_IN_CREATE | _IN_MOVED_TO):
                self._watch_tree(rel)
                self._changed.update(self._files_under(rel))

    def _names_of(self, rel: str) -> list[str]:
        """Every name the file ``rel`` has in the watched tree (a hard link just made: rare, so a walk is fine)."""
        try:
            inode = os.lstat(self.root / rel).st_ino
        except OSError:
            return [rel]
        names = [rel]
        for current, subdirs, files in os.walk(self.root):
            subdirs[:] = [d for d in subdirs if d not in _SKIP_DIRS]
            for name in files:
                path = os.path.join(current, name)
                with contextlib.suppress(OSError):
                    if os.lstat(path).st_ino == inode:
                        names.append(os.path.relpath(path, self.root))
        return names

    def _files_under(self, rel: str) -> list[str]:
        found = []
        for current, subdirs, files in os.walk(self.root / rel):
            subdirs[:] = [d for d in subdirs if d not in _SKIP_DIRS]
            found += [os.path.relpath(os.path.join(current, f), self.root) for f in files]
        return found

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1
