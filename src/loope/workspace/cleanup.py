"""Removing a finished run: its worktree, its branch (only when every commit on it is the run's), its refs."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from loope.errors import LoopeError
from loope.records.model import RunRecord
from loope.workspace.branch import foreign_commits
from loope.workspace.git import Git, toplevel
from loope.workspace.run_branch import overlay_start


@dataclass
class Removal:
    """What removing one run did, or would do (``--dry-run``)."""

    run_id: str
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    """What was kept, each with why."""


def remove_run(record: RunRecord, run_root: Path, *, dry_run: bool = False) -> Removal:
    """Remove the run's worktree, branch and ``refs/loope/<id>*``, then its run directory."""
    result = Removal(record.run_id)
    ws = record.workspace
    top = toplevel(Path(record.workdir)) if Path(record.workdir).is_dir() else None
    git = Git(top) if top is not None else None
    if git is not None and ws.mode == "worktree" and Path(ws.path).exists():
        result.removed.append(f"worktree {ws.path}")
        if not dry_run:
            git.run("worktree", "remove", "--force", "--force", str(_worktree_root(Path(ws.path))), check=False)
    if git is not None and ws.mode in ("worktree", "overlay") and ws.branch and git.rev(f"refs/heads/{ws.branch}"):
        since = ws.base if ws.mode == "worktree" else _start_of(run_root)  # an overlay's base is its own
        foreign = foreign_commits(git, ws.branch, since, record.run_id)
        if foreign:
            result.kept.append(f"branch {ws.branch}: {foreign} commit(s) on it were not made by the run")
        else:
            result.removed.append(f"branch {ws.branch}")
            if not dry_run:
                git.run("branch", "-D", ws.branch, check=False)
    if git is not None:
        refs = git.out("for-each-ref", "--format=%(refname)", f"refs/loope/{record.run_id}").split()
        refs += git.out("for-each-ref", "--format=%(refname)", f"refs/loope/{record.run_id}/").split()
        for ref in sorted(set(refs)):
            result.removed.append(ref)
            if not dry_run:
                git.run("update-ref", "-d", ref, check=False)
    result.removed.append(f"run directory {run_root}")
    if not dry_run:
        shutil.rmtree(run_root, ignore_errors=True)
        if git is not None:
            git.run("worktree", "prune", check=False)
    return result


def _start_of(run_root: Path) -> str:
    """Where an overlay run's branch began; unknown: "" (every commit on the branch then counts)."""
    try:
        return overlay_start(run_root)
    except LoopeError:
        return ""


def _worktree_root(path: Path) -> Path:
    """The worktree's top (a run started in a subdirectory records the subdirectory as its path)."""
    for candidate in (path, *path.parents):
        if candidate.name == "workspace" and (candidate / ".git").exists():
            return candidate
    return path
