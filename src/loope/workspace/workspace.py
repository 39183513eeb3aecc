"""Where agents work: a git worktree, a tracked copy, the user's own tree under a shadow git dir, or an overlay.

Every mode is git-backed, so snapshots, diffs, keep and revert cost what the change costs, not
what the repository weighs. None of them touches the user's index, branch or files (in-place
edits the files on purpose, and still leaves the user's ``.git`` alone).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import field
from pathlib import Path

from loope.enums import WorkspaceMode
from loope.errors import LoopeError
from loope.proc import run_process
from loope.record import record
from loope.records.atomic import write_text
from loope.records.model import FileChange
from loope.workspace import overlay, safefs
from loope.workspace.branch import claim_branch, drop_branch, snapshot
from loope.workspace.changes import ChangeFeed, ChangeTracker
from loope.workspace.comparison import Comparison
from loope.workspace.copying import copy_entry, visible_files
from loope.workspace.early import EarlyCommit
from loope.workspace.git import Git, safe_command, safe_env, toplevel
from loope.workspace.ignores import FrozenIgnores, collect
from loope.workspace.loopedir import LOOPE_DIR as LOOPE_DIR  # noqa: PLC0414 - re-exported for older importers
from loope.workspace.loopedir import ensure_loope_dir as ensure_loope_dir  # noqa: PLC0414 - re-exported likewise
from loope.workspace.loopedir import workspace_tree
from loope.workspace.split_index import SplitIndex
from loope.workspace.staging import Staging, mirror_index
from loope.workspace.watch import Watcher

INDEX_FILE = "workspace.index"
"""loope's own index of the workspace, in the run dir: the agent's git commands use another one."""
IGNORES_FILE = "ignore-rules"
"""The user's ignore rules as the run started (see ignores.py)."""


@record()
class Workspace:
    """The tree the agents edit, and the git history loope keeps of it."""

    mode: WorkspaceMode
    path: Path
    """The directory agents run in (the workdir's counterpart inside the work tree)."""
    git: Git
    base: str
    """The commit holding exactly what the user saw when the run started."""
    head: str
    """The last committed state."""
    branch: str | None = None
    start: str | None = None
    """The user's HEAD as a worktree run started, where its branch begins ("": no commit yet; None: the
    branch is the worktree's own, as runs made before kept it)."""
    git_dir: Path | None = None
    run_dir: Path | None = None
    tracker: ChangeTracker | None = None
    """Tells which paths changed, so a step costs what it touched (set by ``start_watching``)."""
    mirror: Path | None = None
    """The index the agent's own git commands read, kept equal to loope's after each commit."""
    note: str | None = None
    """One line for the user about how the mode was chosen (``auto`` where an overlay cannot work)."""
    clean: bool = False
    """loope's index is known to equal ``head`` (nothing staged since the last commit, reset or restore)."""
    split: SplitIndex | None = None
    """How loope's index is kept split (worktree and overlay runs)."""
    early: EarlyCommit = field(default_factory=EarlyCommit)
    """The next commit's object, begun by ``pending`` while the changes are compared."""
    staging: Staging = field(default_factory=Staging)
    """How a step's changes become a tree (made from the changed files alone, where it can: staging.py)."""
    _head_tree: str | None = None
    _pending: tuple[str, Comparison] | None = None
    """The tree staged by ``pending`` and how it differs from ``head``, while nothing else touched the index."""
    _compared: dict[tuple[str, str], Comparison] = field(default_factory=dict)
    _top: tuple[Path | None] | None = None

    def user_repo(self, workdir: Path) -> Path | None:
        """The top of the user's repository holding ``workdir`` (None outside one), asked of git once."""
        if self._top is None:
            self._top = (toplevel(workdir),)
        return self._top[0]

    # -- creating -----------------------------------------------------------------------------

    @classmethod
    def create(
        cls, workdir: Path, run_dir: Path, run_id: str, mode: WorkspaceMode | None, branch: str | None,
        *, keep: bool = False,
    ) -> Workspace:  # fmt: skip
        top = overlay.toplevel_of(workdir)
        run_branch = branch or f"loope/{run_id}"
        mode, note, publish = overlay.resolve(workdir, top, mode, run_branch, wants_worktree=bool(branch or keep))
        chosen = mode or (WorkspaceMode.WORKTREE if top else WorkspaceMode.COPY)
        if chosen == WorkspaceMode.OVERLAY:
            if publish is not None and top is not None:
                claim_branch(Git(top), publish)
            ws = cls._overlay(workdir, top, run_dir)
            ws.branch = publish
        elif chosen == WorkspaceMode.WORKTREE:
            if top is None:
                raise LoopeError(f"{workdir} is not in a git repository; run `git init` there or use --workspace copy")
            ws = cls._worktree(workdir, top, run_dir, run_branch)
        elif chosen == WorkspaceMode.COPY:
            ws = cls._copy(workdir, top, run_dir)
        else:
            ws = cls._in_place(workdir, run_dir)
        ws._own_index(run_dir)
        ws.note = note
        ws._top = (top,)
        return ws

    @classmethod
    def _worktree(cls, workdir: Path, top: Path, run_dir: Path, branch: str) -> Workspace:
        user = Git(top)
        claim_branch(user, branch)
        start = user.rev("HEAD") or ""
        base = snapshot(user, run_dir / "snapshot.index")
        tree = run_dir / "workspace"
        try:
            if start:  # the branch starts at the user's HEAD; the run's commits join it as the run ends
                user.run("branch", "--no-track", branch, start)
            # Detached: the worktree's history starts at the snapshot, which must stay off the branch.
            user.run("worktree", "add", "-q", "--detach", str(tree), base)
        except LoopeError:
            shutil.rmtree(tree, ignore_errors=True)
            drop_branch(top, branch)  # it did not exist before: a half-made worktree leaves nothing behind
            raise
        git_dir = Path(Git(tree).out("rev-parse", "--absolute-git-dir"))
        sub = workdir.resolve().relative_to(top.resolve())
        path = tree / sub
        ensure_loope_dir(path)
        git = _confined(tree, git_dir)
        mode = WorkspaceMode.WORKTREE
        return cls(mode, path, git, base, base, branch=branch, start=start, git_dir=git_dir, run_dir=run_dir)

    @classmethod
    def _overlay(cls, workdir: Path, top: Path | None, run_dir: Path) -> Workspace:
        if top is None:
            raise LoopeError(f"{workdir} is not in a git repository; run `git init` there or use --workspace copy")
        tree, git_dir, base, base_tree = overlay.create(workdir, top, run_dir)
        path = ensure_loope_dir(tree / workdir.resolve().relative_to(top.resolve())).parent
        git = _confined(tree, git_dir)
        return cls(WorkspaceMode.OVERLAY, path, git, base, base, git_dir=git_dir, run_dir=run_dir, _head_tree=base_tree)

    @classmethod
    def _copy(cls, workdir: Path, top: Path | None, run_dir: Path) -> Workspace:
        tree = run_dir / "workspace"
        tree.mkdir(parents=True)
        for rel in visible_files(workdir, top):
            copy_entry(workdir / rel, tree / rel)
        git_dir = run_dir / "shadow.git"
        init = safe_command("init", "-q", f"--separate-git-dir={git_dir}", str(tree))
        run_process(init, cwd=run_dir, env=safe_env(), capture=True)
        ensure_loope_dir(tree)
        git = _confined(tree, git_dir)
        base = git.commit_all("loope: the workdir as the run started")
        return cls(WorkspaceMode.COPY, tree, git, base, base, git_dir=git_dir, run_dir=run_dir)

    @classmethod
    def _in_place(cls, workdir: Path, run_dir: Path) -> Workspace:
        git_dir = run_dir / "shadow.git"
        run_process(safe_command("init", "-q", "--bare", str(git_dir)), cwd=run_dir, env=safe_env(), capture=True)
        exclude = git_dir / "info" / "exclude"
        write_text(exclude, f"/{LOOPE_DIR}/\n")
        git = Git(workdir, git_dir)
        git.run("config", "core.bare", "false")
        base = git.commit_all("loope: the workdir as the run started")
        return cls(WorkspaceMode.IN_PLACE, workdir, git, base, base, git_dir=git_dir, run_dir=run_dir)

    def _own_index(self, run_dir: Path) -> None:
        """From here on loope stages into an index of its own, with the user's ignore rules frozen.

        The agent's git commands keep the usual index (``git status`` works for it), but nothing
        it does there (flags, ``git rm``, commits) changes what loope sees.
        """
        self.mirror = self.git.index_path()
        index = (run_dir / INDEX_FILE).absolute()
        begun = overlay.begun(run_dir) if self.mode == WorkspaceMode.OVERLAY else None
        shutil.copyfile(self.mirror, index)  # an overlay's is split already, its files listed (kept.py)
        self.git = self.git.with_env(GIT_INDEX_FILE=str(index))
        tracker = ChangeTracker(self.git, None, set(begun.tracked) if begun else None)
        sub = self.path.resolve().relative_to(self.git.work_tree.resolve()).as_posix()
        own = f"/{sub}/{LOOPE_DIR}/" if sub != "." else f"/{LOOPE_DIR}/"
        rules = collect(self.git, tracker.tracked, extra=[own])
        tracker.ignores = FrozenIgnores.freeze(run_dir / IGNORES_FILE, rules)
        self.tracker = tracker
        if self.mode in (WorkspaceMode.WORKTREE, WorkspaceMode.OVERLAY):
            # Its shared part lives in the (worktree's or shadow) git dir: a copy works only there.
            self.split = SplitIndex.make(self.git, len(tracker.tracked), split=begun is not None)

    # -- reopening (resume, apply, show) ------------------------------------------------------

    @classmethod
    def reopen(
        cls, *, mode: WorkspaceMode, path: Path, base: str, head: str, branch: str | None, git_dir: Path | None,
        start: str | None = None,
    ) -> Workspace:  # fmt: skip
        if mode == WorkspaceMode.IN_PLACE:
            git = Git(path, git_dir)
            run_dir = git_dir.parent if git_dir is not None else None
        else:
            tree = workspace_tree(path)
            git = _confined(tree, git_dir) if tree is not None else Git(path)
            run_dir = tree.parent if tree is not None else None
        ws = cls(mode, path, git, base, head, branch=branch, start=start, git_dir=git_dir, run_dir=run_dir)
        if run_dir is None or not (path.is_dir() or mode == WorkspaceMode.OVERLAY):  # an overlay: mounted later
            return ws
        index = (run_dir / INDEX_FILE).absolute()
        if index.is_file():
            ws.mirror = Path(git.out("rev-parse", "--path-format=absolute", "--git-path", "index"))
            ws.git = git.with_env(GIT_INDEX_FILE=str(index))
            ws.tracker = ChangeTracker(ws.git, FrozenIgnores.load(run_dir / IGNORES_FILE))
        return ws

    # -- per step -----------------------------------------------------------------------------

    def start_watching(self, feed: ChangeFeed | None = None) -> None:
        """Listen for changes from now on: ``feed``, or inotify on every directory a change can appear in.

        ``LOOPE_WATCH=scan`` turns inotify off (each step then scans the tree), for file systems
        whose notifications cannot be trusted.
        """
        tracker = self._changes()
        if self.mirror is not None:  # loope has an index of its own here, which the batch commands need not read
            self.staging.watch(self.git)
        if feed is None and self.mode == WorkspaceMode.OVERLAY:
            feed = overlay.feed(self.git.work_tree.parent)  # its upper layer lists every change, no inotify needed
        if feed is None and os.environ.get("LOOPE_WATCH") != "scan":
            watcher = Watcher(self.git.work_tree, tracker.watch_dirs())
            feed = watcher if watcher.active else None
        tracker.feed = feed

    def stop_watching(self) -> None:
        """Done with the tree: stop listening (and an overlay's mount goes, its upper layer stays)."""
        self.sync_index()
        self.staging.unwatch(self.git)
        if self.tracker is not None:
            self.tracker.close()
        if self.mode == WorkspaceMode.OVERLAY:
            overlay.unmount(self.git.work_tree.parent)

    def mount(self) -> None:
        """Make the tree present again where it is a mount (an overlay's, gone with the runner that made it)."""
        if self.mode == WorkspaceMode.OVERLAY:
            overlay.mount(self.git.work_tree.parent)

    def _changes(self) -> ChangeTracker:
        if self.tracker is None:
            self.tracker = ChangeTracker(self.git, None)
        return self.tracker

    def sync_index(self) -> None:
        """Wait for loope's index to hold what was last staged, then fold it back and copy it for the agent.

        Called before anything reads or writes the index or the git dirs, and before every step.
        """
        self.staging.settle(self.git, self.split, self.mirror)

    def tracked_files(self) -> list[str]:
        """Every file loope's index holds, from the top of the work tree, in git's order (no git call)."""
        return sorted(self._changes().tracked)

    def head_tree(self) -> str:
        if self._head_tree is None:
            self._head_tree = self.git.tree_of(self.head)
        return self._head_tree

    def pending(self) -> list[FileChange]:
        """What differs from ``head`` in the tree (staged as a side effect, never committed)."""
        self.sync_index()
        tree = self.staging.stage(self.git, self._changes(), clean=self.clean)
        if tree is None:
            return []
        self.clean = False
        if self._pending is None or self._pending[0] != tree:
            if tree != self.head_tree() and not self.staging.commits(self.git):
                self.early.start(self.git, tree, self.head)
            self._pending = (tree, self._compare_trees(self.head_tree(), tree))
        return self._pending[1].changes

    def _compare_trees(self, old: str, new: str) -> Comparison:
        if old == new:
            return Comparison([], b"")
        trees = self.staging.trees
        return (trees.compare(old, new) if trees is not None else None) or self.git.compare(old, new)

    def commit(self, message: str, staged: list[FileChange] | None = None) -> list[FileChange]:
        """Commit what changed since ``head``; the changed files (empty when nothing changed).

        ``staged`` is what ``pending`` just returned, when nothing has changed since (saves a scan).
        """
        if staged is None or self._pending is None:
            self.pending()
        assert self._pending is not None or self.clean
        if self._pending is None or not self._pending[1].changes:
            self._settled()
            return []
        tree, comparison = self._pending
        old = self.head
        made = self.staging.commit(self.git, tree, old, message)
        self.head = self.git.commit_tree(tree, old, message, started=self.early.take(tree, old, message), made=made)
        self._head_tree = tree
        self._compared[(old, self.head)] = comparison
        self._settled()
        self.staging.committed(self.git, self.split, self.mirror)
        return comparison.changes

    def _settled(self) -> None:
        self._pending = None
        self.clean = True
        self.early.drop()

    def restore(self, paths: list[str]) -> None:
        """Put ``paths`` back as they are at ``head`` (deleting files that did not exist there)."""
        if not paths:
            return
        self.sync_index()
        self.staging.forget(self.git)
        self.clean = False
        self._pending = None
        existing = set(self.git.entries(self.head, paths))
        tracked = [p for p in paths if p in existing]
        for rel in paths:
            if rel not in existing:
                self.git.run("rm", "-q", "--cached", "--ignore-unmatch", "--", rel)
                safefs.remove(self.git.work_tree, rel)  # never through a link on the way
        if tracked:
            self.git.run("checkout", self.head, "--", *tracked)
        self._changes().staged(paths)

    def reset(self, commit: str) -> None:
        """Discard everything after ``commit``, whatever state the tree is in (a full reset)."""
        self.sync_index()
        self.staging.forget(self.git)
        tracker = self._changes()
        self.git.reset_hard(commit, keep=tracker.ignores.path if tracker.ignores else None)
        tracker.forget_index()
        if tracker.feed is not None:
            tracker.feed.drain()
        self._moved(commit)

    def revert_to(self, commit: str) -> None:
        """Go back to ``commit`` from a clean ``head``, touching only the files that differ between them."""
        self.sync_index()
        self.staging.forget(self.git)
        changes = self.changes(commit, self.head)
        restored = [c.path for c in changes if c.status != "added"]
        added = [c.path for c in changes if c.status == "added"]
        self.git.run("reset", "-q", "--soft", commit)
        if restored:
            self.git.run("checkout", commit, "--", *restored)
        if added:
            self.git.run("rm", "-q", "-f", "--", *added)
        self._changes().staged([c.path for c in changes])
        self._moved(commit)

    def _moved(self, commit: str) -> None:
        self.head = commit
        self._head_tree = None
        self._settled()
        mirror_index(self.git, self.mirror)

    def keep_ref(self, name: str, commit: str) -> None:
        """Keep ``commit`` reachable under ``refs/loope/<name>`` (a reverted attempt, say)."""
        self.git.run("update-ref", f"refs/loope/{name}", commit)

    def compare(self, old: str | None = None, new: str | None = None) -> Comparison:
        """How ``new`` (``head``) differs from ``old`` (``base``): files and patch, from one git call."""
        key = (old or self.base, new or self.head)
        found = self._compared.get(key)
        if found is None:
            found = self.git.compare(*key)
            self._compared = dict(list(self._compared.items())[-7:])  # a few recent ones are all a run reuses
            self._compared[key] = found
        return found

    def changes(self, old: str | None = None, new: str | None = None) -> list[FileChange]:
        return self.compare(old, new).changes

    def diff(self, old: str | None = None, new: str | None = None) -> str:
        return self.compare(old, new).text


def _confined(tree: Path, git_dir: Path | None) -> Git:
    """Git for a workspace tree that can never reach another repository.

    The tree lives inside the user's project (``.loope/runs/<id>/workspace``) and its ``.git`` file
    is the agent's to change: the git dir is named explicitly, so a deleted or rewritten ``.git``
    can point loope's own commands neither at the user's repository nor at one the agent made.
    """
    return Git(tree, git_dir, env={"GIT_CEILING_DIRECTORIES": str(tree.resolve().parent)})


def restart_own_index(git_dir: Path, run_dir: Path) -> None:
    """Loope's own index begun again from a new checkout's: the old one names a shared index of its old worktree."""
    shutil.copyfile(git_dir / "index", run_dir / INDEX_FILE)
