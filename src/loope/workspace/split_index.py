"""loope's own index as a split index, kept split: each step reads and writes what it changed.

A split index keeps most entries in a shared part (in the git dir) and only the changed ones in
its own file, so a step's ``update-index`` and ``write-tree`` rewrite a few entries instead of
the whole index (1.6 MB at 20,000 files). The own part must stay small for that to hold.
"""

from __future__ import annotations

import time
from pathlib import Path

from loope.record import record
from loope.workspace.git import Git

_ENTRY_BYTES = 80
"""About what one entry weighs (62 bytes of stat data and object id, and its path)."""


@record()
class SplitIndex:
    """The size past which the own part goes into a new shared part, and when that was last tried."""

    limit: int
    second: int

    @classmethod
    def make(cls, git: Git, entries: int, *, split: bool = False) -> SplitIndex:
        """Split ``git``'s index (of ``entries`` files; ``split``: it is already); its shared part goes to the
        git dir it is used with."""
        if not split:
            git.run("update-index", "--split-index")
        # A fortieth of the whole (every step reads and writes the own part), and a few entries at least.
        return cls(max(16 * 1024, entries * _ENTRY_BYTES // 40), int(time.time()))

    def compact(self, git: Git, index: Path) -> None:
        """Fold the own part into a new shared part once it has grown past ``limit``.

        A fresh checkout's files written in the second its index was are racily clean: git smudges
        their stat data, and every later write of a split index copies them into its own part
        again (thousands of entries at 20,000 files, read and written by every step). Once a later
        second has begun, a refresh makes them clean and a new split leaves the own part nearly
        empty. Tried at most once a second; it also folds in files a long run changed, as git's
        own ``splitIndex.maxPercentChange`` would.
        """
        if int(time.time()) <= self.second:
            return
        try:
            if index.stat().st_size <= self.limit:
                return
        except OSError:
            return
        self.second = int(time.time())
        git.run("update-index", "-q", "--refresh", check=False)  # stat data only: no entry's object changes
        git.run("update-index", "--split-index")  # again: the own part goes into a new shared one
