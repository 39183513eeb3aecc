"""Moving HEAD after loope's commit as ``git update-ref HEAD`` would, without starting a process.

Git moves a ref by creating ``<ref>.lock`` exclusively (whoever holds it owns the ref), writing the new
value there, appending the reflog line while it holds the lock, and renaming the lock over the ref.
Done here only where everything is as loope left it: HEAD a regular file holding the old commit
(detached), or ``ref: refs/heads/NAME`` whose loose ref file holds the old commit and whose reflogs
exist. Anything else (a packed ref, a lock held, a link, a HEAD pointed elsewhere, an identity git would
write differently) returns False, and ``git update-ref`` does it.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Mapping
from pathlib import Path

_SYMBOLIC = b"ref: refs/heads/"
_CRUD = " .,:;<>\"\\'"
"""What git strips from the ends of a name or email in an identity (and any control character)."""


def move_head(git_dir: Path, old: str, new: str, env: Mapping[str, str]) -> bool:
    """Move HEAD (detached at ``old``, or the branch it names, at ``old``) to ``new``; whether it was done.

    ``env`` is the environment ``git update-ref`` would run with: its committer names the reflog line.
    """
    head = _read(git_dir / "HEAD")
    if head == f"{old}\n".encode():
        return _replace(git_dir / "HEAD", old, new, logs=())  # as before: a detached HEAD's moves are not logged
    if head is None or not head.startswith(_SYMBOLIC) or not head.endswith(b"\n"):
        return False
    branch = head[len(b"ref: ") : -1].decode("utf-8", errors="surrogateescape")
    if "/." in branch or ".." in branch or branch.endswith(".lock") or "\\" in branch:
        return False  # not a name git would have written: let git judge it
    ident = identity(env)
    if ident is None:
        return False
    line = f"{old} {new} {ident}\n".encode()
    logs = (git_dir / "logs" / branch, git_dir / "logs" / "HEAD")
    return _read(git_dir / branch) == f"{old}\n".encode() and _replace(git_dir / branch, old, new, logs, line)


def _read(path: Path) -> bytes | None:
    """A regular file's bytes, never through a link; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read(4096) if stat.S_ISREG(os.fstat(fd).st_mode) else None


def _replace(ref: Path, old: str, new: str, logs: tuple[Path, ...], line: bytes = b"") -> bool:
    lock = ref.with_name(ref.name + ".lock")
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError:
        return False  # held by a git command right now, say
    try:
        try:
            os.write(fd, f"{new}\n".encode())
        finally:
            os.close(fd)
        if _read(ref) != f"{old}\n".encode() or not _append(logs, line):
            lock.unlink(missing_ok=True)  # moved before the lock was taken, or its logs are not as git keeps them
            return False
        os.replace(lock, ref)
    except OSError:
        lock.unlink(missing_ok=True)
        return False
    return True


def _append(logs: tuple[Path, ...], line: bytes) -> bool:
    """Append ``line`` to each reflog (regular files that exist, never through a link); False if one is not."""
    fds: list[int] = []
    try:
        for log in logs:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
            fds.append(fd)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
        for fd in fds:
            os.write(fd, line)
        return True
    except OSError:
        return False
    finally:
        for fd in fds:
            os.close(fd)


def identity(env: Mapping[str, str], role: str = "COMMITTER", now: int | None = None) -> str | None:
    """The committer (or ``role``: the author) git would write now (or at ``now``) in a reflog line or a commit,
    or None where only git can say."""
    name, email = env.get(f"GIT_{role}_NAME", ""), env.get(f"GIT_{role}_EMAIL", "")
    if f"GIT_{role}_DATE" in env or not name or not email:
        return None
    for part in (name, email):
        if part.strip(_CRUD) != part or any(c in part for c in "<>\n") or not part.isprintable():
            return None
    now = int(time.time()) if now is None else now
    offset = time.localtime(now).tm_gmtoff // 60
    sign = "-" if offset < 0 else "+"
    return f"{name} <{email}> {now} {sign}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"
