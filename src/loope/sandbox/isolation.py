"""What a race candidate's steps see of loope's own files: their own, and nothing of another candidate's.

A race's candidates work side by side: their trees under ``<run dir>/candidates``, their step dirs
under ``agents/``, their worktrees' git dirs under the repository's ``worktrees/``, and what they do
in the run's live records (``events.jsonl``, ``run.json``, the store). Read-only is not enough
there: a candidate that reads another's tree, transcript or commit copies its idea. So every step
of a candidate (its implementer, gate, metric, reviewers, an ACP agent's terminal commands) gets an
empty file system over loope's directory (``.loope`` of the workdir) and over ``worktrees/``, with
only its own parts bound back: its tree (by the layout), its git dir, its step dirs, and the run
files that say nothing of the round (the spec, the design contract, the ledger of past rounds).
Whatever it writes into the empty file systems is its own and is gone when it ends.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from loope.record import record


@record(frozen=True)
class Isolation:
    """One candidate's view of the run dir and the git dirs (a part of its steps' sandbox layout)."""

    run_dir: Path
    hide: tuple[Path, ...]
    """Covered by an empty file system: loope's directory, the repository's worktrees admin dir."""
    git: tuple[Path, ...]
    """Bound back read-only: the candidate's own git dir and object store, and the run's shadow git if hidden."""
    run_files: tuple[str, ...]
    """The run dir's files every candidate's steps may read (they change only between rounds)."""
    suffix: str
    """How the candidate's step dirs end (``-c2``)."""
    objects_info: tuple[Path, Path] | None = None
    """(source, target): the candidate's own ``objects/info`` shown over the repository's, so that
    its steps find the objects it committed (kept out of the shared store while the round runs)."""

    @classmethod
    def of(
        cls,
        *,
        run_dir: Path,
        git_dir: Path,
        common_dir: Path,
        candidate: int,
        run_files: Iterable[str],
        objects: tuple[Path, Path] | None = None,
    ) -> Isolation:
        """Candidate ``candidate``'s view; ``git_dir`` is its worktree's git dir, ``common_dir`` the repository's.

        ``objects``: its own object store and the ``objects/info`` dir that names it.
        """
        run_dir, git_dir, common = _real(run_dir), _real(git_dir), _real(common_dir)
        loope_dir = run_dir.parents[1] if run_dir.parent.name == "runs" else run_dir
        git = [git_dir]
        if common.is_relative_to(loope_dir):  # a shadow git dir in the run dir (copy, in-place, overlay)
            git.insert(0, common)
        info = None
        if objects is not None:
            git.append(_real(objects[0]))
            info = (_real(objects[1]), common / "objects" / "info")
        return cls(
            run_dir=run_dir,
            hide=(loope_dir, common / "worktrees"),
            git=tuple(git),
            run_files=tuple(run_files),
            suffix=f"-c{candidate}",
            objects_info=info,
        )

    def shown(self) -> list[Path]:
        """What is bound back read-only, as it is when a step starts (its step dir exists by then)."""
        files = [self.run_dir / name for name in self.run_files]
        try:
            steps = [e for e in os.scandir(self.run_dir / "agents") if e.name.endswith(self.suffix) and e.is_dir()]
        except OSError:
            steps = []
        return [*self.git, *(p for p in files if p.exists()), *(Path(e.path) for e in steps)]


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))
