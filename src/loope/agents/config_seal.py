"""An agent CLI's own configuration, put back as it was before each step.

A step may write the CLI's state dir (sessions, caches, credentials it refreshes), sandbox or not.
Some files there are not state but instructions the CLI follows in every later session, the
user's own included, outside any sandbox: hooks and MCP servers in ``~/.claude/settings.json``,
``notify`` and MCP servers in ``~/.codex/config.toml``, memory files such as ``CLAUDE.md``. A step
that plants one there would run code on the user's machine later. So each adapter names those
files (``home_config``); what a step changed in them is undone when its process ends, and said.

Nothing is followed: a link stays a link (the file it names, the user's, is put back through it
only when the link itself is unchanged), and whatever a step put in a file's place goes.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from loope.workspace import safefs


@dataclass(frozen=True)
class _Seen:
    """A configuration file as it was: absent, a file (bytes, mode), or a link (its target, the bytes it names)."""

    present: bool
    data: bytes | None = None
    mode: int = 0o644
    link: str | None = None


def _look(path: Path) -> _Seen:
    try:
        info = os.lstat(path)
    except OSError:
        return _Seen(False)
    if stat.S_ISLNK(info.st_mode):
        try:
            target, real = os.readlink(path), Path(os.path.realpath(path))
            return _Seen(True, real.read_bytes() if real.is_file() else None, link=target)
        except OSError:
            return _Seen(True, link="")
    data = safefs.read_bytes(path.parent, path.name) if stat.S_ISREG(info.st_mode) else None
    return _Seen(True, data, stat.S_IMODE(info.st_mode))


class ConfigSeal:
    """The configuration files of one step's CLI, as they were when it started."""

    def __init__(self, paths: Iterable[Path], label: str) -> None:
        self.label = label
        self.before = {path: _look(path) for path in paths}

    def restore(self) -> list[str]:
        """Put back each file the step changed; a line for each."""
        found = []
        for path, before in self.before.items():
            now = _look(path)
            if now == before:
                continue
            with contextlib.suppress(OSError, safefs.UnsafePath):
                _put_back(path, before, now)
            found.append(f"{path} is {self.label}'s own configuration, not the step's to change; it was put back")
        return found


def _put_back(path: Path, before: _Seen, now: _Seen) -> None:
    parent, name = path.parent, path.name
    if before.link is not None and now.link == before.link:  # the user's link: the file it names goes back
        if before.data is not None:
            Path(os.path.realpath(path)).write_bytes(before.data)
        return
    if now.present:
        safefs.remove(parent, name)
    if before.link is not None:
        os.symlink(before.link, path)
    elif before.present and before.data is not None:
        safefs.write_bytes(parent, name, before.data, mode=before.mode)
