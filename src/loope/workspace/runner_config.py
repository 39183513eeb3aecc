"""The test runner's configuration: with a gate set, the agent may not change how its tests are run.

A ``conftest.py`` that patches the code under test, a ``pytest.ini`` that deselects the failing
tests, a ``.pth`` file that runs code in every Python process, a ``test`` script that exits 0: each
passes a gate without fixing anything. These files are protected whenever a gate is set, unless an
``--editable`` glob names them. In ``pyproject.toml`` only the ``[tool.pytest*]`` tables count (and
only they are put back), in ``package.json`` only ``scripts`` and the jest / vitest settings.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from loope.workspace import safefs

if TYPE_CHECKING:
    from loope.records.model import FileChange
    from loope.workspace.workspace import Workspace

# Python: what pytest and the interpreter read before any test runs.
_PYTHON = (
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "tox.ini",
    "setup.cfg",
    "sitecustomize.py",
    "usercustomize.py",
    "*.pth",
)
# Other runners, protected when the gate calls them (their manifests also hold what an agent may
# legitimately change, like dependencies, so they are not protected for every gate).
_BY_TOOL: dict[str, tuple[str, ...]] = {
    "js": (
        "jest.config.*",
        "vitest.config.*",
        "vitest.workspace.*",
        "vite.config.*",
        ".babelrc",
        "babel.config.*",
        ".npmrc",
    ),
    "cargo": ("Cargo.toml", ".cargo/config", ".cargo/config.toml", "rust-toolchain", "rust-toolchain.toml"),
    "go": ("go.mod", "go.work"),
    "make": ("Makefile", "makefile", "GNUmakefile", "*.mk"),
}
_TOOLS = {
    "js": {"npm", "npx", "yarn", "pnpm", "bun", "node", "jest", "vitest"},
    "cargo": {"cargo", "cargo-nextest"},
    "go": {"go", "gotestsum"},
    "make": {"make", "gmake"},
}
PARTIAL = ("pyproject.toml", "package.json")
"""Files of which only the runner's part is protected (see ``runner_part``)."""


def _named(pattern: str, editable: Sequence[str]) -> bool:
    """Whether an editable glob names this runner file (``conftest.py``, ``tests/conftest.py``…)."""
    stem = pattern.replace("*", "").rstrip(".")
    return any(stem and stem in glob for glob in editable)


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, posix=True)
    except ValueError:
        return command.split()


def patterns(gate: str | None, editable: Sequence[str]) -> list[str]:
    """The runner files to protect for ``gate`` (none without a gate), minus those ``editable`` names."""
    if not gate:
        return []
    words = {re.split(r"[/\\]", w)[-1] for w in _words(gate)}
    chosen = list(_PYTHON)
    for tool, names in _TOOLS.items():
        if words & names:
            chosen += _BY_TOOL[tool]
    return [p for p in chosen if not _named(p, editable)]


def partial_files(gate: str | None, editable: Sequence[str]) -> list[str]:
    """The file names whose runner part is protected (``pyproject.toml``, ``package.json``)."""
    if not gate:
        return []
    return [name for name in PARTIAL if not _named(name, editable)]


def runner_part(name: str, text: bytes) -> Any:
    """The part of ``pyproject.toml`` / ``package.json`` that configures a test runner (None: unreadable)."""
    try:
        if name == "pyproject.toml":
            import tomllib  # only where a pyproject.toml is read

            tool = tomllib.loads(text.decode("utf-8")).get("tool", {})
            return {k: v for k, v in tool.items() if k.startswith("pytest")} if isinstance(tool, dict) else None
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    return {k: data.get(k) for k in ("scripts", "jest", "vitest")}


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _pytest_tables(text: str) -> tuple[list[str], list[str]]:
    """The lines of ``text`` outside any ``[tool.pytest*]`` table, and the lines of those tables."""
    outside: list[str] = []
    inside: list[str] = []
    current = outside
    for line in text.splitlines(keepends=True):
        match = _HEADER.match(line)
        if match:
            key = match.group(1).replace('"', "").replace("'", "").replace(" ", "")
            current = inside if key.startswith("tool.pytest") else outside
        current.append(line)
    return outside, inside


def splice(name: str, old: bytes, new: bytes) -> bytes:
    """``new`` with its runner part put back as in ``old``; all of ``old`` when that cannot be done exactly."""
    if name != "pyproject.toml":
        return old
    try:
        old_text, new_text = old.decode("utf-8"), new.decode("utf-8")
    except UnicodeDecodeError:
        return old
    outside, _ = _pytest_tables(new_text)
    _, tables = _pytest_tables(old_text)
    body = "".join(outside)
    if tables:
        body = body.rstrip("\n") + "\n\n" + "".join(tables)
    spliced = body.encode("utf-8")
    # Only when the result says exactly "new, with old's pytest part" (no dotted keys elsewhere).
    if runner_part(name, spliced) != runner_part(name, old) or _without_runner(spliced) != _without_runner(new):
        return old
    return spliced


def _without_runner(text: bytes) -> Any:
    import tomllib

    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    tool = data.get("tool")
    if isinstance(tool, dict):
        data["tool"] = {k: v for k, v in tool.items() if not k.startswith("pytest")}
        if not data["tool"]:
            del data["tool"]
    return data


def undo_runner_parts(workspace: Workspace, changes: Iterable[FileChange], names: Sequence[str]) -> list[str]:
    """Put back the runner part of each changed ``pyproject.toml`` / ``package.json``; a line for each."""
    violations = []
    for change in changes:
        name = change.path.rsplit("/", 1)[-1]
        if name not in names:
            continue
        top = workspace.git.work_tree
        entry = workspace.git.entries(workspace.head, [change.path]).get(change.path)
        old = workspace.git.blob(entry.sha) if entry is not None else b""
        new = safefs.read_bytes(top, change.path)
        old_part = runner_part(name, old) if old else None
        new_part = runner_part(name, new) if new is not None else None
        if new_part == old_part or (entry is None and not any((new_part or {}).values())):
            continue
        if new is None or (entry is None and name == "package.json"):
            workspace.restore([change.path])
            violations.append(f"{change.path} configures the test runner; your change to it was undone")
            continue
        fixed = splice(name, old, new)
        safefs.write_bytes(top, change.path, fixed)
        what = "its [tool.pytest*] tables" if name == "pyproject.toml" else "its scripts, jest and vitest settings"
        kept = "the rest of your change is kept" if fixed != old else "the file was put back"
        violations.append(f"{change.path}: {what} configure the test runner and are protected; {kept}")
    return violations
