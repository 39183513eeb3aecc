"""Which files of the workspace a gate or metric command runs, in whatever shape it is written.

``python score.py``, ``cd tools && python score.py``, ``sh -c 'python bench.py'``, ``python -m
pkg.mod``, ``./bench.sh`` (and the scripts it calls): the command is split as the shell would
split it, ``cd`` is followed, ``sh -c`` strings and shell scripts are read as commands too, and
``python -m`` names are resolved to their files. For a metric, the local modules a Python script
imports are followed as well (with ``ast``, bounded), since any of them could print the score.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shlex
import sys
from pathlib import Path

_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "\n", "|&", ";;"}
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}
_PREFIXES = {"env", "exec", "time", "nohup", "command", "nice", "uv", "poetry", "pipenv", "run"}
_PY_OPTIONS_WITH_VALUE = {"-X", "-W", "-Q"}
MAX_FILES = 200
MAX_DEPTH = 4


def _tokens(command: str) -> list[str]:
    tokens: list[str] = []
    for line in command.splitlines():  # a comment ends at its line, as in the shell
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            tokens += [*lexer, ";"]
        except ValueError:
            tokens += [*line.split(), ";"]
    return tokens


def _simple_commands(command: str) -> list[list[str]]:
    found: list[list[str]] = [[]]
    for token in _tokens(command):
        if token in _SEPARATORS or set(token) <= set(";&|()"):
            found.append([])
        else:
            found[-1].append(token)
    return [words for words in found if words]


class _Finder:
    def __init__(self, root: Path, follow_imports: bool) -> None:
        self.root = root.resolve()
        self.follow_imports = follow_imports
        self.found: set[Path] = set()
        self.shadowed: set[str] = set()
        """``python -m NAME`` puts the working directory first on the path: a NAME.py there would run instead."""

    def _inside(self, path: Path) -> Path | None:
        try:
            resolved = path.resolve()
        except OSError:
            return None
        if resolved != self.root and self.root not in resolved.parents:
            return None
        return resolved

    def _add(self, path: Path, cwd: Path, depth: int) -> None:
        resolved = self._inside(path)
        if resolved is None or not resolved.is_file() or resolved in self.found or len(self.found) >= MAX_FILES:
            return
        self.found.add(resolved)
        if resolved.suffix == ".py":
            if self.follow_imports:
                self._imports(resolved, resolved.parent, depth)
        elif depth < MAX_DEPTH and _is_shell_script(resolved):
            try:
                text = resolved.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return
            self.command(text, cwd, depth + 1)

    def command(self, command: str, cwd: Path, depth: int = 0) -> None:
        for words in _simple_commands(command):
            cwd = self._simple(words, cwd, depth)

    def _simple(self, words: list[str], cwd: Path, depth: int) -> Path:
        while words and (("=" in words[0] and not words[0].startswith("=")) or words[0] in _PREFIXES):
            words = words[1:]
        while words and words[0].startswith("-") and len(words) > 1 and words[1] in _PREFIXES | {"python"}:
            words = words[1:]  # `env -i python …`
        if not words:
            return cwd
        program = os.path.basename(words[0])
        if program == "cd":
            target = cwd / words[1] if len(words) > 1 else self.root
            inside = self._inside(target)
            return inside if inside is not None and inside.is_dir() else cwd
        if program in _SHELLS and "-c" in words[1:-1]:
            if depth < MAX_DEPTH:
                self.command(words[words.index("-c") + 1], cwd, depth + 1)
            return cwd
        if program.startswith("python"):
            self._python(words[1:], cwd, depth)
        for word in words:
            if not word.startswith("-") and "=" not in word:
                self._add(cwd / word, cwd, depth)
        return cwd

    def _python(self, args: list[str], cwd: Path, depth: int) -> None:
        index = 0
        while index < len(args):
            arg = args[index]
            if arg == "-m" and index + 1 < len(args):
                top = args[index + 1].split(".")[0]
                where = cwd.relative_to(self.root).as_posix() if cwd != self.root else ""
                prefix = f"/{where}/" if where else "/"
                self.shadowed.update({f"{prefix}{top}.py", f"{prefix}{top}/"})
                self._module(args[index + 1], [cwd], depth)
                return
            if arg in _PY_OPTIONS_WITH_VALUE:
                index += 2
                continue
            if arg.startswith("-"):
                index += 1
                continue
            return  # the script: added with the other words

    def _module(self, name: str, bases: list[Path], depth: int) -> bool:
        """Add the files of module ``name`` found under one of ``bases``; whether it was found."""
        parts = [p for p in name.split(".") if p]
        for base in bases:
            if self._inside(base) is None or not parts:
                continue
            package = base.joinpath(*parts)
            candidates = [package.with_suffix(".py"), package / "__init__.py", package / "__main__.py"]
            hits = [c for c in candidates if c.is_file()]
            if not hits:
                continue
            for i in range(1, len(parts)):
                self._add(base.joinpath(*parts[:i], "__init__.py"), base, depth)
            for hit in hits:
                self._add(hit, base, depth)
            return True
        return False

    def _imports(self, script: Path, here: Path, depth: int) -> None:
        try:
            tree = ast.parse(script.read_bytes())
        except (SyntaxError, ValueError, OSError):
            return
        bases = [here, self.root]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self._module(alias.name, bases, depth)
            elif isinstance(node, ast.ImportFrom):
                base = script.parent
                for _ in range(max(0, node.level - 1)):
                    base = base.parent
                module = node.module or ""
                search = [base] if node.level else bases
                if module:
                    self._module(module, search, depth)
                for alias in node.names:
                    self._module(f"{module}.{alias.name}" if module else alias.name, search, depth)


def _is_shell_script(path: Path) -> bool:
    if path.suffix in (".sh", ".bash"):
        return True
    try:
        with path.open("rb") as handle:
            first = handle.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and any(shell.encode() in first for shell in _SHELLS)


def scripts_in(command: str | None, root: Path, *, follow_imports: bool = False) -> list[str]:
    """Files inside ``root`` (relative to it) that ``command`` runs; with ``follow_imports``, their local imports."""
    return files_and_shadows(command, root, follow_imports=follow_imports)[0]


def files_and_shadows(command: str | None, root: Path, *, follow_imports: bool = False) -> tuple[list[str], list[str]]:
    """``scripts_in``, and the globs of files that would shadow a ``python -m`` module if they appeared."""
    if not command:
        return [], []
    finder = _Finder(root, follow_imports)
    finder.command(command, finder.root)
    return sorted(p.relative_to(finder.root).as_posix() for p in finder.found), sorted(finder.shadowed)


def shadowed_module(rel: str, root: Path) -> str | None:
    """The installed or standard module a new ``rel`` would hide from a Python started in ``root``.

    Python puts the directory it runs in first on ``sys.path`` (``python -m pytest``, ``python
    score.py``): a ``pluggy.py`` there that exits 0 is imported by pytest before any test runs.
    """

    parts = rel.split("/")
    if len(parts) == 1 and parts[0].endswith(".py"):
        name = parts[0][:-3]
    elif len(parts) == 2 and parts[1] == "__init__.py":
        name = parts[0]
    else:
        return None
    if not name.isidentifier():
        return None
    if name in sys.stdlib_module_names:
        return name
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin).resolve()
    return None if root.resolve() in origin.parents else name
