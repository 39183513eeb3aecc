"""What an overlay workspace changed, read from its upper layer: exactly that layer's entries.

Everything a run wrote is in the upper layer and nothing else is: a file written or touched (its
copy), a file deleted (a whiteout, a 0/0 character device), a directory removed and made again (an
opaque directory, which hides all that was below it), a directory of the lower layer renamed (a
directory whose redirect names where its files still are below; its old name is a whiteout). Reading
the layer costs what the run changed (a renamed directory: what it holds), never the size of the
tree, and needs no inotify; a write through any name, by any process, is seen.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_Signature = tuple[int, int, int, int, int]


class UpperFeed:
    """A ``ChangeFeed`` over an overlay's upper layer: paths whose entry appeared, changed or went since the last look.

    An opaque directory is reported as ``dir/`` (every file the tree held below it may be gone); a
    renamed one by every file it holds in ``merged``, the overlay's view (most are not in the layer).
    """

    def __init__(self, upper: Path, xattr_prefix: str, merged: Path) -> None:
        self.upper = upper
        self.merged = merged
        self._opaque_key = f"{xattr_prefix}opaque"
        self._redirect_key = f"{xattr_prefix}redirect"
        self._seen = self._entries()

    def drain(self) -> set[str] | None:
        now = self._entries()
        changed: set[str] = set()
        for path, sig in now.items():
            before = self._seen.get(path)
            if before == sig:
                continue
            if not path.endswith("/") or self._marked(path, self._opaque_key) == b"y":
                changed.add(path)  # a file, a whiteout, or a directory replaced whole
            elif (before is None or before[1] != sig[1]) and self._marked(path, self._redirect_key):
                changed.update(self._files_under(path))  # renamed here: its files are new at this name
            # Any other directory is only where files are: they are listed themselves.
        changed.update(path.rstrip("/") for path in self._seen if path not in now)
        self._seen = now
        return changed

    def _marked(self, path: str, key: str) -> bytes | None:
        try:
            return os.getxattr(self.upper / path[:-1], key, follow_symlinks=False)
        except OSError:
            return None

    def _files_under(self, path: str) -> list[str]:
        """Every file and link below directory ``path`` (ending in ``/``) as the overlay shows it."""
        found: list[str] = []
        stack = [path]
        while stack:
            rel_dir = stack.pop()
            try:
                listing = list(os.scandir(self.merged / rel_dir))
            except OSError:
                continue
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(f"{rel_dir}{entry.name}/")
                else:
                    found.append(f"{rel_dir}{entry.name}")
        return found

    def _entries(self) -> dict[str, _Signature]:
        """Every entry of the upper layer (directories with a trailing ``/``) and its stat signature."""
        found: dict[str, _Signature] = {}
        stack = [("", str(self.upper))]
        while stack:
            rel_dir, full = stack.pop()
            try:
                listing = list(os.scandir(full))
            except OSError:
                continue
            for entry in listing:
                rel = f"{rel_dir}{entry.name}"
                if not rel_dir and entry.name == ".git":
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    # A directory counts by its ctime only: what matters inside is listed on its own.
                    found[f"{rel}/"] = (info.st_mode, info.st_ino, 0, 0, info.st_ctime_ns)
                    stack.append((f"{rel}/", entry.path))
                else:
                    found[rel] = (info.st_mode, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        return found

    def close(self) -> None:
        self._seen = {}
