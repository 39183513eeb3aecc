"""How an overlay run's own index begins: a split copy of its snapshot's index, kept beside the snapshot.

A run stages into an index of its own, kept split (``split_index.py``), and needs the list of its
files. Both depend on the snapshot alone, which never changes once made, so they are asked of git
(``update-index --split-index``: about 60 ms at 20,000 files, writing 1.6 MB; ``ls-files``: about
20 ms) once, kept in the layer's directory (hidden from every step, as the layer is), and copied by
every later run over it. ``begin`` runs before the store is hidden, on the thread that captures the
user's state where the run has one (``overlay.capture_early``). A kept answer that is missing or
damaged is asked of git again.

git smudges the stat data of files written in the same second as the index it reads ("racily
clean"): a split made in the second the snapshot was would make every later run's ``git status``
read those files. Such a split serves its own run only.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path
from typing import NamedTuple

from loope.workspace.git import Git

_TRACKED = "tracked"
"""``ls-files -z --full-name`` of the snapshot's index."""
_SPLIT = "split-index"
"""The split copy's shared part's file name on its first line, then its own part."""
_SHARED = "sharedindex."
_INDEX = "index"
"""The snapshot's index (its stat data matches the merged view)."""


class Begun(NamedTuple):
    """What a run's own index begins from."""

    tracked: frozenset[str]
    """Every file the snapshot's index holds, from the top of the tree."""
    shared_name: str
    shared: bytes
    """The split copy's shared part (in the run's git dir under ``shared_name``)."""
    own: bytes
    """The split copy itself: an index naming its shared part."""

    def place(self, git_dir: Path) -> None:
        """Make the split copy ``git_dir``'s index."""
        (git_dir / self.shared_name).write_bytes(self.shared)
        (git_dir / _INDEX).write_bytes(self.own)


def begin(layer: Path) -> Begun:
    """What a run over the snapshot in ``layer`` (its directory) begins its own index from."""
    index = layer / _INDEX
    listing, split = _read(layer / _TRACKED), _read(layer / _SPLIT)
    tracked = _listed(listing, index) if listing is not None else None
    name, _, own = (split or b"").partition(b"\n")
    shared = _read(layer / name.decode()) if _shared_name(name) and own[:4] == b"DIRC" else None
    if tracked is not None and shared is not None:
        return Begun(tracked, name.decode(), shared, own)
    scratch = layer / f".begin-{secrets.token_hex(6)}"
    try:
        made, read_as_of = _ask_git(layer, scratch, tracked)
        if tracked is None:
            _publish(layer / _TRACKED, b"".join(os.fsencode(p) + b"\0" for p in sorted(made.tracked)))
        if shared is None and read_as_of > int(index.stat().st_mtime):
            _publish(layer / made.shared_name, made.shared)  # first: the own part names it
            _publish(layer / _SPLIT, made.shared_name.encode() + b"\n" + made.own)
        return made
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _ask_git(layer: Path, scratch: Path, tracked: frozenset[str] | None) -> tuple[Begun, int]:
    """Split a copy of the snapshot's index in ``scratch`` (a git dir of its own for its shared part), listing
    its files unless ``tracked`` was kept; and the second git read the copy as of (its stat data is clean
    for files written before it)."""
    for sub in ("objects", "refs"):
        (scratch / sub).mkdir(parents=True)
    (scratch / "HEAD").write_text("ref: refs/heads/main\n")
    copy = scratch / _INDEX
    shutil.copyfile(layer / _INDEX, copy)
    read_as_of = int(copy.stat().st_mtime)
    git = Git(layer / "tree", scratch, env={"GIT_INDEX_FILE": str(copy)})
    if tracked is None:  # not kept yet
        listing = git.run("ls-files", "-z", "--full-name").stdout or b""
        tracked = frozenset(listing.decode("utf-8", "surrogateescape").split("\0")) - {""}  # as os.fsdecode does
    git.run("update-index", "--split-index")
    (shared,) = scratch.glob(f"{_SHARED}*")
    return Begun(tracked, shared.name, shared.read_bytes(), copy.read_bytes()), read_as_of


def _listed(listing: bytes, index: Path) -> frozenset[str] | None:
    """The kept list of files, if it holds as many as the snapshot's index."""
    paths = frozenset(listing.decode("utf-8", "surrogateescape").split("\0")) - {""}
    try:
        with index.open("rb") as handle:
            header = handle.read(12)  # "DIRC", the version, the number of entries
    except OSError:
        return None
    return paths if header[:4] == b"DIRC" and int.from_bytes(header[8:12], "big") == len(paths) else None


def _shared_name(name: bytes) -> bool:
    return name.startswith(_SHARED.encode()) and name[len(_SHARED) :].isalnum() and name.isascii()


def _read(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _publish(path: Path, data: bytes) -> None:
    """Keep ``data`` as ``path`` (a temporary name, then a rename); without room, a later run asks git again."""
    tmp = path.with_name(f".{path.name}-{secrets.token_hex(4)}")
    try:
        tmp.write_bytes(data)
        os.rename(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
