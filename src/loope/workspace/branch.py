"""A worktree run's branch, ``loope/<run>``: the run's own commits on top of the user's HEAD, nothing else.

The worktree itself works on a detached HEAD whose history starts at a snapshot of the user's tree
as the run started (uncommitted and untracked files included): that is what the agents edit and
what loope diffs, keeps and reverts. A ``git merge`` of the branch must not bring that snapshot
along. So the branch holds each of the run's commits again — same message, author and dates — on
the commit the user had checked out, each carrying only the files the run changed: the user's
untracked files and uncommitted edits stay theirs. A file the run changed that the user had also
changed gets the run's change made on the user's committed version (a 3-way merge), or, where that
does not merge cleanly, comes as the run left it.

Replaying is deterministic (same trees, parents, messages and dates give the same commits), so a
run continued later extends the branch a user may already have merged.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Protocol

from loope.enums import WorkspaceMode
from loope.errors import LoopeError
from loope.workspace.git import Git, TreeEntry


class RunTree(Protocol):
    """What publishing reads of a run's workspace (``loope.workspace.workspace.Workspace``)."""

    @property
    def mode(self) -> WorkspaceMode: ...
    @property
    def git(self) -> Git: ...
    @property
    def base(self) -> str: ...
    @property
    def head(self) -> str: ...
    @property
    def branch(self) -> str | None: ...
    @property
    def start(self) -> str | None: ...
    @property
    def run_dir(self) -> Path | None: ...


_NO_ENTRY = "0 " + "0" * 40  # update-index --index-info: mode 0 removes the path


def claim_branch(user: Git, branch: str) -> None:
    """Check that the run's ``branch`` may be made in the user's repository: a valid name, not there yet."""
    if user.rev(f"refs/heads/{branch}"):
        raise LoopeError(f"branch {branch} already exists; pass another --branch or delete it")
    user.run("check-ref-format", "--branch", branch)


def publish_run(ws: RunTree, run_id: str) -> str | None:
    """Put a worktree run's commits on its branch, on top of the user's HEAD; None, or why the branch was left alone."""
    if ws.mode != WorkspaceMode.WORKTREE or not ws.branch or ws.start is None or ws.run_dir is None:
        return None  # no branch, or one the worktree itself is on (a run made before branches were replayed)
    # The worktree stays off the branch (an agent could have put it on, or a worker checked it out):
    # only this writes the branch.
    ws.git.run("update-ref", "--no-deref", "HEAD", ws.head)
    scratch = (ws.run_dir / "branch.index").absolute()
    return publish(ws.git, branch=ws.branch, start=ws.start, base=ws.base, head=ws.head, run_id=run_id, scratch=scratch)


def publish(git: Git, *, branch: str, start: str, base: str, head: str, run_id: str, scratch: Path) -> str | None:
    """Point ``branch`` at the run's commits (``base..head``) replayed on ``start``; None, or why not.

    ``start`` is the user's HEAD as the run started (empty: a repository without a commit). A
    branch holding commits the run did not make (the user's own, on top) is left as it is.
    """
    tip = replay(git, start=start, base=base, head=head, scratch=scratch)
    git.run("update-ref", f"refs/loope/{run_id}/head", head)  # the run's own history, kept without its worktree
    current = git.rev(f"refs/heads/{branch}")
    if tip is None or current == tip:
        return None
    if current is not None and current != start and foreign_commits(git, branch, base, run_id):
        return f"branch {branch} holds commits the run did not make: left as it was (`loope apply` lands the change)"
    git.run("update-ref", f"refs/heads/{branch}", tip)
    return None


def replay(git: Git, *, start: str, base: str, head: str, scratch: Path) -> str | None:
    """The last of the run's commits replayed on ``start`` (``start`` itself when the run made none)."""
    commits = git.out("rev-list", "--reverse", "--first-parent", f"{base}..{head}").split()
    parent: str | None = start or None
    if not commits:
        return parent
    private = git.with_env(GIT_INDEX_FILE=str(scratch))
    try:
        private.run("read-tree", *([start] if start else ["--empty"]))
        previous = base
        for commit in commits:
            paths = list(git.tree_changes(previous, commit))
            private.run("update-index", "-z", "--index-info", stdin=_entries(git, paths, start, base, commit))
            tree = private.write_tree()
            previous = commit
            if parent is not None and tree == git.tree_of(parent):
                continue  # it changed only what the user had changed, back to how they had it
            parent = _recommit(git, commit, tree, parent)
    finally:
        scratch.unlink(missing_ok=True)
    return parent


def _entries(git: Git, paths: list[str], start: str, base: str, commit: str) -> bytes:
    """Index lines giving each path the run's version, or the user's HEAD's where the run's is the snapshot's."""
    now, was = _files(git, commit, paths), _files(git, base, paths)
    theirs = _files(git, start, paths) if start else {}
    lines = []
    for path in paths:
        ran, started, had = now.get(path), was.get(path), theirs.get(path)
        entry = had if ran == started else ran
        if ran is not None and started is not None and had is not None and ran != started != had:
            entry = _merged(git, started, had, ran)  # a file the user had changed too
        meta = f"{entry.mode} {entry.sha}" if entry is not None else _NO_ENTRY
        lines.append(f"{meta}\t".encode() + os.fsencode(path) + b"\0")
    return b"".join(lines)


def _merged(git: Git, started: TreeEntry, had: TreeEntry, ran: TreeEntry) -> TreeEntry:
    """The run's change to a file (``started`` → ``ran``) made on the user's HEAD version ``had``, 3-way.

    The run's own version when that does not merge cleanly (or the file is binary, or a link).
    """
    if not started.mode == had.mode == ran.mode or ran.mode not in ("100644", "100755"):
        return ran
    blobs = git.blobs([had.sha, started.sha, ran.sha])
    with tempfile.TemporaryDirectory(prefix="loope-merge-") as tmp:
        names = []
        for name, entry in (("head", had), ("start", started), ("run", ran)):
            Path(tmp, name).write_bytes(blobs[entry.sha])
            names.append(str(Path(tmp, name)))
        merged = git.run("merge-file", "-p", "-q", *names, check=False)
    if merged.exit_code != 0:
        return ran
    sha = git.run("hash-object", "-w", "--no-filters", "--stdin", stdin=merged.stdout or b"").text.strip()
    return TreeEntry(ran.mode, sha)


def _files(git: Git, ref: str, paths: list[str]) -> dict[str, TreeEntry]:
    """The file entries (not directories) at exactly ``paths`` in ``ref``."""
    if not paths:
        return {}
    wanted = set(paths)
    raw = git.run("ls-tree", "-r", "-z", "--full-tree", ref, "--", *paths).stdout or b""
    found: dict[str, TreeEntry] = {}
    for record in raw.split(b"\0"):
        meta, _, name = record.partition(b"\t")
        path = os.fsdecode(name)
        if path in wanted:
            mode, _kind, sha = meta.decode().split()
            found[path] = TreeEntry(mode, sha)
    return found


def _recommit(git: Git, commit: str, tree: str, parent: str | None) -> str:
    """``commit`` again, with ``tree`` and ``parent``: the same message, author, committer and dates."""
    raw = git.run("cat-file", "commit", commit).stdout or b""
    headers, _, message = raw.partition(b"\n\n")
    env: dict[str, str] = {}
    for line in headers.decode("utf-8", "surrogateescape").splitlines():
        role, _, ident = line.partition(" ")
        if role in ("author", "committer"):
            who, _, when = ident.rpartition("> ")
            name, _, email = who.partition(" <")
            timestamp, _, zone = when.partition(" ")
            key = role.upper()
            env[f"GIT_{key}_NAME"], env[f"GIT_{key}_EMAIL"] = name, email
            env[f"GIT_{key}_DATE"] = f"@{timestamp} {zone}"
    parents = ["-p", parent] if parent else []
    return git.run("commit-tree", tree, *parents, "-F", "-", stdin=message, env=env).text.strip()


def foreign_commits(git: Git, branch: str, base: str, run_id: str) -> int:
    """How many commits on ``branch`` after the run's base the run did not make (a user's own, say).

    An empty ``base`` (a run in a repository with no commit yet) counts the whole branch.
    """
    span = f"{base}..refs/heads/{branch}" if base else f"refs/heads/{branch}"
    log = git.run("log", "--format=%B%x00", span, check=False)
    if not log.ok:
        return 0
    messages = [m.strip() for m in log.text.split("\0") if m.strip()]
    ours = (f"Loope-Run: {run_id}", f"loope {run_id}:")
    return sum(1 for m in messages if not any(mark in m for mark in ours))


def drop_branch(repo: Path, branch: str) -> None:
    """Delete a run's branch that loope itself created, if it exists."""
    git = Git(repo)
    if git.rev(f"refs/heads/{branch}"):
        git.run("worktree", "prune", check=False)
        git.run("branch", "-D", branch, check=False)


def snapshot(git: Git, index_file: Path) -> str:
    """A commit of the work tree exactly as it is (untracked, non-ignored files included): a worktree run's base.

    A private copy of the index does the staging, so the user's own index stays as it was.
    """
    head = git.rev("HEAD")
    real_index = Path(git.out("rev-parse", "--path-format=absolute", "--git-path", "index"))
    if real_index.exists():
        shutil.copyfile(real_index, index_file)
    private = Git(git.work_tree, env={"GIT_INDEX_FILE": str(index_file)})
    try:
        private.add_all()
        tree = private.out("write-tree")
    finally:
        index_file.unlink(missing_ok=True)
    if head and git.tree_of(head) == tree:
        return head
    parents = ["-p", head] if head else []
    return git.out("commit-tree", tree, *parents, "-m", "loope: uncommitted changes as the run started")
