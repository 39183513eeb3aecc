"""A byte-for-byte picture of a directory tree (``.git`` included), to prove a run left it untouched."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path


def snapshot(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every entry under ``root`` (relative path → kind, mode and content hash or link target).

    Nothing is followed: a symlink is recorded as its target text. ``skip`` names top-level
    entries to leave out (loope's own ``.loope`` in the user's project, say).
    """
    found: dict[str, str] = {}
    for current, dirs, files in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(current, root)
        if rel_dir == ".":
            dirs[:] = [d for d in dirs if d not in skip]
        names = [n for n in dirs + files if rel_dir != "." or n not in skip]
        for name in sorted(names):
            path = os.path.join(current, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            info = os.lstat(path)
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = f"link {os.readlink(path)}"
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = f"dir {mode:o}"
            else:
                with open(path, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
                found[rel] = f"file {mode:o} {digest}"
    return found


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The entries that differ between two snapshots (added, removed or changed), sorted."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


# What a run may add to the user's .git: new objects, its own branch and refs, its worktree's admin dir.
_LOOPE_GIT_ADDITIONS = re.compile(
    r"^\.git/(objects(/[0-9a-f]{2}(/[0-9a-f]{38})?|/pack(/pack-[0-9a-f]{40}\.(pack|idx|rev))?)?"
    r"|(logs/)?refs(/heads)?(/loope(/[^/]+(/[^/]+)?)?)?"
    r"|logs"
    r"|worktrees(/[^/]+(/(HEAD|ORIG_HEAD|commondir|gitdir|index|sharedindex\.[0-9a-f]+|logs|logs/HEAD))?)?)$"
)


def repo_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What differs in a user's repository beyond what a run itself adds to its ``.git``.

    Nothing that was there may change or go; the only new entries allowed are git objects, the
    run's ``loope/…`` branch and ``refs/loope/…`` refs, and its worktree's own admin files.
    """
    return [rel for rel in changed(before, after) if rel in before or not _LOOPE_GIT_ADDITIONS.match(rel)]
