"""``.loope/``: loope's own directory in a project, kept out of git without the user's help.

A module of its own, light to import: every command that reads runs needs it, and none of them
should pay for the workspace machinery.
"""

from __future__ import annotations

from pathlib import Path

from loope.records.atomic import write_text

LOOPE_DIR = ".loope"
_IGNORE_ALL = "# loope's own files: never part of your repository\n*\n"


def ensure_loope_dir(root: Path) -> Path:
    """``root/.loope``, created with a .gitignore that keeps it out of git without the user's help."""
    path = root / LOOPE_DIR
    path.mkdir(parents=True, exist_ok=True)
    ignore = path / ".gitignore"
    if not ignore.exists():
        write_text(ignore, _IGNORE_ALL)
    return path


def outside_view(path: Path) -> Path:
    """``path`` in a run's workspace as another process can read it: an overlay's merged view is the runner's
    alone, so a file the run wrote is read from its upper layer."""
    for parent in path.parents:
        if parent.name == "workspace" and (parent.parent / "overlay.json").is_file():
            upper = parent.parent / "upper" / path.relative_to(parent)
            return upper if upper.is_file() and not path.exists() else path
    return path
