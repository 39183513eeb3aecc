"""The guard: after every agent step, changes the agent may not make are undone and reported.

Whatever wrote them (an editor tool or a shell command), the guard sees them through git and the
file system: protected paths, paths outside the editable globs, loope's own files in the
workspace's ``.loope/`` (all but the state file), and runner-owned files in the run directory.
"""

from __future__ import annotations

import stat
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from loope.records.atomic import append_at, write_bytes
from loope.records.model import FileChange
from loope.records.rundir import LOOPE_DIR
from loope.records.sealed import SealedLog
from loope.workspace import runner_config, safefs
from loope.workspace.commands import files_and_shadows, shadowed_module
from loope.workspace.gitdirs import watched_git_dirs
from loope.workspace.rundir_guard import RunDirGuard
from loope.workspace.workspace import Workspace

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

ALWAYS_PROTECTED = ("loope.toml",)
_RUNNER_LOOPE_PARTS = frozenset({"runs", "loope.db", "loope.db-wal", "loope.db-shm"})


def _spec(patterns: Iterable[str]) -> GitIgnoreSpec:
    import pathspec  # only runs that set globs pay for it

    return pathspec.GitIgnoreSpec.from_lines(list(patterns))


class Guard:
    def __init__(
        self,
        workspace: Workspace,
        *,
        protect: Iterable[str] = (),
        editable: Iterable[str] = (),
        commands: Iterable[str | None] = (),
        state_file: Path | None = None,
        user_repo: Path | None = None,
        run_id: str | None = None,
        gate: str | None = None,
        run_dir: Path | None = None,
        metric: str | None = None,
        watch_outside: bool = True,
        run_dir_guard: RunDirGuard | None = None,
        scripts: Iterable[str] | None = None,
    ) -> None:
        """``watch_outside``: False for a candidate's guard, whose run watches the git and run dirs once a round;
        ``run_dir_guard`` is then the run's, told of the candidate's step directories."""
        self.workspace = workspace
        self.run_dir = RunDirGuard(run_dir, workspace.git.work_tree.resolve()) if run_dir is not None else None
        self._owner = self.run_dir or run_dir_guard
        self.editable_patterns = list(editable)
        self._user_protect = list(dict.fromkeys(protect))
        # A resumed run passes what the commands named at its start: a file the agent created since
        # must not become protected (nor one it removed stop being protected) by being resolved again.
        self.scripts = list(scripts) if scripts is not None else self._command_files(commands, metric)
        """What the gate and metric run (their scripts, local modules, ``python -m`` shadows): protected."""
        # With a gate, how the tests are run is out of the agent's reach too (unless --editable says so).
        self._runner_patterns = runner_config.patterns(gate, self.editable_patterns)
        self._runner = _spec(self._runner_patterns)
        self._partial = runner_config.partial_files(gate, self.editable_patterns)
        self._checked = bool(gate)
        self.protected_patterns = sorted({*protect, *ALWAYS_PROTECTED, *self.scripts, *self._runner_patterns})
        self._protect = _spec(self.protected_patterns)
        self._editable = _spec(self.editable_patterns) if self.editable_patterns else None
        self.state_file = state_file
        # Globs name paths from the workdir; git names them from the top of the work tree, which is
        # above the workdir when a run starts in a subdirectory of the repository.
        top = workspace.git.work_tree.resolve()
        sub = workspace.path.resolve().relative_to(top).as_posix() if workspace.path.resolve() != top else ""
        self._prefix = f"{sub}/" if sub else ""
        self.sealed: dict[Path, bytes | None] = {}
        self.logs: list[SealedLog] = []
        """Runner-owned logs (events.jsonl), put back after every step when anything else wrote them."""
        self.step_logs: list[SealedLog] = []
        """The logs of the steps in flight (their events.jsonl): checked once, then closed, when they end."""
        self._state_text: bytes | None = None
        self._git_taken = False
        self._git_dirs = (
            watched_git_dirs(workspace.mode, workspace.git_dir, workspace.branch, user_repo, run_id)
            if watch_outside
            else []
        )
        self._loope_files = self._scan_loope_dir()

    def _command_files(self, commands: Iterable[str | None], metric: str | None) -> list[str]:
        """What the gate and metric run: their scripts (and ``python -m`` shadows); the metric's imports too.

        A module the metric imports is protected unless an editable glob names it: the code the
        metric measures is imported by it as well.
        """
        root = self.workspace.path
        found: list[str] = []
        for command in [*commands, metric]:
            files, shadows = files_and_shadows(command, root)
            found += files + shadows
        imported, _ = files_and_shadows(metric, root, follow_imports=True)
        found += [f for f in imported if not self._names(f)]
        return found

    def _names(self, path: str) -> bool:
        """Whether an editable glob names ``path`` (matches it and spells its name or a directory of it).

        ``--editable solution.py`` or ``--editable 'src/**'`` name src/solution.py; ``'**/*.py'``
        matches every module the metric imports and names none of them.
        """
        words = [Path(path).stem, *Path(path).parent.parts]
        for glob in self.editable_patterns:
            if _spec([glob]).match_file(path) and any(w and w in glob for w in words):
                return True
        return False

    # -- runner-owned files -------------------------------------------------------------------

    def seal(self, path: Path, content: bytes | None) -> None:
        """Record what loope last wrote to a runner-owned file (None: it must not exist), so a change is undone."""
        self.sealed[path] = content

    def write_sealed(self, path: Path, content: bytes) -> None:
        write_bytes(path, content)
        self.seal(path, content)

    def append_sealed(self, path: Path, text: str) -> None:
        """Add ``text`` to a sealed file.

        In place when the file is the size loope left it (what anyone else wrote was undone after
        the last step, and nothing but loope runs between steps), so the cost does not grow with
        the file; otherwise rewritten whole from the sealed content.
        """
        data, before = text.encode("utf-8"), self.sealed.get(path)
        if before is None or not append_at(path, data, size=len(before)):
            before = before or b""
            write_bytes(path, before + data)
        self.seal(path, before + data)

    def _check_sealed(self) -> list[str]:
        """Put back what loope last wrote to each runner-owned file; a link or directory there goes too."""
        violations = []
        for path, content in self.sealed.items():
            there = safefs.lstat(path.parent, path.name) is not None
            current = safefs.read_bytes(path.parent, path.name)
            if current == content and (content is not None or not there):
                continue
            if content is None:
                safefs.remove(path.parent, path.name)
            else:
                safefs.write_bytes(path.parent, path.name, content)
            violations.append(f"{path.name} is written only by loope; the change to it was undone")
        return violations

    def before_step(self, *, confined: bool = False) -> None:
        """Note what a step may disturb but loope must be able to put back: the state file, the git dirs.

        ``confined``: the step runs in loope's sandbox, where the git dirs are read-only. A change to
        them during the step is then not the step's but the user's (a commit in their own checkout),
        and stays.
        """
        self.workspace.sync_index()  # no git of loope's is writing while the step runs, nor while it is snapshotted
        state = self._state_rel()
        if state is not None:
            self._state_text = safefs.read_bytes(self.workspace.path, state)
        self._git_taken = not confined
        for _, watched in self._git_dirs if self._git_taken else []:
            watched.take()
        if self.run_dir is not None:
            self.run_dir.take()

    def _check_git_dirs(self) -> list[str]:
        """Put the repository's git dirs back as they were before the step (before loope runs git again).

        Without the sandbox, whoever moved a ref (the step, or the user committing in their own
        checkout meanwhile) cannot be told: it is put back, and the line names the commit it had
        moved to, which stays in the repository.
        """
        self.workspace.sync_index()
        violations = []
        for label, watched in self._git_dirs if self._git_taken else []:
            for rel in watched.restore():
                line = f"{label}/{rel} is outside the workspace; the step's change to it was undone"
                if rel in watched.moved:
                    sha = watched.moved[rel]
                    line += (
                        f" (it had moved to {sha}; if that commit was yours, `git branch <name> {sha}` gets it back)"
                    )
                violations.append(line)
        if violations:
            self.workspace.git.refresh_drivers()
        return violations

    # -- the workspace's .loope/ --------------------------------------------------------------

    def _state_rel(self) -> str | None:
        if self.state_file is None:
            return None
        try:
            return self.state_file.relative_to(self.workspace.path).as_posix()
        except ValueError:
            return None

    def _scan_loope_dir(self) -> dict[str, bytes]:
        files, _ = safefs.walk_files(self.workspace.path, LOOPE_DIR, _RUNNER_LOOPE_PARTS)
        state = self._state_rel()
        if state is not None:
            self._state_text = files.pop(state, None)
        return files

    def _check_loope_dir(self) -> list[str]:
        """Put ``.loope/`` back as loope left it: nothing followed, links removed, its files restored."""
        root, state = self.workspace.path, self._state_rel()
        violations = []
        if not safefs.is_real_dir(root / LOOPE_DIR):
            safefs.remove(root, LOOPE_DIR)
            violations.append(
                f"{LOOPE_DIR} belongs to loope and was replaced; it was restored (nothing it pointed to was touched)"
            )
            for rel, content in self._loope_files.items():
                safefs.write_bytes(root, rel, content)
            if state is not None and self._state_text is not None:
                safefs.write_bytes(root, state, self._state_text)
            return violations
        files, odd = safefs.walk_files(root, LOOPE_DIR, _RUNNER_LOOPE_PARTS)
        if state is not None:  # a state file the agent turned into a directory is its own problem
            files = {rel: data for rel, data in files.items() if not rel.startswith(f"{state}/")}
            odd = [rel for rel in odd if not rel.startswith(f"{state}/")]
        for rel in odd:
            safefs.remove(root, rel)
            if rel == state and self._state_text is not None:
                safefs.write_bytes(root, rel, self._state_text)
            violations.append(f"{rel} is a link or a special file inside loope's own directory; it was removed")
        current = files.pop(state, None) if state is not None else None
        if current is not None:
            self._state_text = current
        for rel, content in self._loope_files.items():
            if files.get(rel) != content:
                safefs.write_bytes(root, rel, content)
                violations.append(f"{rel} belongs to loope; the change to it was undone")
        for rel in sorted(set(files) - set(self._loope_files)):
            safefs.remove(root, rel)
            violations.append(f"{rel} is inside loope's own directory; the file was removed")
        return violations

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
        if local is not None and self._runner.match_file(local):
            return f"{path} configures the test runner and is protected"
        if local is not None and self._protect.match_file(local):
            return f"{path} is protected"
        editable = self._editable
        if editable is not None and (local is None or not editable.match_file(local)):
            return f"{path} is outside the editable paths ({', '.join(self.editable_patterns)})"
        return None

    def check(self, changes: list[FileChange]) -> list[tuple[str, str]]:
        """(path, reason) for each change that is not allowed."""
        found = []
        for change in changes:
            reason = self.why_not(change.path)
            if reason is None and self._checked and change.status == "added":
                local = self._local(change.path)
                module = shadowed_module(local, self.workspace.path) if local is not None else None
                if module:
                    reason = f"{change.path} would hide the installed module {module} from the checks; it was removed"
            if reason:
                found.append((change.path, reason))
        return found

    def enforce(self) -> tuple[list[str], list[FileChange]]:
        """Undo what the last agent step may not change: the violations (a line each) and the changes kept."""
        violations = self._check_git_dirs() + self._check_outside() + self._check_sealed() + self._check_loope_dir()
        changes = self.workspace.pending()
        linked = self._directories_replaced_by_links(changes)
        if linked:
            for path in linked:
                safefs.remove(self.workspace.git.work_tree, path)
                violations.append(
                    f"{path} was a directory and became a link; the link was removed and the directory restored"
                )
            self.workspace.restore(linked)
            changes = self.workspace.pending()
        partial = runner_config.undo_runner_parts(self.workspace, changes, self._partial)
        if partial:
            violations += partial
            changes = self.workspace.pending()
        denied = self.check(changes)
        self.workspace.restore([path for path, _ in denied])
        undone = {path for path, _ in denied}
        return violations + [reason for _, reason in denied], [c for c in changes if c.path not in undone]

    def _directories_replaced_by_links(self, changes: list[FileChange]) -> list[str]:
        """Added paths that are links standing where ``head`` has a directory (``rm -r tests; ln -s ~ tests``)."""
        top = self.workspace.git.work_tree
        links = [
            c.path
            for c in changes
            if c.status == "added" and (info := safefs.lstat(top, c.path)) is not None and stat.S_ISLNK(info.st_mode)
        ]
        trees = self.workspace.git.entries(self.workspace.head, links)
        return [path for path in links if path in trees and trees[path].mode == "040000"]

    def own(self, step_dir: Path) -> None:
        """A step directory loope made in the run directory (so the run-dir check keeps it)."""
        if self._owner is not None:
            self._owner.own(step_dir)

    def restore_outside(self) -> list[str]:
        """Put back the git dirs, the run dir and loope's runner-owned files as they were at ``before_step``."""
        return self._check_git_dirs() + self._check_outside() + self._check_sealed()

    def _check_outside(self) -> list[str]:
        found = self.run_dir.restore() if self.run_dir is not None else []
        found += [line for log in [*self.logs, *self.step_logs] for line in log.verify()]
        for log in self.step_logs:
            log.close()
        self.step_logs.clear()
        return found

    def undo_all(self) -> list[FileChange]:
        """Undo every change since the last commit (a read-only step's or a check's); what was undone."""
        self._check_git_dirs()
        self._check_outside()
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
        for pattern in [*self.editable_patterns, *self._user_protect]:
            spec = _spec([pattern])
            if not any(spec.match_file(p) for p in listed):
                unmatched.append(pattern)
        return unmatched
