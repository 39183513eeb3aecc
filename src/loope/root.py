"""The project a command acts on when no --workdir is given: found from a subdirectory, as git does.

Kept to ``os`` alone: ``loope runs`` and ``loope status`` start fast.
"""

from __future__ import annotations

import os


def project_root(start: str | None = None) -> str:
    """The directory whose ``.loope/`` a command in ``start`` (default: the current one) acts on.

    Walking up from ``start``: the nearest directory holding ``loope.toml`` or ``.loope/``, but no
    higher than the repository's root (the nearest ``.git``, a directory or a worktree's file);
    without either, the repository root; outside a repository, ``start`` itself.
    """
    here = os.path.abspath(start or os.getcwd())
    current = here
    while True:
        # A run's own workspace (``.loope/runs/<id>/workspace``, a git worktree) belongs to the project above it.
        if f"{os.sep}.loope{os.sep}" not in current + os.sep and _marks_a_project(current):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return here
        current = parent


def _marks_a_project(directory: str) -> bool:
    markers = (os.path.join(directory, "loope.toml"), os.path.join(directory, ".loope", "runs"))
    return any(os.path.exists(m) for m in markers) or os.path.exists(os.path.join(directory, ".git"))
