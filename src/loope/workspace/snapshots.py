"""Read-only snapshots of a project's state: the lower layers of overlay workspaces.

The committed tree is checked out once, from git objects, into ``.loope/snapshots/<tree>/``; when
the user has uncommitted or untracked files, a thin layer above it holds only those (deleted files
as whiteouts). Both are named by tree hashes, so every run, candidate and fleet task that starts
from the same state shares them, and a removed one can be made again from the objects.

Nothing here writes to the user's repository: working out the state stages into a copy of the
user's index, and the objects git must write (blobs of untracked files, trees of uncommitted
states) go to ``.loope/snapshots/git``, which borrows the user's objects.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from loope.record import record
from loope.workspace.git import Git

SNAPSHOTS_DIR = "snapshots"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_TREE_DIR = "tree"
_INDEX = "index"
_CHECKOUT_WORKERS = min(os.cpu_count() or 1, 8)


@record(frozen=True)
class State:
    """What the user's tree holds now, as git objects in the snapshot store."""

    head: str | None
    """The user's HEAD commit (None in a repository with no commit yet)."""
    head_tree: str
    tree: str
    """Everything the user sees: committed, uncommitted and untracked, non-ignored files."""

    @property
    def layers(self) -> list[str]:
        """The names of its layers in the store, topmost first."""
        return [self.head_tree] if self.tree == self.head_tree else [f"{self.head_tree}-{self.tree}", self.head_tree]


class Store:
    """A project's snapshots (``<workdir>/.loope/snapshots``)."""

    def __init__(self, root: Path) -> None:
        root = root.absolute()  # git runs in other directories
        self.git_dir = root / "git"
        self.root = root / "layers"
        """The layers: hidden from every process a run starts (their objects in ``git_dir`` are not)."""

    @contextlib.contextmanager
    def lock(self, *, shared: bool) -> Iterator[None]:
        """Making and mounting layers (shared) against removing them (exclusive)."""

        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.git_dir.parent / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def objects(self) -> Path:
        return self.git_dir / "objects"

    def _ensure_git(self, user_objects: Path) -> None:
        alternates = self.objects() / "info" / "alternates"
        if alternates.exists():
            return
        (self.objects() / "pack").mkdir(parents=True, exist_ok=True)
        (self.objects() / "info").mkdir(exist_ok=True)
        (self.git_dir / "refs").mkdir(exist_ok=True)
        (self.git_dir / "HEAD").write_text("ref: refs/heads/main\n")
        tmp = alternates.with_name(f"alternates.{secrets.token_hex(4)}")
        tmp.write_text(f"{user_objects}\n")
        os.replace(tmp, alternates)

    def _git(self, work_tree: Path, **env: str) -> Git:
        return Git(work_tree, self.git_dir, env=env)

    # -- the user's state ---------------------------------------------------------------------

    def state(self, top: Path) -> State:
        """The user's state as a tree, staged in a private copy of their index (theirs stays as it was)."""
        user = Git(top)
        # One git process for what a start needs to know first (each costs milliseconds on a loaded machine).
        # --revs-only: in a repository with no commit yet, HEAD is left out rather than an error.
        lines = user.out(
            "rev-parse", "--revs-only", "--path-format=absolute", "--git-path", "objects", "--git-path", "index",
            "HEAD^{commit}", "HEAD^{tree}",
        ).split("\n")  # fmt: skip
        user_objects, real_index = Path(lines[0]), Path(lines[1])
        head, head_tree = (lines[2], lines[3]) if len(lines) == 4 else (None, EMPTY_TREE)
        self._ensure_git(user_objects)
        self.root.mkdir(parents=True, exist_ok=True)
        index = self.root / f".state-index-{secrets.token_hex(6)}"
        if real_index.exists():
            shutil.copyfile(real_index, index)
        private = Git(
            top,
            env={
                "GIT_INDEX_FILE": str(index),
                "GIT_OBJECT_DIRECTORY": str(self.objects()),
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(user_objects),
            },
        )
        try:
            private.add_all()
            tree = private.out("write-tree")
        finally:
            index.unlink(missing_ok=True)
            Path(f"{index}.lock").unlink(missing_ok=True)
        return State(head, head_tree, tree)

    # -- materializing ------------------------------------------------------------------------

    def snapshot(self, state: State) -> Path:
        """Make the layers of ``state`` if they do not exist yet; the index of its merged view."""
        base = self._base(state.head_tree)
        if state.tree == state.head_tree:
            return base / _INDEX
        return self._thin(state.head_tree, state.tree) / _INDEX

    def layer(self, name: str) -> Path:
        return self.root / name / _TREE_DIR

    def _base(self, tree: str) -> Path:
        """The committed tree, checked out from git objects (with an index that knows every file's stat)."""
        final = self.root / tree
        if (final / _INDEX).exists():
            return final
        tmp = self._scratch()
        git = self._git(tmp / _TREE_DIR, GIT_INDEX_FILE=str(tmp / _INDEX))
        git.run("read-tree", tree)
        # Files written by parallel workers: file creation is the whole cost, and it waits on the kernel more
        # than on one core (measured here, 20,000 files: 2 workers faster than 1 in each of 6 interleaved pairs).
        git.run("-c", f"checkout.workers={_CHECKOUT_WORKERS}", "checkout-index", "-a", "-u", "-q")
        return self._publish(tmp, final)

    def _thin(self, base_tree: str, tree: str) -> Path:
        """The files that differ from ``base_tree`` in ``tree``; deleted ones as whiteouts."""
        final = self.root / f"{base_tree}-{tree}"
        if (final / _INDEX).exists():
            return final
        tmp = self._scratch()
        top = tmp / _TREE_DIR
        git = self._git(top, GIT_INDEX_FILE=str(tmp / _INDEX))
        raw = git.run("diff-tree", "-r", "-z", "--no-renames", "--raw", base_tree, tree).stdout or b""
        fields = raw.split(b"\0")
        changed: list[tuple[str, str, str]] = []  # (mode, sha, path); mode "0" is a deletion
        for meta, name in zip(fields[0::2], fields[1::2], strict=False):
            if meta.startswith(b":"):
                _old_mode, new_mode, _old, new_sha, _status = meta[1:].decode().split()
                changed.append((new_mode if new_mode != "000000" else "0", new_sha, os.fsdecode(name)))
        blobs = git.blobs([sha for mode, sha, _ in changed if mode not in ("0", "160000")])
        for mode, sha, path in sorted(changed, key=lambda c: c[0] == "0"):  # files first, then whiteouts
            _place(top, path, mode, blobs.get(sha, b""))
        shutil.copyfile(self.root / base_tree / _INDEX, tmp / _INDEX)
        info = b"".join(_index_line(mode, sha, path) for mode, sha, path in changed)
        git.run("update-index", "-z", "--index-info", stdin=info)
        return self._publish(tmp, final)

    def _scratch(self) -> Path:
        tmp = self.root / f".tmp-{secrets.token_hex(6)}"
        (tmp / _TREE_DIR).mkdir(parents=True)
        return tmp

    def _publish(self, tmp: Path, final: Path) -> Path:
        """Move a finished layer into place; another run that made the same one first wins."""
        try:
            os.rename(tmp, final)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not (final / _INDEX).exists():
                raise
        return final

    # -- removing -----------------------------------------------------------------------------

    def user_objects(self) -> Path:
        """The user's object directory, as the store borrows it."""
        return Path((self.objects() / "info" / "alternates").read_text().strip())

    def names(self) -> list[str]:
        """Every layer in the store."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and len(p.name) >= 40 and p.name[0] != ".")

    def remove(self, name: str) -> None:
        shutil.rmtree(self.root / name, ignore_errors=True)


def _index_line(mode: str, sha: str, path: str) -> bytes:
    """One ``update-index --index-info`` record; mode 0 removes the entry."""
    return f"{mode} {sha if mode != '0' else '0' * 40}\t".encode() + os.fsencode(path) + b"\0"


def _place(top: Path, path: str, mode: str, data: bytes) -> None:
    """Write one entry of a thin layer: a file, a link, a submodule's directory or a whiteout."""
    target = top / path
    parent = target.parent
    if mode == "0":
        for up in (parent, *parent.parents):  # a file above it already hides it
            if up == top:
                break
            if up.exists() and not up.is_dir():
                return
    parent.mkdir(parents=True, exist_ok=True)
    if mode == "0":
        with contextlib.suppress(FileExistsError):
            os.mknod(target, stat.S_IFCHR | 0o000, 0)  # overlayfs' whiteout: a 0/0 character device
    elif mode == "120000":
        os.symlink(os.fsdecode(data), target)
    elif mode == "160000":
        target.mkdir(exist_ok=True)
    else:
        target.write_bytes(data)
        if mode == "100755":
            target.chmod(0o755)
