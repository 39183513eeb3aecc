"""The run directory and loope's directories above the workspace: runner-owned, put back after every step.

What an agent adds to the run directory (a ``pytest.ini`` or ``conftest.py`` that pytest's
rootdir search would find above the workspace, a link where loope will write a step's records,
a directory where loope expects a file) is removed, and so is a test-runner file written into
``.loope/runs/`` or ``.loope/``. Directories above ``.loope/`` are the user's own (they may be
editing them while the run goes on), so nothing there is touched: the gate's pytest is kept from
reading them instead (``verify/confine.py``). Nothing is followed.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import field
from pathlib import Path

from loope.record import record
from loope.workspace import safefs

# What loope itself keeps directly in a run directory.
LOOPE_DIRS = frozenset({"agents", "workspace", "workspace.removed", "shadow.git"})
LOOPE_FILES = frozenset(
    {
        "spec.json", "run.json", "report.md", "events.jsonl", "ledger.jsonl", "changes.diff", "changed-files.txt",
        "design-contract.md", "best", "score.log", "runner.lock", "runner.log", "observer-errors.log", "error.log",
        "snapshot.index", "pytest-boundary.ini", "state.md",
    }
)  # fmt: skip
# Names pytest (and Python) read from a directory above the tests.
_ABOVE = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg", "setup.py", "conftest.py")


def _kind(entry: os.DirEntry[str]) -> str:
    """What an entry is, from the directory listing itself where it says (no ``lstat`` per entry)."""
    try:
        if entry.is_symlink():
            return "link"
        return "dir" if entry.is_dir(follow_symlinks=False) else "file"
    except OSError:
        return "file"


def _entries(path: Path) -> dict[str, str]:
    """Each name in ``path`` and its kind: one read of the directory, however many steps it holds."""
    try:
        with os.scandir(path) as listing:
            return {entry.name: _kind(entry) for entry in listing}
    except OSError:
        return {}


@record()
class RunDirGuard:
    root: Path
    """The run directory."""
    top: Path
    """The top of the workspace's tree: every directory above it is watched for test-runner files."""
    _root: dict[str, str] = field(default_factory=dict)
    _agents: dict[str, str] = field(default_factory=dict)
    _above: dict[Path, bytes | None] = field(default_factory=dict)
    _mine: set[str] = field(default_factory=set)
    _paths: list[tuple[Path, str, Path]] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def own(self, step_dir: Path) -> None:
        """A step directory loope made during the step (it is not the agent's to have added)."""
        with self._lock:
            self._mine.add(step_dir.name)

    def take(self) -> None:
        self._root = _entries(self.root)
        self._agents = _entries(self.root / "agents")
        self._above = {}
        for directory, name, path in self._above_paths():
            info = _lstat(path)
            if info is not None:
                self._above[path] = safefs.read_bytes(directory, name) if stat.S_ISREG(info.st_mode) else None

    def _above_paths(self) -> list[tuple[Path, str, Path]]:
        """(directory, name, path) of each test-runner file that could lie above the tree (worked out once)."""
        if self._paths is None:
            self._paths = [(d, name, d / name) for d in self.top.parents for name in _ABOVE]
        return self._paths

    def _loope_dirs_above(self) -> list[Path]:
        """The directories above the workspace tree up to ``.loope/`` itself (none when the tree is the user's)."""
        found = []
        for directory in self.top.parents:
            found.append(directory)
            if directory.name == ".loope":
                return found if self.root in found else []
        return []

    def restore(self) -> list[str]:
        """Undo what was added to the run dir or above it since ``take``; a line for each.

        What it finds is what the next check compares with: taken from the same look when nothing
        was undone (one look at the run dir per step fewer), looked at again when something was.
        """
        if not self._root:
            return []
        root, agents = _entries(self.root), _entries(self.root / "agents")
        violations = self._check_root(root) + self._check_agents(agents)
        above, found = self._check_above()
        violations += above
        if violations:
            self.take()
        else:
            self._root, self._agents, self._above = root, agents, found
        return violations

    def _check_root(self, entries: dict[str, str]) -> list[str]:
        violations = []
        for name, kind in entries.items():
            was = self._root.get(name)
            if (kind == was and kind != "link") or name in LOOPE_DIRS:
                continue
            odd = (
                kind == "link"  # loope never makes one here: reading or writing through it would leave the run
                or (name in LOOPE_FILES and kind != "file")  # a directory where loope expects a file
                or (was is None and kind == "file" and _test_config(name))
            )
            if odd:
                safefs.remove(self.root, name)
                violations.append(f"{name} in the run directory is loope's to write; {_REMOVED}")
        return violations

    def _check_agents(self, entries: dict[str, str]) -> list[str]:
        violations = []
        for name, kind in entries.items():
            if self._agents.get(name) == kind == "dir" or (name in self._mine and kind == "dir"):
                continue
            safefs.remove(self.root, f"agents/{name}")
            violations.append(f"agents/{name} in the run directory is loope's to write; it was removed")
        with self._lock:
            self._mine.clear()
        return violations

    def _check_above(self) -> tuple[list[str], dict[Path, bytes | None]]:
        """The violations above the tree, and what is there now (as ``take`` would find it, when there are none)."""
        violations = []
        found: dict[Path, bytes | None] = {}
        loope_dirs = self._loope_dirs_above()
        for directory, name, path in self._above_paths():
            info = _lstat(path)
            if path not in self._above:
                if info is None:
                    continue
                if directory in loope_dirs:
                    safefs.remove(directory, name)
                    violations.append(f"{path} could configure the test runner from above the workspace; removed")
                else:  # the user's own directory: they may be editing it; the gate just does not read it
                    violations.append(f"{path} appeared above the workspace during the step; the gate ignores it")
                continue
            if info is None:
                continue
            before = self._above[path]
            now = safefs.read_bytes(directory, name) if stat.S_ISREG(info.st_mode) else None
            found[path] = now
            if directory in loope_dirs and before is not None and now != before:
                safefs.write_bytes(directory, name, before)
                violations.append(f"{path} could configure the test runner from above the workspace; put back")
        return violations, found


_REMOVED = "what the step put there was removed"


def _test_config(name: str) -> bool:
    """A name loope never writes in a run directory but a test runner reads there."""
    return name in _ABOVE or (name.endswith((".pth", ".ini", ".cfg", ".toml")) and name != "pytest-boundary.ini")


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None
