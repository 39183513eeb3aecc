"""Keeping pytest's configuration search inside the workspace.

With no pytest configuration inside the work tree, pytest looks for one in every directory above
it: the run directory, ``.loope/``, the user's repository, their home. Anything written there would
configure the gate. When the tree has no configuration of its own, the gate runs with
``PYTEST_ADDOPTS`` naming an empty, runner-owned config file, the rootdir pytest would have chosen
inside the tree and the same directory as ``--confcutdir``, so no ``pytest.ini`` or ``conftest.py``
above the workspace is read. With a configuration in the tree, pytest stops there by itself and
nothing is added. The user's own ``-c`` / ``--rootdir`` on the command line still win.
"""

from __future__ import annotations

import configparser
import shlex
import tomllib
from collections.abc import Iterable
from pathlib import Path

BOUNDARY_NAME = "pytest-boundary.ini"
BOUNDARY = b"# loope: the workspace has no pytest configuration; none above it may be read\n[pytest]\n"
_INI_SECTIONS = {"pytest.ini": "pytest", ".pytest.ini": "pytest", "tox.ini": "pytest", "setup.cfg": "tool:pytest"}


def configures_pytest(path: Path) -> bool:
    """Whether pytest would take ``path`` as its configuration file."""
    name = path.name
    try:
        if name == "pyproject.toml":
            tool = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {})
            return isinstance(tool, dict) and "pytest" in tool
        if name in ("pytest.ini", ".pytest.ini"):
            return path.is_file()
        if name in _INI_SECTIONS:
            parser = configparser.ConfigParser(interpolation=None)
            parser.read_string(path.read_text(encoding="utf-8"))
            return parser.has_section(_INI_SECTIONS[name])
    except (OSError, ValueError, UnicodeDecodeError, configparser.Error):
        return False
    return False


def pytest_addopts(cwd: Path, top: Path, tracked: Iterable[str], boundary: Path) -> str | None:
    """The ``PYTEST_ADDOPTS`` that keep pytest inside ``top`` (None: the tree configures pytest itself).

    ``tracked``: the tree's files (relative to ``top``); any pytest configuration among them means
    pytest finds its own and nothing is added (a gate may well run pytest from a subdirectory).
    """
    candidates = [top / rel for rel in tracked if rel.rsplit("/", 1)[-1] in (*_INI_SECTIONS, "pyproject.toml")]
    if any(configures_pytest(p) for p in candidates):
        return None
    chain = [cwd, *[p for p in cwd.parents if p == top or top in p.parents]]
    rootdir = next((d for d in chain if (d / "pyproject.toml").is_file()), None)
    rootdir = rootdir or next((d for d in chain if (d / "setup.py").is_file()), cwd)
    words = ["-c", str(boundary), f"--rootdir={rootdir}", f"--confcutdir={rootdir}"]
    return " ".join(shlex.quote(w) for w in words)
