"""The git directories an agent could reach (the user's ``.git``, a shadow git dir), kept as they were.

A worktree's git dir lives inside the user's ``.git``: an agent running ``git config``, writing a
hook or moving a branch from the workspace changes the user's repository. Around every step the
guard takes a picture of each such directory (config, hooks, info, refs and branches, packed-refs,
other worktrees, the index; not the objects, which only grow), and afterwards puts back whatever
changed, except the parts that belong to this run (its branch, its ``refs/loope/<run>/`` refs, its
worktree's own files).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from loope.record import record
from loope.workspace import safefs

# Not watched: objects only grow; other worktrees' admin files move with the runs (and checkouts) using them.
_NOT_WATCHED = frozenset({"objects", "lfs", "modules", "worktrees", "fsmonitor--daemon", "gc.log", "gc.pid"})
# Other loope runs' branches and refs: runs going on at the same time add and move their own, so only
# a deletion (an agent's attack on another run) is put back.
_OTHER_RUNS = ("refs/loope/", "refs/heads/loope/", "logs/refs/loope/", "logs/refs/heads/loope/")
_APPEND_ONLY = "logs/"


@dataclass(frozen=True)
class _Entry:
    kind: str
    """file, dir, link or other."""
    signature: tuple[int, ...]
    content: bytes | None = None
    """A file's bytes (None for reflogs, put back by length: they only ever grow)."""
    target: str | None = None


@record()
class GitDirGuard:
    """One git directory: what it held before a step, and how to put it back."""

    root: Path
    own: tuple[str, ...] = ()
    """Paths (relative to ``root``) that are this run's: loope changes them, the guard does not (``x*``: every
    name starting with ``x``)."""
    strict: tuple[str, ...] = ()
    """Paths among other runs' refs that are always put back: this run's branch, which loope moves only
    once the run ends (an agent's commit there would be merged with the run's)."""
    _before: dict[str, _Entry] = field(default_factory=dict)
    moved: dict[str, str] = field(default_factory=dict)
    """Refs the last ``restore`` put back, with the commit each had moved to (to get it back, if it was wanted)."""
    _last: dict[str, _Entry] = field(default_factory=dict)
    """The last scan: a file whose signature has not changed since is not read again."""

    def _owned(self, rel: str) -> bool:
        return any(
            rel == own or rel.startswith(f"{own}/") or (own.endswith("*") and rel.startswith(own[:-1]))
            for own in self.own
        )

    def _others(self, rel: str) -> bool:
        """Another run's branch or ref (moved by that run, so left alone unless it was deleted)."""
        return rel.startswith(_OTHER_RUNS) and rel not in self.strict

    def _scan(self) -> dict[str, _Entry]:
        found: dict[str, _Entry] = {}
        if not safefs.is_real_dir(self.root):
            return found
        for current, dirs, files in os.walk(self.root, followlinks=False):
            base = Path(current).relative_to(self.root)
            if base == Path("."):
                dirs[:] = [d for d in dirs if d not in _NOT_WATCHED]
            for name in [*dirs, *files]:
                rel = (base / name).as_posix()
                if self._owned(rel) or (base == Path(".") and name in _NOT_WATCHED):
                    continue
                info = os.lstat(os.path.join(current, name))
                found[rel] = self._entry(rel, info)
            dirs[:] = [d for d in dirs if not self._owned((base / d).as_posix())]
        self._last = found
        return found

    def _entry(self, rel: str, info: os.stat_result) -> _Entry:
        signature = (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
        seen = self._last.get(rel)
        if seen is not None and seen.signature == signature:
            return seen  # no write leaves the change time as it was: the content is the same
        if stat.S_ISLNK(info.st_mode):
            return _Entry("link", signature, target=os.readlink(self.root / rel))
        if stat.S_ISDIR(info.st_mode):
            return _Entry("dir", (info.st_mode,))
        if not stat.S_ISREG(info.st_mode):
            return _Entry("other", signature)
        content = None if rel.startswith(_APPEND_ONLY) else safefs.read_bytes(self.root, rel)
        return _Entry("file", signature, content)

    def take(self) -> None:
        """Remember the directory as it is now (before a step)."""
        self._before = self._scan()

    def restore(self) -> list[str]:
        """Put back what changed since ``take``; a line for each path put back."""
        if not self._before:
            return []
        now = self._scan()
        changed: list[str] = []
        self.moved = {}
        for rel in sorted(set(now) - set(self._before), key=len, reverse=True):
            if self._owned(rel) or self._others(rel):
                continue
            if any(rel.startswith(f"{p}/") for p in now if p != rel and p not in self._before):
                continue  # inside a new directory: removed with it
            safefs.remove(self.root, rel)
            changed.append(rel)
        for rel, old in sorted(self._before.items()):
            new = now.get(rel)
            if new is not None and ((new.kind == old.kind and new.signature == old.signature) or self._others(rel)):
                continue
            if new is not None and new.kind == "file" and old.kind == "file" and self._same_file(rel, old):
                continue
            if _users_ref(rel) and new is not None and new.kind == "file" and new.content:
                self.moved[rel] = new.content.decode("ascii", "replace").strip()
            self._put_back(rel, old, new)
            changed.append(rel)
        self._before = self._scan() if changed else now
        return changed

    def _same_file(self, rel: str, old: _Entry) -> bool:
        if old.content is None:
            info = safefs.lstat(self.root, rel)
            return info is not None and info.st_size == old.signature[1]
        return safefs.read_bytes(self.root, rel) == old.content

    def _put_back(self, rel: str, old: _Entry, new: _Entry | None) -> None:
        if new is not None and new.kind != old.kind:
            safefs.remove(self.root, rel)
        if old.kind == "dir":
            safefs.write_bytes(self.root, f"{rel}/.loope-keep", b"")
            safefs.remove(self.root, f"{rel}/.loope-keep")
            os.chmod(self.root / rel, stat.S_IMODE(old.signature[0]), follow_symlinks=False)
        elif old.kind == "link" and old.target is not None:
            safefs.remove(self.root, rel)
            safefs.write_bytes(self.root, f"{rel}.loope-link", b"")  # make sure the parents are real directories
            safefs.remove(self.root, f"{rel}.loope-link")
            os.symlink(old.target, self.root / rel)
        elif old.kind == "file" and old.content is not None:
            safefs.write_bytes(self.root, rel, old.content, stat.S_IMODE(old.signature[0]))
        elif old.kind == "file":  # a reflog: cut back to what it held
            fd = os.open(self.root / rel, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.ftruncate(fd, old.signature[1])
            finally:
                os.close(fd)


def _users_ref(rel: str) -> bool:
    """A ref the user may move themselves (not one of loope's runs')."""
    return rel.startswith("refs/") and not rel.startswith(("refs/loope/", "refs/heads/loope/"))


def watched_git_dirs(
    mode: str, git_dir: Path | None, branch: str | None, user_repo: Path | None, run_id: str | None
) -> list[tuple[str, GitDirGuard]]:
    """The git dirs an agent of this run could write to, each with the label its violations carry."""
    mine = [f"refs/loope/{run_id}", f"logs/refs/loope/{run_id}"] if run_id else []
    found: list[tuple[str, GitDirGuard]] = []
    if mode == "worktree" and git_dir is not None:
        common = _common_dir(git_dir)
        # The branch's reflog grows with loope's own moves; the branch itself is guarded like the rest.
        own = (*mine, f"logs/refs/heads/{branch}") if branch else tuple(mine)
        strict = (f"refs/heads/{branch}",) if branch else ()
        found.append((".git", GitDirGuard(common, own, strict)))
        return found
    if user_repo is not None:
        dot_git = user_repo / ".git"
        if safefs.is_real_dir(dot_git):
            found.append((".git", GitDirGuard(dot_git)))
    if git_dir is not None:
        # loope's own shadow repository: its branch, index and logs move with every commit loope makes
        # (its index is split: git writes a new shared part now and then, named by its own hash).
        shadow = ("index", "sharedindex.*", "refs/heads", "logs", "ORIG_HEAD", "COMMIT_EDITMSG", *mine)
        found.append((git_dir.name, GitDirGuard(git_dir, shadow)))
    return found


def _common_dir(git_dir: Path) -> Path:
    """The repository's own git dir behind a worktree's (``commondir`` names it)."""
    try:
        named = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir
    return (git_dir / named).resolve() if not os.path.isabs(named) else Path(named)
