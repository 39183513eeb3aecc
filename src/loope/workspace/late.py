"""Changes to a race candidate's tree after its own agent ended: another candidate's doing, undone.

Without the sandbox, one candidate's agent can write into another candidate's tree. While both run,
nothing tells whose write it was. But once a candidate's agent (and every process it started) has
ended, nothing of its own writes there any more: a change from then on is another candidate's. So
each tree's change feed is sealed when its agent ends, keeping what the agent left of the paths it
changed; whatever changes after the seal is put back (to what the agent left, or to the round's
start), with a line saying so, and when a single other candidate was still running it is the one
that did it. The sandbox makes the other trees unreachable; this is the line left without it.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from loope.workspace import safefs
from loope.workspace.changes import ChangeFeed
from loope.workspace.workspace import Workspace

T = TypeVar("T")
_FILE_MODES = ("100644", "100755", "120000")
_KEPT_BYTES = 64 << 20
"""At most this much of what an agent left is kept to put back (past it, later changes are only said)."""


@dataclass(frozen=True)
class _Left:
    """One path as its agent left it."""

    data: bytes | None = None
    link: str | None = None
    mode: int = 0o644

    @property
    def exists(self) -> bool:
        return self.data is not None or self.link is not None

    def same(self, other: _Left) -> bool:
        """The same content (a file's permissions only by whether it can be run: umasks differ)."""
        runnable = bool(self.mode & 0o111) == bool(other.mode & 0o111) or self.data is None
        return (self.data, self.link) == (other.data, other.link) and runnable


class SealedFeed:
    """A tree's change feed that can be sealed: it reports every path as before, and tells those seen since."""

    def __init__(self, inner: ChangeFeed, top: Path) -> None:
        self.inner = inner
        self.top = top
        self.left: dict[str, _Left] | None = None
        """What the agent left of the paths it changed (None until sealed, or when that is unknown)."""
        self.sealed = False
        self._pending: set[str] | None = set()

    def drain(self) -> set[str] | None:
        seen = self.inner.drain()
        pending, self._pending = self._pending, set()
        return None if seen is None or pending is None else pending | seen

    def close(self) -> None:
        self.inner.close()

    def seal(self) -> None:
        """The agent has ended: keep what it left of the paths it changed."""
        seen = self.drain()
        self._pending = seen
        self.sealed = True
        if seen is None:
            return
        left, size = {}, 0
        for path in sorted(seen):
            found = _read(self.top, path)
            size += len(found.data or b"")
            if size > _KEPT_BYTES:
                return
            left[path] = found
        self.left = left

    def since_seal(self) -> set[str] | None:
        """The paths changed since the seal (kept for the next ``drain`` too); None when only a scan could tell."""
        seen = self.inner.drain()
        if seen is None or self._pending is None:
            self._pending = None
            return None
        self._pending |= seen
        return {p for p in seen if not p.endswith("/") and Path(p).parts[:1] != (".git",)}


class LateWrites:
    """A round's trees, sealed as their agents end; what changes in one after its seal is undone."""

    def __init__(self, trees: dict[int, Workspace]) -> None:
        self.trees = trees
        self.feeds: dict[int, SealedFeed] = {}
        for index, ws in trees.items():
            tracker = ws.tracker
            if tracker is not None and tracker.feed is not None:
                tracker.feed = self.feeds[index] = SealedFeed(tracker.feed, ws.git.work_tree)
        self._running = set(trees)
        self._others: dict[int, set[int]] = {}
        self._lock = threading.Lock()

    def ended(self, index: int, step: T) -> T:
        """Candidate ``index``'s agent and everything it started have ended (``step``: what it did, passed on)."""
        with self._lock:
            self._running.discard(index)
            self._others[index] = set(self._running)
        feed = self.feeds.get(index)
        if feed is not None:
            feed.seal()
        return step

    def undo(self) -> tuple[list[str], dict[int, list[str]]]:
        """Put back what changed in each tree after its seal: a line each, and the violations of whoever did it."""
        lines: list[str] = []
        blamed: dict[int, list[str]] = {}
        for index, feed in sorted(self.feeds.items()):
            late = sorted(feed.since_seal() or ()) if feed.sealed else []
            if feed.left is not None:
                late = _put_back(self.trees[index], feed.left, late)
            if not late:
                continue
            where = ", ".join(late[:5]) + (", …" if len(late) > 5 else "")
            line = f"candidate {index}'s tree changed after its agent ended ({where})"
            line += "; put back as its agent left it" if feed.left is not None else "; too much to put back"
            others = sorted(self._others.get(index, set()))
            if len(others) == 1:
                line += f": candidate {others[0]}, the only one still running, did it"
                blamed.setdefault(others[0], []).append(
                    f"wrote into candidate {index}'s tree after that candidate's agent ended ({where})"
                )
            elif others:
                line += ": one of candidates " + ", ".join(map(str, others)) + " did it"
            lines.append(line)
        return lines, blamed


def _put_back(ws: Workspace, left: dict[str, _Left], paths: list[str]) -> list[str]:
    """Put ``paths`` back as the agent left them (or as the round started); the ones that had changed."""
    top = ws.git.work_tree
    missing = [p for p in paths if p not in left]
    start = {p: e for p, e in ws.git.entries(ws.head, missing).items() if e.mode in _FILE_MODES} if missing else {}
    blobs = ws.git.blobs([e.sha for e in start.values()]) if start else {}
    changed = []
    for path in paths:
        expected = left.get(path)
        if expected is None and path in start:
            entry = start[path]
            data = blobs[entry.sha]
            if entry.mode == "120000":
                expected = _Left(link=data.decode("utf-8", "surrogateescape"))
            else:
                expected = _Left(data=data, mode=0o755 if entry.mode == "100755" else 0o644)
        expected = expected or _Left()
        if expected.mode != -1 and not _read(top, path).same(expected):
            _restore(top, path, expected)
            changed.append(path)
    return changed


def _read(top: Path, path: str) -> _Left:
    info = safefs.lstat(top, path)
    if info is None:
        return _Left()
    if stat.S_ISLNK(info.st_mode):
        return _Left(link=os.readlink(top / path))
    if not stat.S_ISREG(info.st_mode):
        return _Left(data=None, link=None, mode=-1)  # a directory: its files are reported one by one
    return _Left(data=safefs.read_bytes(top, path) or b"", mode=stat.S_IMODE(info.st_mode))


def _restore(top: Path, path: str, left: _Left) -> None:
    if left.mode == -1:
        return
    if not left.exists:
        safefs.remove(top, path)
    elif left.link is not None:
        safefs.remove(top, path)
        safefs.write_bytes(top, path, b"")  # makes the directories on the way real ones
        safefs.remove(top, path)
        os.symlink(left.link, top / path)
    else:
        safefs.write_bytes(top, path, left.data or b"", left.mode)
