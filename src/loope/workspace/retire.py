"""A finished run's worktree: removed when the run ends, made again when the run goes on.

(An overlay run's tree is a mount that goes with its runner; only its state file is copied here.)

Everything a finished run holds is elsewhere: its commits on the run branch (and ``refs/loope/``),
its diff and records in the run dir. What lives only in the worktree is copied first: the agent's
state file. A worktree is kept when something in it is not in a commit (a step cut short, a
user's edit), so nothing is lost; ``--keep-workspace`` keeps it always.

Removal renames the tree aside in one step, then lets git forget it and deletes the files: a
deletion that fails half-way leaves a directory to delete by hand, never a half-removed workspace
that ``continue`` or ``apply`` would trip over.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
from pathlib import Path

from loope.enums import WorkspaceMode
from loope.errors import LoopeError
from loope.record import record
from loope.records.atomic import write_bytes
from loope.records.model import RunRecord
from loope.records.rundir import STATE_COPY
from loope.workspace import safefs
from loope.workspace.git import Git, GitError, toplevel
from loope.workspace.loopedir import LOOPE_DIR, ensure_loope_dir
from loope.workspace.workspace import Workspace, restart_own_index

_TRASH = "workspace.removed"
_STATE_REL = f"{LOOPE_DIR}/state.md"
_OVERLAY_KEPT = (
    "not kept: an overlay workspace is a mount that goes with its runner; its files are in its commits"
    " (`loope branch RUN` puts them on a branch), its upper/ layer and state.md; `loope continue` mounts it again"
)


@record(frozen=True)
class Retired:
    """What became of a finished run's worktree."""

    removed: bool
    note: str | None = None
    """Why it was kept, or what removing it left behind."""


def retire(ws: Workspace, run_dir: Path, *, keep: bool = False) -> Retired:
    """Remove a finished run's worktree, unless ``keep`` (``--keep-workspace``) or something in it is in no commit."""
    if ws.mode == WorkspaceMode.OVERLAY:  # its tree goes with the mount; its upper layer stays, and its state here
        with contextlib.suppress(OSError):
            _keep_state(ws, run_dir)
        return Retired(False, _OVERLAY_KEPT if keep else None)
    if keep or ws.mode != WorkspaceMode.WORKTREE or ws.branch is None:
        return Retired(False)
    try:
        loose = ws.pending()
        ws.sync_index()  # nothing of loope's is at work in the tree it removes
        if loose:
            more = f" and {len(loose) - 3} more" if len(loose) > 3 else ""
            return Retired(False, f"kept: {', '.join(c.path for c in loose[:3])}{more} changed after the last commit")
        _keep_state(ws, run_dir)
    except (LoopeError, OSError) as exc:
        return Retired(False, f"kept: {exc}")
    tree = run_dir / "workspace"  # the worktree's top (a run from a subdirectory works in part of it)
    trash = run_dir / _TRASH
    if os.path.lexists(trash):
        _delete(trash)
    try:
        os.rename(tree, trash)
    except OSError as exc:
        return Retired(False, f"kept: it could not be removed ({exc.strerror})")
    top = toplevel(run_dir)
    if top is not None:
        Git(top).run("worktree", "prune", check=False)  # git forgets the worktree whose tree is gone
    problem = _delete(trash)
    if problem:
        return Retired(True, f"removed, but {trash} could not be deleted ({problem}); delete it by hand")
    return Retired(True)


def _keep_state(ws: Workspace, run_dir: Path) -> None:
    """The agent's state file, copied to the run dir (where ``status`` and ``continue`` find it)."""
    state = safefs.read_bytes(ws.path, _STATE_REL)  # never through a link the agent left there
    if state is not None:
        write_bytes(run_dir / STATE_COPY, state)


def recreate(record: RunRecord, run_dir: Path) -> None:
    """Make a removed worktree again at the run's last commit (``continue``, ``resume``), with its state file."""
    info = record.workspace
    if info.mode != WorkspaceMode.WORKTREE or Path(info.path).exists():
        return
    tree = run_dir / "workspace"
    if tree.exists():
        raise LoopeError(
            f"run {record.run_id}: its workspace {tree} is incomplete ({info.path} is missing);"
            " move it aside and try again"
        )
    top = toplevel(Path(record.workdir)) if Path(record.workdir).is_dir() else None
    if top is None:
        raise LoopeError(
            f"run {record.run_id}: its workspace was removed and {record.workdir} is no longer in a git repository"
        )
    user = Git(top)
    user.run("worktree", "prune", check=False)
    head = record.completed_head or info.head
    if not user.rev(head):
        raise LoopeError(
            f"run {record.run_id}: its workspace was removed and its last commit {head[:10]} is gone;"
            " it cannot go on (start a new run with `loope run`)"
        )
    try:  # detached, as the run's worktree always is: only the run's end moves its branch
        user.run("worktree", "add", "-q", "--detach", str(tree), head)
    except GitError as exc:
        raise LoopeError(f"run {record.run_id}: its workspace cannot be made again: {exc}") from None
    info.git_dir = Git(tree).out("rev-parse", "--absolute-git-dir")
    restart_own_index(Path(info.git_dir), run_dir)
    info.removed, info.note = False, None
    path = Path(info.path)
    ensure_loope_dir(path)
    saved = run_dir / STATE_COPY
    if saved.is_file():
        write_bytes(path / _STATE_REL, saved.read_bytes())


def _delete(path: Path) -> str | None:
    """Delete a directory tree, read-only parts included; what stopped it, or None."""
    errors: list[str] = []

    def writable_and_again(_func: object, failed: str, _exc: object) -> None:
        parent = os.path.dirname(failed)
        try:
            os.chmod(parent, stat.S_IMODE(os.lstat(parent).st_mode) | stat.S_IRWXU)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, stat.S_IMODE(os.lstat(failed).st_mode) | stat.S_IRWXU)
                shutil.rmtree(failed)
            else:
                os.unlink(failed)
        except OSError as again:
            errors.append(f"{failed}: {again.strerror}")

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=writable_and_again)
    else:
        shutil.rmtree(path, onerror=writable_and_again)
    return errors[0] if errors else None
