"""A writing step's commit object, made while its changes are compared: two git processes at once.

After an agent step the guard needs the changes (``git diff-tree``) before anything is committed, and
the commit (``git commit-tree``) needs only the tree the changes were staged into. Both start from
that tree, so the commit object is begun as soon as the tree is written and taken once the guard has
passed the changes. When the guard undid a change, the tree committed is another one: the early
object is left unreferenced (git's own gc drops it) and the commit is made again.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from loope.proc import Started
from loope.workspace.git import Git


@dataclass
class EarlyCommit:
    """The commit object begun for the last tree staged, while the step's message is known."""

    message: str | None = None
    """What the commit will say (set by the step runner while it settles a writing step); None: no commit expected."""
    _made: tuple[str, str, str, Started] | None = None

    @contextmanager
    def expecting(self, message: str | None) -> Iterator[None]:
        """While the block runs, a tree staged gets its commit object begun with ``message`` (None: none)."""
        self.message = message
        try:
            yield
        finally:
            self.message = None

    def start(self, git: Git, tree: str, parent: str) -> None:
        """Begin the commit object of ``tree`` on ``parent`` (when a commit is expected and it is not begun yet)."""
        if self.message is None or (self._made is not None and self._made[:3] == (tree, parent, self.message)):
            return
        self.drop()
        self._made = (tree, parent, self.message, git.commit_object(tree, parent, self.message))

    def take(self, tree: str, parent: str, message: str) -> Started | None:
        """The commit object begun for exactly this commit, or None (one for another tree is dropped)."""
        made, self._made = self._made, None
        if made is None:
            return None
        if made[:3] == (tree, parent, message):
            return made[3]
        made[3].finish()
        return None

    def drop(self) -> None:
        """Let go of a commit object begun for a tree that is not committed (its process waited for)."""
        made, self._made = self._made, None
        if made is not None:
            made[3].finish()
