"""Which paths a step changed, so that staging costs what the step touched and nothing can hide.

A change feed (Linux inotify by default; another workspace mode may supply its own list) names
the paths written since the last look. They are staged as they are on disk into loope's own
index, whatever the agent did to git's view of them: ``.gitignore`` files it wrote, index flags it
set (``skip-worktree``, ``assume-unchanged``), ``git rm`` / ``git mv`` / ``git commit`` it ran. Only
the user's ignore rules as the run started keep a new file out. Without a feed, or when it
overflowed, a scan of the tree finds the same paths.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from loope.workspace.git import Git
from loope.workspace.ignores import FrozenIgnores

SKIP_DIRS = frozenset({".git"})


class ChangeFeed(Protocol):
    """Tells which paths changed since the last call."""

    def drain(self) -> set[str] | None:
        """Paths (from the top of the work tree) changed since the last call; None when only a scan can tell.

        A path ending in ``/`` is a directory whose every file may have gone (an overlay's opaque directory).
        """

    def close(self) -> None: ...


class ChangeTracker:
    """The paths to stage after a step, and which files loope's index holds."""

    def __init__(self, git: Git, ignores: FrozenIgnores | None, tracked: set[str] | None = None) -> None:
        self.git = git
        self.ignores = ignores
        self.feed: ChangeFeed | None = None
        self._tracked = tracked
        """The files loope's index holds (asked of git when first needed, unless given)."""
        self._dirs: set[str] | None = None
        """Every directory a tracked file is (or was, this run) below: made when first needed."""

    # -- what the index holds ------------------------------------------------------------------

    @property
    def tracked(self) -> set[str]:
        if self._tracked is None:
            listing = self.git.run("ls-files", "-z", "--full-name").stdout or b""
            self._tracked = {os.fsdecode(p) for p in listing.split(b"\0") if p}
        return self._tracked

    def forget_index(self) -> None:
        """The index was rewritten wholesale (a reset): read it again when next needed."""
        self._tracked = self._dirs = None

    def _holds_tracked(self, directory: str) -> bool:
        """Whether a tracked file may be below ``directory`` (``dir/``), without looking at every tracked file."""
        if self._dirs is None:
            self._dirs = set()
            _add_parents(self._dirs, self.tracked)
        return directory.rstrip("/") in self._dirs

    def staged(self, paths: Iterable[str]) -> None:
        """``paths`` were just staged from disk: existing ones are in the index now, missing ones are not."""
        tracked, top = self.tracked, self.git.work_tree
        for path in paths:
            if os.path.lexists(top / path):
                tracked.add(path)
                if self._dirs is not None:
                    _add_parents(self._dirs, (path,))
            else:
                tracked.discard(path)

    # -- watching ------------------------------------------------------------------------------

    def watch_dirs(self) -> set[str]:
        """Every directory a change can appear in: those holding tracked files, and all not ignored on disk."""
        dirs: set[str] = set()
        _add_parents(dirs, self.tracked)
        top = self.git.work_tree
        for current, subdirs, _files in os.walk(top):
            rel_dir = os.path.relpath(current, top)
            keep = []
            for name in subdirs:
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if name in SKIP_DIRS or (rel not in dirs and self._ignored(f"{rel}/")):
                    continue
                keep.append(name)
                dirs.add(rel)
            subdirs[:] = keep
        return dirs

    def _ignored(self, path: str) -> bool:
        return self.ignores is not None and self.ignores.ignored(path)

    # -- what to stage -------------------------------------------------------------------------

    def changed_paths(self) -> tuple[list[str], list[str]]:
        """The files to stage now, and the tracked ones now beyond a symlink (gone from the tree).

        What the feed saw (or a scan found), filtered through the frozen rules. A path under a
        directory that became a link is not the tree's any more, whatever is behind the link.
        """
        seen = self.feed.drain() if self.feed is not None else None
        paths = self.scan() if seen is None else self._filter(seen)
        top, links = self.git.work_tree, set[str]()
        stage, gone = [], []
        for path in paths:
            if _beyond_link(top, path, links):
                if path in self.tracked:
                    gone.append(path)
            else:
                stage.append(path)
        return stage, gone

    def _filter(self, seen: set[str]) -> list[str]:
        tracked, top = self.tracked, self.git.work_tree
        out: set[str] = set()
        for path in seen:
            if path.endswith("/"):  # a directory replaced whole (an overlay's opaque one): what it held is gone
                if self._holds_tracked(path):  # a new one holds none (loope's own .loope/, say): no scan
                    out.update(p for p in tracked if p.startswith(path) and not os.path.lexists(top / p))
                continue
            full = top / path
            if any(part in SKIP_DIRS for part in Path(path).parts):
                continue
            if os.path.islink(full) or os.path.isfile(full):
                if path in tracked or not self._ignored(path):
                    out.add(path)
            elif os.path.isdir(full):
                continue  # its files are reported one by one (the feed lists what a new directory holds)
            elif path in tracked:
                out.add(path)  # deleted
            else:
                prefix = f"{path}/"  # a directory deleted or moved away: the files it held
                out.update(p for p in tracked if p.startswith(prefix))
        return sorted(out)

    def scan(self) -> list[str]:
        """Every file that differs from the index, found by looking at the whole tree (the slow way)."""
        modified = self.git.run("diff-files", "--name-only", "-z").stdout or b""
        args = ["ls-files", "-z", "--others"]
        if self.ignores is not None:
            args.append(f"--exclude-from={self.ignores.path}")
        untracked = self.git.run(*args).stdout or b""
        # A nested repository is listed as ``dir/``: git cannot stage it as files, and neither does loope.
        found = {os.fsdecode(p) for p in (modified + b"\0" + untracked).split(b"\0") if p and not p.endswith(b"/")}
        return sorted(found)

    def close(self) -> None:
        if self.feed is not None:
            self.feed.close()
            self.feed = None


def _beyond_link(top: Path, path: str, links: set[str]) -> bool:
    """Whether a directory on the way to ``path`` is a symlink (``links`` remembers those found)."""
    parent = os.path.dirname(path)
    while parent:
        if parent in links:
            return True
        if os.path.islink(top / parent):
            links.add(parent)
            return True
        parent = os.path.dirname(parent)
    return False


def _add_parents(dirs: set[str], paths: Iterable[str]) -> None:
    """Add every directory above each of ``paths`` to ``dirs``."""
    for path in paths:
        parent = os.path.dirname(path)
        while parent and parent not in dirs:
            dirs.add(parent)
            parent = os.path.dirname(parent)
