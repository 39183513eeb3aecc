"""Candidate workspaces: cheap forks of a run's kept state, one per candidate of an iteration.

Each fork is a git worktree of the run's own repository (the user's for a worktree run, the
shadow git dir for copy and in-place runs) checked out detached at the run's head, under
``<run dir>/candidates/c<i>``. It shares the run's objects, so forking costs a checkout and
adopting the winner costs what its change touches. Each fork has its own loope index and the
run's frozen ignore rules, so a candidate's changes are seen exactly as the run's own would be.

What a candidate commits goes to an object store of its own (``c<i>.objects``, borrowing the run's
objects): while the round runs, no other candidate's step finds it in the shared store. Its own
steps see it through ``c<i>.info``, shown over the repository's ``objects/info`` in their sandbox
(its ``alternates`` names the private store); ``publish`` moves it into the run's store once the
round is decided.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from loope.enums import WorkspaceMode
from loope.workspace import overlay, safefs
from loope.workspace.changes import ChangeTracker
from loope.workspace.git import Git
from loope.workspace.ignores import FrozenIgnores
from loope.workspace.loopedir import ensure_loope_dir
from loope.workspace.workspace import IGNORES_FILE, Workspace

CANDIDATES_DIR = "candidates"
"""Where a run's candidate workspaces live while an iteration runs (inside the run dir)."""


def _admin(run: Workspace) -> Git:
    """Git on the run's repository without loope's own index (worktree commands keep their own)."""
    return Git(run.git.work_tree, run.git_dir, env={"GIT_CEILING_DIRECTORIES": str(run.git.work_tree.parent)})


def fork(run: Workspace, run_dir: Path, index: int) -> Workspace:
    """A new workspace for candidate ``index`` at ``run.head``, seeing what ``run`` sees."""
    root = run_dir / CANDIDATES_DIR
    run.sync_index()  # the run's index and its agent's copy are whole before they are copied
    if run.mode == WorkspaceMode.OVERLAY:  # the same snapshot, a copy of the run's upper layer
        tree, git_dir = overlay.fork(run.git.work_tree.parent, root / f"c{index}", _admin(run), run.head)
    else:
        tree = root / f"c{index}"
        _admin(run).run("worktree", "add", "-q", "-f", "--detach", str(tree), run.head)
        git_dir = Path(Git(tree).out("rev-parse", "--absolute-git-dir"))
    objects = _private_objects(root, index, git_dir)
    git = Git(tree, git_dir, env={"GIT_CEILING_DIRECTORIES": str(tree.resolve().parent), **objects})
    sub = run.path.resolve().relative_to(run.git.work_tree.resolve())
    path = tree / sub
    ensure_loope_dir(path)
    mirror = Path(git.out("rev-parse", "--path-format=absolute", "--git-path", "index"))
    own_index = (root / f"c{index}.index").absolute()
    shutil.copyfile(mirror, own_index)
    indexed = git.with_env(GIT_INDEX_FILE=str(own_index))
    ws = Workspace(run.mode, path, indexed, run.base, run.head, git_dir=git_dir, run_dir=run_dir, mirror=mirror)
    ignores = FrozenIgnores.load(run_dir / IGNORES_FILE)
    ws.tracker = ChangeTracker(indexed, ignores)
    ws.clean = True
    return ws


def objects_of(run_dir: Path, index: int) -> tuple[Path, Path]:
    """Candidate ``index``'s own object store, and the ``objects/info`` its steps see (naming that store)."""
    root = run_dir / CANDIDATES_DIR
    return root / f"c{index}.objects", root / f"c{index}.info"


def _private_objects(root: Path, index: int, git_dir: Path) -> dict[str, str]:
    """Make candidate ``index``'s object store; the variables that make loope's git write there."""
    objects, info = objects_of(root.parent, index)
    shared = Path(os.path.realpath(common_dir(git_dir))) / "objects"
    objects.mkdir()
    info.mkdir()
    try:  # the repository's own alternates (an overlay's shadow git borrows the user's objects)
        lines = (shared / "info" / "alternates").read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    borrowed = [str((shared / line).resolve()) for line in lines if line.strip() and not line.startswith("#")]
    (info / "alternates").write_text("\n".join([*borrowed, str(objects.resolve())]) + "\n", encoding="utf-8")
    return {"GIT_OBJECT_DIRECTORY": str(objects.resolve()), "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(shared)}


def common_dir(git_dir: Path) -> Path:
    """The repository a worktree's git dir belongs to (its ``commondir`` names it, relative to it)."""
    try:
        named = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir
    return git_dir / named


def publish(run: Workspace, run_dir: Path, index: int) -> None:
    """Move what candidate ``index`` committed into the run's object store (before a ref or the run names it)."""
    source = objects_of(run_dir, index)[0]
    target = Path(run.git.out("rev-parse", "--path-format=absolute", "--git-path", "objects"))
    for top, _dirs, files in os.walk(source):
        for name in files:
            path = Path(top, name)
            dest = target / path.relative_to(source)
            if dest.exists():
                continue
            dest.parent.mkdir(exist_ok=True)
            try:
                os.link(path, dest)
            except OSError:  # another file system: a copy (an object's name is its content)
                shutil.copy2(path, dest)


def copy_state(source: Path, target: Path) -> None:
    """Give a workspace the state file another one holds (the candidate's own memory, or the winner's)."""
    try:
        data = source.read_bytes()
    except OSError:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def sweep(run_dir: Path, count: int) -> list[str]:
    """Remove what a step put beside the candidates' trees (a ``conftest.py`` above them, say); a line each.

    The directory is loope's: it holds ``c<i>`` trees and their ``c<i>.index``, ``.objects`` and ``.info``,
    nothing else.
    Nothing is followed: a link there is removed as a link.
    """
    root = run_dir / CANDIDATES_DIR
    ours = {f"c{i}{part}" for i in range(1, count + 1) for part in ("", ".index", ".objects", ".info")}
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    found = []
    for name in names:
        if name not in ours:
            safefs.remove(root, name)
            found.append(f"{CANDIDATES_DIR}/{name} beside the candidates' trees is loope's to write; it was removed")
    return found


def remove(run: Workspace, run_dir: Path) -> None:
    """Remove every candidate workspace of the run (the iteration's, or ones a dead runner left)."""
    root = run_dir / CANDIDATES_DIR
    if not root.exists():
        return
    shutil.rmtree(root, ignore_errors=True)
    _admin(run).run("worktree", "prune", check=False)
