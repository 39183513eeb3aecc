"""``.loope/``: loope's own directory in a project, kept out of git without the user's help.

The names live with the run directory (``records/rundir.py``), below the workspace; they are
re-exported here for the modules that import them from the workspace side.
"""

from __future__ import annotations

from pathlib import Path

from loope.records.rundir import LOOPE_DIR, ensure_loope_dir

__all__ = ["LOOPE_DIR", "ensure_loope_dir", "outside_view", "workspace_tree"]


def outside_view(path: Path) -> Path:
    """``path`` in a run's workspace as another process can read it: an overlay's merged view is the runner's
    alone, so a file the run wrote is read from its upper layer."""
    for parent in path.parents:
        if parent.name == "workspace" and (parent.parent / "overlay.json").is_file():
            upper = parent.parent / "upper" / path.relative_to(parent)
            return upper if upper.is_file() and not path.exists() else path
    return path


def workspace_tree(path: Path) -> Path | None:
    """The ``workspace`` tree of a run dir holding ``path`` (the workdir's counterpart may be a subdirectory)."""
    for candidate in (path, *path.parents):
        if candidate.name == "workspace" and (candidate.parent / "spec.json").exists():
            return candidate
    return None
