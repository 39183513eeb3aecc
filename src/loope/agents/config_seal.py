"""An agent CLI's own configuration, put back as it was before each step.

A step may write the CLI's state dir (sessions, caches, credentials it refreshes), sandbox or not.
Some files there are not state but instructions the CLI follows in every later session, the
user's own included, outside any sandbox: hooks and MCP servers in ``~/.claude/settings.json``,
``notify`` and MCP servers in ``~/.codex/config.toml``, memory files such as ``CLAUDE.md``. A step
that plants one there would run code on the user's machine later. So each adapter names those
files (``home_config``), and the keys of state files it rewrites itself that hold such instructions
(``home_config_keys``: ``mcpServers`` in ``~/.claude.json``); what a step changed there is undone
when its process ends, and said.

Nothing is followed: a link stays a link (the file it names, the user's, is put back through it
only when the link itself is unchanged), and whatever a step put in a file's place goes. A named
directory (claude's ``skills``, gemini's ``extensions``: loaded by later sessions on their own) is
read-only inside the sandbox where it exists, and removed when a step made it; what changes inside
one that existed is seen only by the sandbox, which keeps it read-only.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from loope.workspace import safefs

_MISSING = object()


@dataclass(frozen=True)
class _Seen:
    """A configuration path as it was: absent, a file (bytes, mode), a directory (mode), a link (target, bytes)."""

    kind: str | None
    """None (absent), "file", "dir", "link", or "other" (a file loope could not read, a fifo...)."""
    data: bytes | None = None
    mode: int = 0o644
    link: str | None = None


def _look(path: Path) -> _Seen:
    try:
        info = os.lstat(path)
    except OSError:
        return _Seen(None)
    if stat.S_ISLNK(info.st_mode):
        try:
            target, real = os.readlink(path), Path(os.path.realpath(path))
            return _Seen("link", real.read_bytes() if real.is_file() else None, link=target)
        except OSError:
            return _Seen("link", link="")
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISDIR(info.st_mode):
        return _Seen("dir", mode=mode)
    data = safefs.read_bytes(path.parent, path.name) if stat.S_ISREG(info.st_mode) else None
    return _Seen("file" if data is not None else "other", data, mode)


class ConfigSeal:
    """The configuration of one step's CLI as it was when the step started: whole files, and keys of others."""

    def __init__(self, paths: Iterable[Path], label: str, keyed: Iterable[tuple[Path, Iterable[str]]] = ()) -> None:
        self.label = label
        self.before = {path: _look(path) for path in paths}
        self.keyed = [KeySeal(path, keys, label) for path, keys in keyed]

    @property
    def files(self) -> list[Path]:
        """The configuration files there now (a sandboxed step sees them read-only)."""
        return [path for path, seen in self.before.items() if seen.kind in ("file", "dir")]

    def restore(self) -> list[str]:
        """Put back each file (and key) the step changed; a line for each."""
        found = [line for seal in self.keyed for line in seal.restore()]
        for path, before in self.before.items():
            now = _look(path)
            if now == before or before.kind == "other":  # what loope could not read, it cannot put back either
                continue
            with contextlib.suppress(OSError, safefs.UnsafePath):
                _put_back(path, before, now)
            found.append(f"{path} is {self.label}'s own configuration, not the step's to change; it was put back")
        return found


def _put_back(path: Path, before: _Seen, now: _Seen) -> None:
    parent, name = path.parent, path.name
    if before.kind == "link" and now.link == before.link:  # the user's link: the file it names goes back
        if before.data is not None:
            Path(os.path.realpath(path)).write_bytes(before.data)
        return
    if before.kind == "dir" and now.kind == "dir":  # only its mode is known (the sandbox keeps its files)
        os.chmod(path, before.mode)
        return
    if now.kind is not None:
        safefs.remove(parent, name)
    if before.kind == "link" and before.link is not None:
        os.symlink(before.link, path)
    elif before.kind == "dir":
        os.mkdir(path, before.mode)
    elif before.kind == "file" and before.data is not None:
        safefs.write_bytes(parent, name, before.data, mode=before.mode)


class KeySeal:
    """Some keys of a JSON state file the CLI rewrites itself (``~/.claude.json``): those keys are put back.

    ``keys`` are dotted paths; ``*`` stands for every key of an object (``projects.*.mcpServers``).
    The rest of the file is the CLI's to write, during the step and after.
    """

    def __init__(self, path: Path, keys: Iterable[str], label: str) -> None:
        self.path, self.label = path, label
        self.keys = [tuple(k.split(".")) for k in keys]
        self.before = self._picked()

    def _read(self) -> object:
        """The file's document: {} when it is missing, None when it is not JSON."""
        data = safefs.read_bytes(self.path.parent, self.path.name)
        try:
            return json.loads(data) if data is not None else {}
        except ValueError:
            return None

    def _picked(self, doc: object = _MISSING) -> dict[tuple[str, ...], object] | None:
        doc = self._read() if doc is _MISSING else doc
        if doc is None:
            return None
        found: dict[tuple[str, ...], object] = {}
        for key in self.keys:
            _pick(doc, key, (), found)
        return found

    def restore(self) -> list[str]:
        doc = self._read()
        now = self._picked(doc)
        if now == self.before or self.before is None:
            return []
        if not isinstance(doc, dict):
            return [f"{self.path} is no longer JSON; left as it is"]
        now = now or {}
        changed = sorted(k for k in {*self.before, *now} if now.get(k, _MISSING) != self.before.get(k, _MISSING))
        for key in changed:
            _put(doc, key, self.before.get(key, _MISSING))
        mode = stat.S_IMODE(os.lstat(self.path).st_mode)
        safefs.write_bytes(self.path.parent, self.path.name, json.dumps(doc, indent=2).encode(), mode=mode)
        names = ", ".join(".".join(k) for k in changed[:3]) + (
            f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        )
        return [f"{self.path} ({names}) is {self.label}'s own configuration, not the step's to change; it was put back"]


def _pick(node: object, key: tuple[str, ...], at: tuple[str, ...], found: dict[tuple[str, ...], object]) -> None:
    if not key:
        found[at] = node
        return
    if not isinstance(node, dict):
        return
    head, rest = key[0], key[1:]
    for name in list(node) if head == "*" else [head]:
        if name in node:
            _pick(node[name], rest, (*at, name), found)


def _put(doc: dict[str, object], key: tuple[str, ...], value: object) -> None:
    node: object = doc
    for name in key[:-1]:
        if not isinstance(node, dict):
            return
        node = node.setdefault(name, {}) if value is not _MISSING else node.get(name)
    if not isinstance(node, dict):
        return
    if value is _MISSING:
        node.pop(key[-1], None)
    else:
        node[key[-1]] = value


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def _named_dir(env: Mapping[str, str], home_env: Sequence[str]) -> Path | None:
    """The CLI's state dir as its variable names it (``CLAUDE_CONFIG_DIR``), if one does."""
    return next((Path(env[v]) for v in home_env if env.get(v)), None)


def state_paths(env: Mapping[str, str], home_env: Sequence[str], home_state: Sequence[str]) -> list[Path]:
    """Where the CLI keeps its own state for a step: ``home_state`` under HOME, and ``home_env``'s dirs."""
    return [_home(env) / rel for rel in home_state] + [Path(env[v]) for v in home_env if env.get(v)]


def state_dir_files(
    env: Mapping[str, str], home_env: Sequence[str], home_state: Sequence[str], names: Sequence[str]
) -> list[Path]:
    """``names`` (session dirs, configuration files) in the CLI's state dir for the environment ``env``."""
    if not names or not home_state:
        return []
    base = _named_dir(env, home_env) or _home(env) / home_state[0]
    return [base / rel for rel in names]


class StateDirs(Protocol):
    """Where an adapter's CLI keeps its state, and which of it is configuration."""

    home_env: ClassVar[tuple[str, ...]]
    home_state: ClassVar[tuple[str, ...]]
    home_config: ClassVar[tuple[str, ...]]
    home_config_keys: ClassVar[tuple[tuple[str, tuple[str, ...]], ...]]

    @property
    def label(self) -> str: ...


def seal_for(env: Mapping[str, str], cli: StateDirs) -> ConfigSeal:
    """What a step of ``cli`` may not change of its configuration, as it is now (``env``: the step's)."""
    files = state_dir_files(env, cli.home_env, cli.home_state, cli.home_config)
    base = _named_dir(env, cli.home_env) or _home(env)
    return ConfigSeal(files, cli.label, [(base / rel, keys) for rel, keys in cli.home_config_keys])
