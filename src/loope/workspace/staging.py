"""How a step's changes become a tree: made from the changed files alone where it can, through loope's index else.

``Staging.stage`` asks the change tracker what changed and gives the tree of the work tree as it is
now. Where ``trees.TreeWriter`` can make it (the common case), no git command of the step reads the
whole index: loope's index takes the same paths in the background, and ``wait`` is
called before anything else reads or writes it. Anything else stages into the index and writes
its tree, as git itself would.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from loope.proc import Started
from loope.records.atomic import write_bytes
from loope.workspace.changes import ChangeTracker
from loope.workspace.git import Git, checked
from loope.workspace.split_index import SplitIndex
from loope.workspace.trees import TreeWriter

_UPDATE = ("update-index", "--add", "--remove", "--replace", "-z", "--stdin")


class Staging:
    """The tree loope's index holds, and the index's catching up with a tree made without it."""

    def __init__(self) -> None:
        self.trees: TreeWriter | None = None
        """Makes a step's tree from the changed files alone, while the workspace is watched."""
        self.tree: str | None = None
        """The tree loope's index holds (once ``wait`` returns); None: unknown since git last changed the index."""
        self._sync: Started | None = None
        """The ``update-index`` of the paths of the last tree ``trees`` made, under way."""
        self._committed = False
        """A commit was made whose index is yet to be folded back and copied for the agent (``settle``)."""

    def stage(self, git: Git, tracker: ChangeTracker, *, clean: bool) -> str | None:
        """Stage every file changed on disk since the last look; the tree staged, or None if none was seen and
        the index held ``head`` (``clean``)."""
        self.wait(git)
        paths, gone = tracker.changed_paths()
        made = self._without_index(git, tracker, paths, gone)
        if made is None:
            git.update_index(paths)
            git.drop_from_index(gone)
        tracker.staged(paths)
        tracker.tracked.difference_update(gone)
        if not (paths or gone) and clean:
            return None
        self.tree = made or git.write_tree()
        return self.tree

    def _without_index(self, git: Git, tracker: ChangeTracker, paths: list[str], gone: list[str]) -> str | None:
        """The tree of ``paths`` staged onto the last one, made by ``trees`` (the index takes them in later);
        None: stage through the index."""
        base, writer = self.tree, self.trees
        if base is None or writer is None or gone or not writer.plain(tracker.tracked):
            return None
        if not paths:
            return base
        data = b"".join(os.fsencode(p) + b"\0" for p in paths)
        if len(data) > Started.STDIN_MAX:
            return None
        tree = writer.tree_with(base, paths)
        if tree is not None:
            self._sync = git.start(*_UPDATE, stdin=data)  # at once: it runs beside all the step has left to do
        return tree

    def forget(self, git: Git) -> None:
        """Git is about to change loope's index itself (a restore, a reset): what tree it holds is git's to say."""
        self.wait(git)
        self.tree = None

    def wait(self, git: Git) -> None:
        """Return once loope's index holds ``tree`` (a GitError if its ``update-index`` failed)."""
        under_way, self._sync = self._sync, None
        if under_way is not None:
            done = under_way.finish()
            if not done.ok:
                self.tree = None  # what the index holds is git's to say now
            checked("update-index", done)

    def commits(self, git: Git) -> bool:
        """Whether ``commit`` writes the commits (then no ``git commit-tree`` need be begun early)."""
        return self.trees is not None and self.trees.commits(git.commit_env())

    def commit(self, git: Git, tree: str, parent: str, message: str) -> str | None:
        """The commit of ``tree`` on ``parent``, written by ``trees``; None: ``git commit-tree`` writes it."""
        return None if self.trees is None else self.trees.commit(tree, parent, message, git.commit_env())

    def committed(self, git: Git, split: SplitIndex | None, mirror: Path | None) -> None:
        """The staged tree was committed: settle the index now, or once it has caught up (``settle``)."""
        self._committed = True
        if self._sync is None:
            self.settle(git, split, mirror)

    def settle(self, git: Git, split: SplitIndex | None, mirror: Path | None) -> None:
        """``wait``, then, after a commit, fold the index back (``split``) and copy it for the agent (``mirror``).

        Called before anything reads or writes the index or the git dirs, and before every step.
        """
        self.wait(git)
        if self._committed:
            self._committed = False
            if split is not None and git.index_file is not None:
                split.compact(git, git.index_file)
            mirror_index(git, mirror)

    def watch(self, git: Git) -> None:
        self.trees = TreeWriter(git)

    def unwatch(self, git: Git) -> None:
        """Done with the batch commands: what is staged later (a finished worktree's last look) goes through the
        index."""
        self.wait(git)
        if self.trees is not None:
            self.trees.close()
            self.trees = None


def mirror_index(git: Git, mirror: Path | None) -> None:
    """Give the agent's git the index loope just committed (its ``git status`` then shows no change)."""
    index = git.index_file
    if mirror is None or index is None:
        return
    with contextlib.suppress(OSError):  # the agent's view only: loope's own records do not depend on it
        write_bytes(mirror, index.read_bytes())
