"""The guard: after every agent step, changes the agent may not make are undone and reported.

Whatever wrote them (an editor tool or a shell command), the guard sees them through git and the
file system: protected paths, paths outside the editable globs, loope's own files in the
workspace's ``.loope/`` (all but the state file), and runner-owned files in the run directory.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Iterable
from pathlib import Path

from loope.records.atomic import write_bytes
from loope.records.model import FileChange
from loope.workspace.workspace import LOOPE_DIR, Workspace

ALWAYS_PROTECTED = ("loope.toml",)
_RUNNER_LOOPE_PARTS = ("runs", "loope.db", "loope.db-wal", "loope.db-shm")


def _spec(patterns: Iterable[str]) -> object:
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(list(patterns))


def scripts_in(command: str | None, root: Path) -> list[str]:
    """Files inside ``root`` that ``command`` names (``./bench.sh``, ``python tools/score.py``)."""
    if not command:
        return []
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    found = []
    for word in words:
        if word.startswith("-") or "=" in word:
            continue
        path = (root / word).resolve() if not Path(word).is_absolute() else Path(word)
        try:
            rel = path.relative_to(root.resolve())
        except ValueError:
            continue
        if path.is_file():
            found.append(rel.as_posix())
    return sorted(set(found))


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except (FileNotFoundError, IsADirectoryError):
        return None


class Guard:
    def __init__(
        self,
        workspace: Workspace,
        *,
        protect: Iterable[str] = (),
        editable: Iterable[str] = (),
        commands: Iterable[str | None] = (),
        state_file: Path | None = None,
    ) -> None:
        self.workspace = workspace
        scripts = [s for c in commands for s in scripts_in(c, workspace.path)]
        self.protected_patterns = sorted({*protect, *ALWAYS_PROTECTED, *scripts})
        self.editable_patterns = list(editable)
        self._protect = _spec(self.protected_patterns)
        self._editable = _spec(self.editable_patterns) if self.editable_patterns else None
        self.state_file = state_file
        # Globs name paths from the workdir; git names them from the top of the work tree, which is
        # above the workdir when a run starts in a subdirectory of the repository.
        top = workspace.git.work_tree.resolve()
        sub = workspace.path.resolve().relative_to(top).as_posix() if workspace.path.resolve() != top else ""
        self._prefix = f"{sub}/" if sub else ""
        self.sealed: dict[Path, bytes | None] = {}
        self._loope_files = self._scan_loope_dir()

    # -- runner-owned files -------------------------------------------------------------------

    def seal(self, path: Path, content: bytes | None) -> None:
        """Record what loope last wrote to a runner-owned file (None: it must not exist), so a change is undone."""
        self.sealed[path] = content

    def write_sealed(self, path: Path, content: bytes) -> None:
        write_bytes(path, content)
        self.seal(path, content)

    def _check_sealed(self) -> list[str]:
        violations = []
        for path, content in self.sealed.items():
            try:
                current = path.read_bytes()
            except FileNotFoundError:
                current = None
            if current != content:
                if content is None:
                    path.unlink()
                else:
                    write_bytes(path, content)
                violations.append(f"{path.name} is written only by loope; the change to it was undone")
        return violations

    # -- the workspace's .loope/ --------------------------------------------------------------

    def _loope_dir_files(self) -> list[Path]:
        root = self.workspace.path / LOOPE_DIR
        if not root.is_dir():
            return []
        found = []
        for path in root.rglob("*"):
            rel = path.relative_to(root)
            if rel.parts[0] in _RUNNER_LOOPE_PARTS or not path.is_file():
                continue
            if self.state_file is not None and path == self.state_file:
                continue
            found.append(path)
        return found

    def _scan_loope_dir(self) -> dict[Path, bytes]:
        return {p: p.read_bytes() for p in self._loope_dir_files()}

    def _check_loope_dir(self) -> list[str]:
        violations = []
        current = set(self._loope_dir_files())
        for path, content in self._loope_files.items():
            if path not in current or path.read_bytes() != content:
                write_bytes(path, content)
                violations.append(f"{self._rel(path)} belongs to loope; the change to it was undone")
        for path in current - set(self._loope_files):
            path.unlink()
            violations.append(f"{self._rel(path)} is inside loope's own directory; the file was removed")
        return violations

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.workspace.path).as_posix()

    # -- the tree -----------------------------------------------------------------------------

    def _local(self, path: str) -> str | None:
        """``path`` (from the top of the work tree) relative to the workdir; None when it is outside it."""
        if not self._prefix:
            return path
        return path[len(self._prefix) :] if path.startswith(self._prefix) else None

    def why_not(self, path: str) -> str | None:
        """Why the agent may not change ``path`` (named from the top of the work tree), or None when it may."""
        rule = self._rule(path)
        return f"{rule}; your change to it was undone" if rule else None

    def refusal(self, rel: str) -> str | None:
        """Why the agent may not write ``rel`` (relative to the workspace), said before it writes; None: it may."""
        if self.state_file is not None and self.workspace.path / rel == self.state_file:
            return None
        return self._rule(self._prefix + rel)

    def _rule(self, path: str) -> str | None:
        local = self._local(path)
        if local is not None and self._protect.match_file(local):  # type: ignore[attr-defined]
            return f"{path} is protected"
        editable = self._editable
        if editable is not None and (local is None or not editable.match_file(local)):  # type: ignore[attr-defined]
            return f"{path} is outside the editable paths ({', '.join(self.editable_patterns)})"
        return None

    def check(self, changes: list[FileChange]) -> list[tuple[str, str]]:
        """(path, reason) for each change that is not allowed."""
        found = []
        for change in changes:
            reason = self.why_not(change.path)
            if reason:
                found.append((change.path, reason))
        return found

    def enforce(self) -> tuple[list[str], list[FileChange]]:
        """Undo what the last agent step may not change: the violations (a line each) and the changes kept."""
        violations = self._check_sealed() + self._check_loope_dir()
        changes = self.workspace.pending()
        denied = self.check(changes)
        self.workspace.restore([path for path, _ in denied])
        undone = {path for path, _ in denied}
        return violations + [reason for _, reason in denied], [c for c in changes if c.path not in undone]

    def undo_all(self) -> list[FileChange]:
        """Undo every change since the last commit (a read-only step's or a check's); what was undone."""
        changed = self.workspace.pending()
        self.workspace.restore([c.path for c in changed])
        return changed

    def undo_read_only_changes(self, who: str) -> list[str]:
        """A read-only role changed files: undo all of it."""
        changed = self.undo_all()
        if not changed:
            return []
        paths = ", ".join(c.path for c in changed[:5])
        return [f"{who} may only read, but changed {paths}; the changes were undone"]

    def patterns_matching_nothing(self, paths: Iterable[str]) -> list[str]:
        """Globs given by the user that match none of ``paths`` (from the top of the work tree; a typo?)."""
        listed = [local for local in map(self._local, paths) if local is not None]
        unmatched = []
        for pattern in [
            *self.editable_patterns,
            *(p for p in self.protected_patterns if p not in ALWAYS_PROTECTED),
        ]:
            spec = _spec([pattern])
            if not any(spec.match_file(p) for p in listed):  # type: ignore[attr-defined]
                unmatched.append(pattern)
        return unmatched
