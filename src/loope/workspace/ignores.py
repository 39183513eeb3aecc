"""The user's ignore rules, frozen as they were when the run started.

git reads ``.gitignore`` files, ``info/exclude`` and ``core.excludesFile`` afresh on every call,
and an agent can write all of them: a new ``.gitignore`` holding ``*`` would hide every file it
adds from a ``git add -A``. loope stages the paths it saw change itself (whatever git would
ignore) and filters them through these rules instead: the same files stay out (``node_modules/``,
build output), and nothing the agent writes can hide one more.

Every rule is rewritten relative to the top of the work tree (a pattern from ``pkg/.gitignore``
applies under ``pkg/``), in git's order of precedence, so one flat list says it all: git reads it
with ``--exclude-from`` and the watcher's paths are matched against it in process.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from loope.records.atomic import write_text

if TYPE_CHECKING:
    import pathspec

    from loope.workspace.git import Git


def rebase(line: str, base: str) -> str | None:
    """The rule ``line`` of ``<base>.gitignore`` as a rule of the top-level file; None for blanks and comments."""
    line = line.rstrip("\r\n")
    stripped = line.rstrip(" ")
    if line.endswith("\\ "):
        stripped += " "  # an escaped trailing space is part of the pattern
    if not stripped or stripped.startswith("#"):
        return None
    if not base:
        return stripped
    negate = stripped.startswith("!")
    body = stripped[1:] if negate else stripped
    dir_only = body.endswith("/")
    core = body.rstrip("/")
    if not core:
        return None
    anchored = "/" in core
    core = core.lstrip("/")
    rule = f"/{base}{core}" if anchored else f"/{base}**/{core}"
    return ("!" if negate else "") + rule + ("/" if dir_only else "")


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError:  # missing, a directory, unreadable: git skips it too
        return []


def _global_excludes(git: Git) -> Path | None:
    configured = git.run("config", "--path", "core.excludesFile", check=False).text.strip()
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(xdg) / "git" / "ignore"


def _exclude_file(git: Git) -> Path | None:
    """The repository's ``info/exclude``: in the git dir named, unless that is a worktree's (then in its common dir)."""
    named = git.git_dir
    if named is not None and named.is_absolute() and not (named / "commondir").exists():
        return named / "info" / "exclude"
    exclude = git.run("rev-parse", "--path-format=absolute", "--git-path", "info/exclude", check=False).text.strip()
    return Path(exclude) if exclude else None


def collect(git: Git, tracked: Iterable[str], extra: Iterable[str] = ()) -> list[str]:
    """The rules git applies in ``git``'s work tree right now, lowest precedence first.

    ``tracked`` names the files in the tree (its ``.gitignore`` files are read from disk);
    ``extra`` rules come last (loope's own directory, say).
    """
    rules: list[str] = []
    sources = [_global_excludes(git), _exclude_file(git)]
    for source in sources:
        if source is not None:
            rules += [r for r in (rebase(line, "") for line in _read_lines(source)) if r]
    files = sorted((p for p in tracked if p == ".gitignore" or p.endswith("/.gitignore")), key=lambda p: p.count("/"))
    for rel in files:
        base = rel[: -len(".gitignore")]
        rules += [r for r in (rebase(line, base) for line in _read_lines(git.work_tree / rel)) if r]
    return rules + list(extra)


class FrozenIgnores:
    """Rules kept in a file (for git's ``--exclude-from``) and compiled once (for paths the watcher reports)."""

    def __init__(self, path: Path, rules: list[str]) -> None:
        self.path = path
        self.rules = rules
        self._spec: pathspec.GitIgnoreSpec | None = None

    @classmethod
    def freeze(cls, path: Path, rules: list[str]) -> FrozenIgnores:
        write_text(path, "".join(f"{rule}\n" for rule in rules))
        return cls(path, rules)

    @classmethod
    def load(cls, path: Path) -> FrozenIgnores | None:
        if not path.is_file():
            return None
        return cls(path, path.read_text(encoding="utf-8", errors="surrogateescape").splitlines())

    def ignored(self, path: str) -> bool:
        """Whether ``path`` (from the top of the work tree) was ignored by the rules as the run started."""
        if self._spec is None:
            import pathspec

            self._spec = pathspec.GitIgnoreSpec.from_lines(self.rules)
        return self._spec.match_file(path)
