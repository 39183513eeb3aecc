"""``loope branch RUN``: a finished run's commits on its branch (``loope/<run>``) in the user's repository.

The branch holds what a worktree run's branch holds (``branch.py``): each of the run's commits
replayed on the user's HEAD as the run started, carrying only the files the run changed. A
worktree run writes it as it finishes, so this writes it again, to the same commits. An overlay
run's commits live in its own git dir, out of the user's repository: they are replayed there, and
only the objects the replayed commits need (the run's new files and trees, its commits) are copied
into the user's repository. Nothing else there changes: no other ref, no config, no index, no
file, except a checkout of the branch itself, brought along when it has no uncommitted change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from loope.enums import WorkspaceMode
from loope.errors import EXIT_FAILED, LoopeError
from loope.record import record
from loope.records.model import RunRecord
from loope.workspace.branch import foreign_commits, replay
from loope.workspace.git import Git, toplevel
from loope.workspace.overlay import LAYOUT_FILE


class NothingToBranch(LoopeError):
    """The run has no change to put on a branch (exit 1: nothing is wrong, there is just nothing to do)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=EXIT_FAILED)


@record(frozen=True)
class Branched:
    """What ``branch_run`` left: the branch, its tip, where it was before, and the run's commits on it."""

    branch: str
    tip: str
    previous: str | None
    commits: int
    checkout: Path | None = None
    """A checkout of the branch that was brought to the new tip."""


def branch_run(record: RunRecord, run_dir: Path, name: str | None = None) -> Branched:
    """Point the run's branch in its user's repository at the run's commits; LoopeError saying why not."""
    ws, run_id = record.workspace, record.run_id
    top = toplevel(Path(record.workdir))
    if top is None:
        raise LoopeError(f"run {run_id}'s workdir {record.workdir} is no longer in a git repository")
    user = Git(top)
    source = _source(record, run_dir, name, user)
    commits = len(source.git.out("rev-list", "--first-parent", f"{ws.base}..{ws.head}").split())
    if not commits:
        raise NothingToBranch(f"run {run_id} made no commits; there is nothing to put on a branch")
    scratch = (run_dir / "branch.index").absolute()
    tip = replay(source.git, start=source.start, base=ws.base, head=ws.head, scratch=scratch)
    if tip is None or tip == source.start:
        raise NothingToBranch(
            f"run {run_id}'s commits change nothing on the commit it started from; there is nothing to put on a branch"
        )
    branch = source.branch
    current = user.rev(f"refs/heads/{branch}")
    if current == tip:
        return Branched(branch, tip, current, commits)
    if current is not None and current != source.start and foreign_commits(user, branch, source.since, run_id):
        raise LoopeError(
            f"branch {branch} holds commits the run did not make: left as it was"
            f" (delete or rename it, or `loope apply {run_id}` lands the change)",
            exit_code=EXIT_FAILED,
        )
    checkout = _checkout_of(user, branch)
    if checkout is not None:
        _refuse_changes(checkout, branch, run_id)
    if source.git is not user:
        _copy_objects(source.git, user, tip, source.start)
    if checkout is not None and current is not None:
        Git(checkout).run("read-tree", "-u", "-m", current, tip)  # as a fast-forward moves a checkout
    user.run("update-ref", "-m", f"loope branch {run_id}", f"refs/heads/{branch}", tip, current or "0" * 40)
    return Branched(branch, tip, current, commits, checkout)


def publish_overlay(record: RunRecord, run_dir: Path) -> str | None:
    """As an overlay run that has a branch ends: its commits on it, its ``refs/loope/<run>/`` refs copied too.

    None, or why the branch was left as it was. A run that made no commit leaves no branch.
    """
    ws = record.workspace
    if ws.mode != WorkspaceMode.OVERLAY or not ws.branch or not ws.git_dir:
        return None
    try:
        branched = branch_run(record, run_dir, ws.branch)
    except LoopeError as exc:
        return None if isinstance(exc, NothingToBranch) else str(exc)
    run_git, user = Git(run_dir / "workspace", Path(ws.git_dir)), Git(branched.checkout or Path(record.workdir))
    listed = run_git.out("for-each-ref", "--format=%(objectname) %(refname)", f"refs/loope/{record.run_id}/")
    for line in listed.splitlines():
        sha, ref = line.split(" ", 1)
        _copy_objects(run_git, user, sha, branched.tip)
        user.run("update-ref", ref, sha)
    return None


@dataclass(frozen=True)
class _Source:
    git: Git
    """The git holding the run's commits."""
    branch: str
    start: str
    """The user's HEAD as the run started ("": a repository with no commit yet)."""
    since: str
    """Where the branch's commits of the run begin (commits after it are counted as the run's or not)."""


def _source(record: RunRecord, run_dir: Path, name: str | None, user: Git) -> _Source:
    """Where the run's commits are, and which branch gets them; LoopeError for a run that keeps none."""
    ws, run_id = record.workspace, record.run_id
    if ws.mode == WorkspaceMode.WORKTREE and ws.start is not None and ws.branch:
        source = _Source(user, ws.branch, ws.start, ws.base)  # its worktree shares the user's objects
    elif ws.mode == WorkspaceMode.WORKTREE:
        raise LoopeError(f"run {run_id} works on its branch {ws.branch} itself; it has nothing to publish")
    elif ws.mode == WorkspaceMode.OVERLAY and ws.git_dir:
        start = overlay_start(run_dir)
        source = _Source(Git(run_dir / "workspace", Path(ws.git_dir)), name or f"loope/{run_id}", start, start)
    else:
        raise LoopeError(
            f"run {run_id} is a {ws.mode} run, which keeps no branch;"
            f" `loope apply {run_id} --commit` commits its change"
        )
    user.run("check-ref-format", "--branch", source.branch)
    if source.start and not user.run("cat-file", "-e", f"{source.start}^{{commit}}", check=False).ok:
        raise LoopeError(
            f"the commit run {run_id} started from ({source.start[:10]}) is no longer in {user.work_tree};"
            " `loope apply` lands the change",
            exit_code=EXIT_FAILED,
        )
    return source


def overlay_start(run_dir: Path) -> str:
    """The user's HEAD as an overlay run started ("" in a repository with no commit), from its layout."""
    try:
        head = json.loads((run_dir / LAYOUT_FILE).read_text(encoding="utf-8"))["head"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LoopeError(f"{run_dir / LAYOUT_FILE} is missing or damaged ({exc}); the run's start is unknown") from None
    return str(head or "")


def _checkout_of(user: Git, branch: str) -> Path | None:
    """The worktree of the user's repository that has ``branch`` checked out, if one has."""
    listing = user.run("worktree", "list", "--porcelain", "-z").stdout or b""
    path: Path | None = None
    for field in listing.decode("utf-8", "surrogateescape").split("\0"):
        if field.startswith("worktree "):
            path = Path(field.removeprefix("worktree "))
        elif field == f"branch refs/heads/{branch}":
            return path
    return None


def _refuse_changes(checkout: Path, branch: str, run_id: str) -> None:
    """Moving a checked-out branch moves its files too: only where no uncommitted change would be lost."""
    # No optional locks: looking must not rewrite the user's index (a refresh would).
    status = Git(checkout).run("status", "--porcelain", "--untracked-files=no", env={"GIT_OPTIONAL_LOCKS": "0"})
    if status.text.strip():
        raise LoopeError(
            f"branch {branch} is checked out in {checkout} with uncommitted changes; commit or stash them"
            f" (or check out another branch), then `loope branch {run_id}` again",
            exit_code=EXIT_FAILED,
        )


def _copy_objects(run_git: Git, user: Git, tip: str, start: str) -> None:
    """Copy into the user's repository the objects of ``tip`` it lacks (everything ``start`` does not reach).

    A pack made from the run's git dir and indexed by the user's: no program of the run's git
    dir's config runs (as ``git fetch`` would run its upload-pack), and no ref of theirs moves.
    """
    revs = f"{tip}\n" + (f"^{start}\n" if start else "")
    pack = run_git.run("pack-objects", "--revs", "--stdout", "-q", stdin=revs.encode()).stdout or b""
    user.run("index-pack", "--stdin", stdin=pack)
