"""What an overlay workspace changed, read from its upper layer: exactly that layer's entries.

Everything a run wrote is in the upper layer and nothing else is: a file written or touched (its
copy), a file deleted (a whiteout, a 0/0 character device), a directory removed and made again (an
opaque directory, which hides all that was below it). Reading the layer costs what the run changed,
never the size of the tree, and needs no inotify; a write through any name, by any process, is seen.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_Signature = tuple[int, int, int, int, int]


class UpperFeed:
    """A ``ChangeFeed`` over an overlay's upper layer: paths whose entry appeared, changed or went since the last look.

    An opaque directory is reported as ``dir/`` (every file the tree held below it may be gone).
    """

    def __init__(self, upper: Path, xattr_prefix: str) -> None:
        self.upper = upper
        self._opaque_key = f"{xattr_prefix}opaque"
        self._seen = self._entries()

    def drain(self) -> set[str] | None:
        now = self._entries()
        changed: set[str] = set()
        for path, sig in now.items():
            if self._seen.get(path) != sig and (not path.endswith("/") or self._opaque(path)):
                changed.add(path)  # a plain directory is only where files are: they are listed themselves
        changed.update(path.rstrip("/") for path in self._seen if path not in now)
        self._seen = now
        return changed

    def _opaque(self, path: str) -> bool:
        try:
            return os.getxattr(self.upper / path[:-1], self._opaque_key, follow_symlinks=False) == b"y"
        except OSError:
            return False

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
