"""What a run's steps may touch: the paths behind each step's sandbox policy.

Everything is read-only but the work tree (for writers and checks), the step's private /tmp and the
agent CLI's own state under HOME. Inside the work tree its ``.git`` (a file naming the git dir, or
the user's own ``.git`` in place), loope's files in ``.loope/`` and the protected files stay
read-only. The git dirs behind it (the user's ``.git``, objects and refs, or the run's shadow git
dir) are read-only too: git status, diff and log work inside, git add and commit fail cleanly.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from loope.record import record
from loope.sandbox.bwrap import Policy
from loope.sandbox.isolation import Isolation

MAX_PROTECTED_BINDS = 2000
"""Protected files bound read-only one by one at most (past that the guard alone undoes changes)."""
_RECORD_PARTS = ("runs", "loope.db")


@record(frozen=True)
class Layout:
    """The resolved paths of one run."""

    work_tree: Path
    workspace: Path
    run_dir: Path
    project: Path
    """The user's repository (or workdir): read-only, and visible even when it lives under /tmp."""
    state_file: Path
    protected: tuple[Path, ...] = ()
    """Files and directories inside the work tree that stay read-only for every step."""
    hide_project: tuple[Path, ...] = ()
    """When set (an overlay run), the user's tree is hidden from every step, all but these paths in it."""
    isolation: Isolation | None = None
    """A race candidate's: loope's files hidden but for its own (``isolation.py``)."""

    @classmethod
    def of(
        cls,
        *,
        work_tree: Path,
        workspace: Path,
        run_dir: Path,
        project: Path,
        state_file: Path,
        tracked: Iterable[str],
        protected_patterns: Iterable[str],
        hide_project_but: Iterable[Path] | None = None,
        isolation: Isolation | None = None,
    ) -> Layout:
        """The layout of a run; ``tracked`` names the work tree's files from its top.

        ``hide_project_but``: hide the user's tree, but for these paths in it (an overlay run's
        workspace has all it needs; its git borrows objects from these).
        """
        top = Path(os.path.realpath(work_tree))
        ws = Path(os.path.realpath(workspace))
        loope_dir = ws / ".loope"
        fixed = [top / ".git"]
        if any((loope_dir / part).exists() for part in _RECORD_PARTS):
            fixed.append(loope_dir)  # in place: the project's own records live here
        else:
            fixed.append(loope_dir / ".gitignore")
        matched = _matching(ws.relative_to(top).as_posix() if ws != top else "", tracked, protected_patterns)
        return cls(
            work_tree=top,
            workspace=ws,
            run_dir=Path(os.path.realpath(run_dir)),
            project=Path(os.path.realpath(project)),
            state_file=Path(os.path.realpath(state_file)),
            protected=tuple(fixed + [top / p for p in matched[:MAX_PROTECTED_BINDS]]),
            hide_project=tuple(Path(os.path.realpath(p)) for p in hide_project_but or ()),
            isolation=isolation,
        )

    def policy(
        self,
        *,
        tmp: Path,
        write: bool,
        state: Iterable[Path] = (),
        visible: Iterable[Path] = (),
        network: bool = True,
        cwd: Path | None = None,
        private: Iterable[Path] = (),
    ) -> Policy:
        """One step's policy: ``write`` gives it the work tree; ``state`` is writable wherever it is.

        ``visible``: more paths shown read-only (the scripts a command names, should they live
        under /tmp, which the step's private /tmp hides); ``private``: hidden from a race candidate's step.
        """
        writable = [*state]
        shown = [p for p in visible if not p.is_relative_to(self.work_tree)]  # inside, they are seen already
        run_dir = self.isolation.shown() if self.isolation else [self.run_dir]
        read_only = [self.project, *run_dir, *shown, *self.protected]
        hidden = self._hidden(writable)
        if hidden:
            read_only = [*self.hide_project, *_on_path_in(self.project), *run_dir, *shown, *self.protected]
        if self.isolation:
            hidden += (*self.isolation.hide, *private)  # a race candidate's: nothing of the others' sessions
        if write:
            writable.append(self.work_tree)
            if self.workspace / ".loope" in self.protected:
                writable.append(self.state_file)  # its directory holds the project's records
        else:
            read_only.append(self.work_tree)
        return Policy(
            cwd=cwd or self.workspace,
            tmp=tmp,
            writable=tuple(writable),
            read_only=tuple(p for p in read_only if p not in writable),
            network=network,
            hidden=hidden,
            shown_at=(self.isolation.objects_info,) if self.isolation and self.isolation.objects_info else (),
        )

    def _hidden(self, writable: list[Path]) -> tuple[Path, ...]:
        """The user's tree, if it is to be hidden and holds nothing a step must reach (HOME, its state dirs)."""
        if not self.hide_project or self.project == Path("/"):
            return ()
        home = Path(os.path.realpath(os.path.expanduser("~")))
        if home.is_relative_to(self.project) or any(p.is_relative_to(self.project) for p in writable):
            return ()
        return (self.project,)


def _on_path_in(project: Path) -> list[Path]:
    """Program directories on PATH inside the user's tree (an activated venv there): they stay reachable."""
    found = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        path = Path(os.path.realpath(entry)) if entry else None
        if path is not None and path.is_relative_to(project) and path.is_dir():
            found.append(path.parent if path.name == "bin" else path)  # a venv's bin needs its lib beside it
    return found


def _matching(prefix: str, tracked: Iterable[str], patterns: Iterable[str]) -> list[str]:
    """The tracked files (from the top) that ``patterns`` (from the workdir) protect."""
    import pathspec

    spec = pathspec.GitIgnoreSpec.from_lines(list(patterns))
    lead = f"{prefix}/" if prefix else ""
    matches = _any_of(spec) or spec.match_file
    if not lead:
        return [path for path in tracked if matches(path)]
    return [path for path in tracked if path.startswith(lead) and matches(path[len(lead) :])]


def _any_of(spec: Any) -> Callable[[str], object] | None:
    """One regex for every pattern of ``spec``: where none negates, a file is protected when any takes it.

    It gives what ``spec.match_file`` gives, in a fraction of the time per file (a start runs it over
    every tracked file: 20,000 of them cost a quarter of a second one pattern at a time). None where
    a pattern negates (then which pattern comes last decides).
    """
    used = [p for p in spec.patterns if p.include is not None]
    if not used or not all(p.include for p in used):
        return None
    # The patterns' named groups (which tell a directory's match from a file's) would clash once joined.
    joined = "|".join(f"(?:{p.regex.pattern})" for p in used).replace("(?P<ps_d>", "(?:")
    return re.compile(joined).match


def named_paths(command: str, cwd: Path) -> list[Path]:
    """The existing files and directories a shell command names (``/tmp/agent.py``, ``./check.sh``)."""

    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    found = []
    for word in words:
        if " " in word.strip():  # a script of its own (sh -c '...'): the paths it names
            found += named_paths(word, cwd)
            continue
        named = word.split("=", 1)[-1]  # --config=./x.toml and VAR=./x name a path too
        if "/" not in named or named.startswith("-"):
            continue
        path = Path(named).expanduser()
        path = path if path.is_absolute() else cwd / path
        if path.exists():
            found.append(Path(os.path.realpath(path)))
    return found


def writable_dirs(given: Iterable[str], workdir: Path | None) -> list[str]:
    """``--sandbox-writable`` checked: existing directories, absolute (or under ``~``), outside the project.

    Inside the project they would undo what the sandbox keeps read-only (the repository, the run
    dir); around it (``~``) they cannot, since the read-only paths are mounted on top.
    """
    found = []
    for raw in given:
        path = Path(raw).expanduser()
        if not path.is_absolute():
            raise ValueError(f"{raw!r} is not an absolute path; give --sandbox-writable a full path such as ~/.cache")
        if not path.is_dir():
            raise ValueError(f"{raw} is not a directory; create it first, or drop it from --sandbox-writable")
        real = Path(os.path.realpath(path))
        if workdir is not None and real.is_relative_to(os.path.realpath(workdir)):
            raise ValueError(
                f"{raw} is inside the project, which the sandbox keeps read-only (agents write the workspace);"
                " name a directory outside it"
            )
        found.append(str(real))
    return found
