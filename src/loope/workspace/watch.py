"""Which paths changed in the workspace since the last look, from Linux inotify.

Finding an agent's changes by scanning costs what the repository weighs (git stats every file);
listening to the kernel costs what the agent touched. Where inotify is unavailable, its watch
limit is reached or its queue overflows, ``drain`` returns None and the caller scans instead.
Each file is watched too, by its inode: inotify reports a write to a watched directory's file only
when it is made through that directory, so a write through another name (a hard link made from
outside the tree, in /tmp say) would go unseen. An inode's watch sees every write, through any name,
and every change of its link count. A file with several names in the tree is reported at every
drain from then on, under all of them. At most ``FILE_WATCHES`` files are watched (a quarter of the
user's inotify watches): a larger tree is scanned instead.
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
_IN_DONT_FOLLOW = 0x02000000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_MASK = (
    _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
) | _IN_ONLYDIR
_FILE_MASK = _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_DONT_FOLLOW
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


def _max_file_watches() -> int:
    try:
        limit = int(Path("/proc/sys/fs/inotify/max_user_watches").read_text())
    except (OSError, ValueError):
        limit = 8192
    return min(100_000, limit // 4)


FILE_WATCHES = _max_file_watches()


class Watcher:
    """Watches every directory under ``root`` that holds files loope tracks, and any created later."""

    def __init__(self, root: Path, dirs: Iterable[str]) -> None:
        self.root = root
        self._lib = _libc()
        self._fd = -1
        self._dirs: dict[int, str] = {}
        self._files: dict[int, str] = {}
        """Watched files by their watch (one per inode: the name last seen for it)."""
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
        for rel in list(self._dirs.values()):
            self._watch_files(rel)

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

    def _watch_files(self, rel: str) -> None:
        """Watch each file directly in directory ``rel``; note those with more than one name."""
        try:
            with os.scandir(self.root / rel) as entries:
                files = [e for e in entries if e.is_file(follow_symlinks=False)]
        except OSError:
            return
        for entry in files:
            self._watch_file(os.path.join(rel, entry.name) if rel else entry.name)

    def _watch_file(self, rel: str) -> None:
        if self.broken or self._lib is None:
            return
        if len(self._files) >= FILE_WATCHES:
            self._give_up()  # too many files to watch one by one: scanning is the fallback
            return
        wd = self._lib.inotify_add_watch(self._fd, os.fsencode(os.path.join(self.root, rel)), _FILE_MASK)
        if wd < 0:
            if ctypes.get_errno() not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                self._give_up()
            return  # gone already, or a symlink by now: its directory's event reports it
        self._files[wd] = rel
        if _linked(self.root / rel):
            self._linked.add(rel)

    def _watch_tree(self, rel: str) -> None:
        """A directory appeared (created or moved in): watch it and everything under it."""
        self._watch(rel)
        self._watch_files(rel)
        top = self.root / rel
        for current, subdirs, _files in os.walk(top):
            subdirs[:] = [d for d in subdirs if d not in _SKIP_DIRS]
            for name in subdirs:
                sub = os.path.relpath(os.path.join(current, name), self.root)
                self._watch(sub)
                self._watch_files(sub)

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
                self._files.pop(wd, None)
                continue
            if wd in self._files:
                self._file_event(self._files[wd], mask)
                continue
            parent = self._dirs.get(wd)
            if parent is None or not raw:
                continue
            name = os.fsdecode(raw)
            rel = os.path.join(parent, name) if parent else name
            if name in _SKIP_DIRS:
                continue
            self._changed.add(rel)
            if mask & _IN_ISDIR and mask & (_IN_CREATE | _IN_MOVED_TO):
                self._watch_tree(rel)
                self._changed.update(self._files_under(rel))
            elif mask & (_IN_CREATE | _IN_MOVED_TO):
                self._watch_file(rel)
                if _linked(self.root / rel):  # a new name for a file: its other names in the tree too
                    self._linked.update(self._names_of(rel))

    def _file_event(self, rel: str, mask: int) -> None:
        """A watched file was written or its link count changed, through whichever of its names."""
        self._changed.add(rel)
        if mask & _IN_ATTRIB and _linked(self.root / rel):
            self._linked.add(rel)

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
