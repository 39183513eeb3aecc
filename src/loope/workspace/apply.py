"""Landing a run's changes in a directory, safely (DESIGN.md, Safety: Apply).

Nothing is written outside the target (no ``..``, absolute paths or symlink escapes); a file the
user changed since the run's base is a conflict unless forced; deletions need ``delete``. Every
file is checked before the first one is written, so a refused apply leaves nothing half-done.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from loope.errors import EXIT_FAILED, LoopeError
from loope.records.model import RunRecord
from loope.workspace.git import Git, TreeEntry, blob_sha

Action = Literal["add", "update", "delete", "skip", "same"]
SYMLINK = "120000"
EXECUTABLE = "100755"


@dataclass(frozen=True)
class PlannedFile:
    path: str
    action: Action
    note: str = ""
    conflict: str | None = None
    entry: TreeEntry | None = None

    def line(self) -> str:
        mark = {"add": "A", "update": "M", "delete": "D", "skip": "-", "same": "="}[self.action]
        text = f"{mark} {self.path}"
        if self.conflict:
            text += f"  (conflict: {self.conflict})"
        elif self.note:
            text += f"  ({self.note})"
        return text


def _inside(root: str, path: str) -> bool:
    """Whether ``path`` is ``root`` or below it (both resolved)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _in_git_dir(root: str, path: str) -> bool:
    """Whether ``path`` (resolved, inside ``root``) is in a ``.git`` directory under ``root``, or is one."""
    return ".git" in path[len(root) :].split("/")


class _Destinations:
    """Where a run's paths land in a target, refused when outside it or in a .git; each directory is checked once.

    Paths are strings here: a few thousand files would spend more in pathlib than in the file system.
    """

    def __init__(self, target: Path) -> None:
        self.target = os.fspath(target)
        self.root = os.path.realpath(target)
        self._parents: set[str] = set()
        self._dirs: set[str] = set()

    def check(self, rel: str) -> tuple[str, os.stat_result | None]:
        """The destination of ``rel`` and its lstat (None: nothing there); LoopeError when it would land outside
        the target or in a .git."""
        parts = rel.split("/")
        if not rel or rel.startswith("/") or {"", ".", "..", ".git"} & set(parts):
            raise LoopeError(f"refusing to apply {rel!r}: the path leaves the target or enters .git")
        dest = self.path(rel)
        self.check_parent(rel, dest)
        return dest, self._check_obstacles(rel, parts, dest)

    def path(self, rel: str) -> str:
        return f"{self.target}/{rel}"

    def check_parent(self, rel: str, dest: str) -> None:
        """Refuse a destination whose directory, symlinks followed, is outside the target or in a .git."""
        directory = os.path.dirname(dest)
        if directory in self._parents:
            return
        parent = os.path.realpath(directory)
        if not _inside(self.root, parent):
            raise LoopeError(f"refusing to apply {rel!r}: a symlink in {self.target} leads outside it")
        if _in_git_dir(self.root, parent):
            raise LoopeError(f"refusing to apply {rel!r}: a symlink in {self.target} leads into a .git directory")
        self._parents.add(directory)

    def forget(self) -> None:
        """A symlink was just written: any directory may lead elsewhere now."""
        self._parents.clear()

    def _check_obstacles(self, rel: str, parts: list[str], dest: str) -> os.stat_result | None:
        """A file where the run has a directory, or the reverse: not even --force may replace it.

        Returns what is at ``dest`` (its lstat), or None when nothing is.
        """
        for depth in range(1, len(parts)):
            parent = self.path("/".join(parts[:depth]))
            if parent in self._dirs:
                continue
            try:
                mode = os.stat(parent).st_mode  # a symlink to a directory is a directory here
            except OSError:  # nothing there (the run creates it), or a dangling symlink or a loop: no directory
                mode = 0 if os.path.lexists(parent) else stat.S_IFDIR
            if not stat.S_ISDIR(mode):
                where = "/".join(parts[:depth])
                raise LoopeError(
                    f"cannot apply {rel!r}: {where} is a file in {self.target} but a directory in the run;"
                    " move it aside",
                    exit_code=EXIT_FAILED,
                )
            self._dirs.add(parent)
        try:
            found = os.lstat(dest)
        except FileNotFoundError:
            return None
        if stat.S_ISDIR(found.st_mode):
            raise LoopeError(
                f"cannot apply {rel!r}: it is a directory in {self.target} but a file in the run; move it aside",
                exit_code=EXIT_FAILED,
            )
        return found


def _current(dest: str, found: os.stat_result | None) -> TreeEntry | None:
    """What is at ``dest`` (``found``: its lstat), as git would record it (mode and object id); None: nothing."""
    if found is None:
        return None
    if stat.S_ISLNK(found.st_mode):
        return TreeEntry(SYMLINK, blob_sha(os.fsencode(os.readlink(dest))))
    if stat.S_ISDIR(found.st_mode):
        return TreeEntry("040000", "directory")
    if not stat.S_ISREG(found.st_mode):  # a fifo, socket or device: never read (a fifo would block), never a match
        return TreeEntry("000000", "special")
    try:
        fd = os.open(dest, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        data = _read_all(fd, found.st_size)
    finally:
        os.close(fd)
    return TreeEntry(EXECUTABLE if found.st_mode & 0o100 else "100644", blob_sha(data))


def plan(
    git: Git, base: str, head: str, target: Path, *, delete: bool, force: bool, prefix: str = ""
) -> list[PlannedFile]:
    """What applying ``base..head`` to ``target`` would do to each file.

    ``prefix`` is where ``target`` sits in the repository (``pkg/`` for a run started in ``pkg/``):
    git names changes from the repository's top, the target holds only what is under the prefix.
    """
    changes = git.tree_changes(base, head)
    links = git.blobs([new.sha for _, new in changes.values() if new is not None and new.mode == SYMLINK])
    destinations = _Destinations(target)
    planned = []
    for path, (old, new) in changes.items():
        if not path.startswith(prefix):
            planned.append(PlannedFile(path, "skip", "outside the run's workdir"))
            continue
        rel = path[len(prefix) :]
        dest, found = destinations.check(rel)
        if new is not None and new.mode == SYMLINK:
            _check_link(destinations.root, rel, dest, os.fsdecode(links[new.sha]))
        planned.append(_plan_file(rel, _current(dest, found), old, new, delete=delete, force=force))
    return planned


def _check_link(root: str, rel: str, dest: str, link: str) -> None:
    """A symlink the run adds must stay inside ``root`` (the target, resolved) and out of every .git directory."""
    pointed = os.path.realpath(os.path.join(os.path.dirname(dest), link))
    if os.path.isabs(link) or not _inside(root, pointed):
        raise LoopeError(f"refusing to apply {rel!r}: it is a symlink to {link!r}, outside the target")
    if _in_git_dir(root, pointed):
        raise LoopeError(f"refusing to apply {rel!r}: it is a symlink to {link!r}, into a .git directory")


def _plan_file(
    rel: str, current: TreeEntry | None, old: TreeEntry | None, new: TreeEntry | None, *, delete: bool, force: bool
) -> PlannedFile:
    if current == new:
        return PlannedFile(rel, "same", "already as in the run")
    if new is None and not delete:
        return PlannedFile(rel, "skip", "deleted in the run; pass --delete to delete it")
    conflict = None
    if not _same_content(current, old) and not force:
        conflict = "changed since the run started" if current else "deleted since the run started"
        if old is None:
            conflict = "already exists with other content"
    action: Action = "delete" if new is None else ("update" if current else "add")
    return PlannedFile(rel, action, conflict=conflict, entry=new)


def _same_content(current: TreeEntry | None, old: TreeEntry | None) -> bool:
    """Whether the target still holds what the run started from (a mode the user changed is no conflict)."""
    return (current.sha if current else None) == (old.sha if old else None)


def check_record(record: RunRecord, run_root: Path) -> None:
    """Refuse a run.json whose paths lead out of its own run (a process that outlived the run may rewrite it).

    The workspace must be the run dir's own (or, in place, the project itself, with the run's shadow
    git dir), and the workdir the project the run dir belongs to (or a directory inside it).
    """
    root = run_root.resolve()
    project = root.parent.parent.parent
    ws = record.workspace

    def inside(path: str, base: Path) -> bool:
        resolved = Path(path).resolve()
        return resolved == base or base in resolved.parents

    problems = []
    if not inside(record.workdir, project):
        problems.append(f"its workdir {record.workdir} is not in {project}")
    if ws.mode == "in-place":
        if not inside(ws.path, project) or (ws.git_dir and Path(ws.git_dir).resolve() != root / "shadow.git"):
            problems.append(f"its in-place workspace {ws.path} is not this run's")
    elif not inside(ws.path, root / "workspace"):
        problems.append(f"its workspace {ws.path} is outside the run directory")
    if problems:
        raise LoopeError(
            f"run {record.run_id}: run.json was changed after the run ({'; '.join(problems)}); nothing was applied"
        )


def plan_run(
    record: RunRecord, target: Path, *, delete: bool, force: bool, candidate: str | None = None
) -> tuple[Git, list[PlannedFile]]:
    """The git holding a finished run's commits, and what applying the run to ``target`` would do.

    ``candidate`` (``2.3``: iteration 2, candidate 3) applies that candidate's tree instead of the run's head.
    """
    ws = record.workspace
    if ws.mode == "in-place" and ws.git_dir:
        git = Git(Path(ws.path), Path(ws.git_dir))
    elif ws.mode == "overlay" and ws.git_dir:
        tree = Path(ws.git_dir).parent / "workspace"  # its mount may be gone: the run's git dir has the objects
        git = Git(tree, Path(ws.git_dir))
        sub = Path(ws.path).relative_to(tree).as_posix()
        prefix = "" if sub == "." else f"{sub}/"
        return git, plan(git, ws.base, ws.head, target, delete=delete, force=force, prefix=prefix)
    elif ws.mode == "worktree" and not Path(ws.path).exists():
        git = Git(Path(record.workdir))  # the worktree was removed; the user's repository has the objects
    else:
        git = Git(Path(ws.path))
    # A run started in a subdirectory of a repository: git names files from the top, the target is the subdirectory.
    prefix = git.out("rev-parse", "--show-prefix") if ws.mode == "worktree" else ""
    head = ws.head if candidate is None else candidate_commit(git, record, candidate)
    return git, plan(git, ws.base, head, target, delete=delete, force=force, prefix=prefix)


def candidate_commit(git: Git, record: RunRecord, name: str) -> str:
    """The commit a candidate left (``N.I``), from the ref the run kept it under (not from run.json)."""
    iteration, _, index = name.partition(".")
    listed = f"`loope show {record.run_id} --candidates` lists them"
    if not (iteration.isdigit() and index.isdigit()):
        raise LoopeError(f"--candidate {name!r}: give ITERATION.CANDIDATE, such as 2.3; {listed}")
    commit = git.rev(f"refs/loope/{record.run_id}/iter-{int(iteration)}-cand-{int(index)}")
    if not commit:
        raise LoopeError(f"run {record.run_id} has no candidate {name} with a change; {listed}")
    return commit


def apply(git: Git, target: Path, planned: list[PlannedFile]) -> None:
    """Write the planned files; call only after ``plan`` found no conflict.

    The blobs come from one ``git cat-file --batch``. Each destination's directory is checked
    again just before it is written (once per directory, again after any symlink this apply
    writes): a symlink written earlier in this apply must not lead a later file outside the
    target or into a .git directory. A file is replaced as git does it, unlinked and created anew
    (never written through a hard link or a symlink).
    """
    blobs = git.blobs([p.entry.sha for p in planned if p.action in ("add", "update") and p.entry is not None])
    destinations = _Destinations(target)
    made: set[str] = set()
    for item in planned:
        if item.action not in ("add", "update", "delete"):
            continue
        dest = destinations.path(item.path)
        destinations.check_parent(item.path, dest)
        if item.action == "delete":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(dest)
            _prune_emptied(Path(dest).parent, target)
            made.clear()  # a directory may be gone now
            continue
        if item.entry is None:
            continue
        directory = os.path.dirname(dest)
        if directory not in made:
            os.makedirs(directory, exist_ok=True)
            made.add(directory)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dest)
        data = blobs[item.entry.sha]
        if item.entry.mode == SYMLINK:
            os.symlink(os.fsdecode(data), dest)
            destinations.forget()
            made.clear()
            continue
        _create(dest, data, 0o755 if item.entry.mode == EXECUTABLE else 0o644)


def _prune_emptied(directory: Path, target: Path) -> None:
    """Remove ``directory`` and its parents below ``target`` while a deletion left them empty, as git does."""
    while directory != target and target in directory.parents:
        try:
            directory.rmdir()  # only an empty one (a user's untracked file keeps it), never through a link
        except OSError:
            return
        directory = directory.parent


def _create(dest: str, data: bytes, mode: int) -> None:
    """A new file at ``dest`` (the umask applies to ``mode``, as for any file the user creates)."""
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _read_all(fd: int, size: int) -> bytes:
    """Every byte ``fd`` holds (``size``: what its stat said, a hint: the file may have changed since)."""
    chunks = [os.read(fd, size + 1)]
    while chunks[-1]:
        chunks.append(os.read(fd, 1 << 20))
    return b"".join(chunks)
