"""A step's tree made from the last one and the files the step changed, without reading the index.

Staging into an index and writing its tree make git read the whole index twice a step (at 20,000
files, 1.6 MB each time, whatever the step changed). A tree can instead be made from the one
before: hash the changed files, then write again only the trees on their way to the top. Three git
batch commands kept for the run do it (``hash-object``, ``cat-file``, ``mktree``), so a step starts
no process for it, and its cost is what it changed; a fourth (``diff-tree``) compares it with the last
commit, and a fifth (``hash-object -t commit``) writes its commit.

It does the plain case only: regular files written or deleted, where no directory and file trade
places and nothing can make git convert what it stores (line endings, attributes, a file system
that ignores modes or case). Anything else is answered with None, and the caller stages through
the index as before, which is git's own answer in every case.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import stat
import tempfile
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

from loope.workspace.comparison import Comparison, comparison
from loope.workspace.git import COMPARE, NO_INDEX, Git, GitError
from loope.workspace.refmove import identity

_Entries = dict[bytes, tuple[bytes, bytes]]
"""A tree's entries: name -> (mode, object id in hex)."""

_TREE, _GITLINK = b"40000", b"160000"
_HASH_CHUNK = 512
"""Paths sent to ``hash-object`` before its answers are read: theirs (41 bytes each) stay well within a pipe."""
_CACHED_ENTRIES = 50_000
"""Tree entries kept in memory at most (the trees a step read or wrote, the least recently used let go first)."""
_CONVERTING = ("core.autocrlf", "core.eol", "core.attributesfile", "core.ignorecase", "core.precomposeunicode")
_FALSE = ("false", "no", "off", "0")


class _Batch:
    """One git batch command: requests in, answers out, until it is closed."""

    def __init__(self, git: Git, *args: str, env: dict[str, str] | None = None) -> None:
        self._name = args[0]
        self._err: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - kept open as long as the command runs
        self._proc = git.batch(*args, stderr=self._err, env=env)
        assert self._proc.stdin is not None
        assert isinstance(self._proc.stdout, io.BufferedReader)
        self._in, self._out = self._proc.stdin, self._proc.stdout

    def send(self, data: bytes) -> None:
        try:
            self._in.write(data)
            self._in.flush()
        except OSError:
            raise self._failed() from None

    def line(self) -> bytes:
        answer = self._out.readline()
        if not answer.endswith(b"\n"):
            raise self._failed()
        return answer[:-1]

    def until(self, end: bytes) -> bytes:
        """What it prints up to and with ``end``."""
        data = bytearray()
        while not data.endswith(end):
            chunk = self._out.read1(1 << 16)
            if not chunk:
                raise self._failed()
            data += chunk
        return bytes(data)

    def read(self, size: int) -> bytes:
        data = self._out.read(size)
        if len(data) != size:
            raise self._failed()
        return data

    def _failed(self) -> GitError:
        self.close(keep_errors=True)
        self._err.seek(0)
        said = self._err.read().decode("utf-8", "replace").strip().splitlines()
        self._err.close()
        return GitError(f"git {self._name}: {said[-1] if said else 'ended without an answer'}")

    def close(self, *, keep_errors: bool = False) -> None:
        for pipe in (self._in, self._out):
            with contextlib.suppress(OSError):  # it ended first: nothing left to say to it
                pipe.close()
        try:
            self._proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - a stuck batch command is killed, whatever kept it
            self._proc.kill()
            self._proc.wait()
        if not keep_errors:
            self._err.close()


class TreeWriter:
    """Makes the tree of a work tree whose changes since a known tree are named, asking git only about those."""

    def __init__(self, git: Git) -> None:
        self.git = git
        self._batches: dict[tuple[str, ...], _Batch] = {}
        self._trees: OrderedDict[str, _Entries] = OrderedDict()
        self._entries = 0
        """How many entries ``_trees`` holds."""
        self._plain: bool | None = None
        self._failures = 0
        self._top: tuple[int, int] | None = None
        """The work tree the batch commands run in (device, inode): they read paths from there."""
        self._configured: tuple[bool, bool] | None = None
        """What the repository's config allows: trees made here (no conversion), commits (no other encoding)."""

    def plain(self, tracked: Iterable[str]) -> bool:
        """Whether git stores every file as it is here: no conversion configured, no ``.gitattributes`` tracked.

        Asked of git once; a ``.gitattributes`` a step writes later ends it too (``tree_with``).
        """
        if self._plain is None:
            self._plain = self._config()[0] and not any(_attributes(p) for p in tracked)
        return self._plain

    def _config(self) -> tuple[bool, bool]:
        """(trees, commits): whether the config lets trees and commits be made here; asked of git once."""
        if self._configured is None:
            keys = r"core\.(autocrlf|eol|attributesfile|ignorecase|precomposeunicode|filemode)|i18n\.commitencoding"
            found = self.git.run("config", "-z", "--get-regexp", f"^({keys})$", check=False).text
            settings = [
                (k.lower(), v.strip().lower()) for k, _, v in (r.partition("\n") for r in found.split("\0") if r)
            ]
            # Another encoding: commit-tree writes an encoding header.
            commits = all(v in ("utf-8", "utf8") for k, v in settings if k == "i18n.commitencoding")
            self._configured = (self._no_conversion(settings), commits)
        return self._configured

    def _no_conversion(self, settings: list[tuple[str, str]]) -> bool:
        for key, value in settings:
            if key == "core.filemode":
                if value in _FALSE:
                    return False  # git keeps each file's old mode: only the index knows it
            elif key in _CONVERTING and (key == "core.attributesfile" or value not in _FALSE):
                return False
        home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        common = Path(self.git.out("rev-parse", "--path-format=absolute", "--git-common-dir"))
        places = (Path(home) / "git" / "attributes", common / "info" / "attributes", Path("/etc/gitattributes"))
        return not any(place.exists() for place in places)

    def tree_with(self, base: str, paths: list[str]) -> str | None:
        """The tree ``base`` with each of ``paths`` as it is on disk now (a missing one removed), or None.

        None: a case only the index can tell (see the module's docstring), or a batch command failed.
        """
        if self._plain is not True or self._failures > 2:
            return None
        if any(_attributes(p) for p in paths):
            self._plain = False
            return None
        try:
            self._same_top()
            changes = self._on_disk(paths)
            if changes is None:
                return None
            return self._build(base, changes)
        except (GitError, OSError):
            self._failures += 1
            self.close()
            return None

    def _on_disk(self, paths: list[str]) -> dict[bytes, tuple[bytes, bytes] | None] | None:
        """Each path's new entry (None: gone), its file hashed into the object store; None if one is not plain."""
        top = self.git.work_tree
        changes: dict[bytes, tuple[bytes, bytes] | None] = {}
        files: list[tuple[bytes, bytes]] = []
        for path in paths:
            name = os.fsencode(path)
            if b"\n" in name or name.startswith(b'"'):
                return None  # hash-object reads one path a line and unquotes a quoted one
            try:
                info = os.lstat(top / path)
            except (FileNotFoundError, NotADirectoryError):  # gone (a directory on its way may be a file now)
                changes[name] = None
                continue
            if not stat.S_ISREG(info.st_mode):
                return None  # a link (git stores its target), or anything that is not a file
            files.append((name, b"100755" if info.st_mode & stat.S_IXUSR else b"100644"))
        hasher = self._batch("hash-object", "-w", "--stdin-paths")
        for start in range(0, len(files), _HASH_CHUNK):
            chunk = files[start : start + _HASH_CHUNK]
            hasher.send(b"".join(name + b"\n" for name, _ in chunk))
            for name, mode in chunk:
                changes[name] = (mode, hasher.line())
        return changes

    def _build(self, base: str, changes: dict[bytes, tuple[bytes, bytes] | None]) -> str | None:
        """``base`` with ``changes``: each directory on the way to one is read, changed, and written again."""
        dirs: dict[bytes, _Entries] = {b"": dict(self._read(base))}
        was: dict[bytes, str] = {b"": base}
        for path, entry in changes.items():
            *parents, name = path.split(b"/")
            here, absent = b"", False
            for part in parents:
                child = self._enter(dirs, was, here, part, make=entry is not None)
                if child is None:
                    return None  # a file (or a submodule) stands where the path needs a directory
                absent = not child
                if absent:
                    break  # nothing to remove below a directory that is not there
                here = child
            if absent:
                continue
            old = dirs[here].get(name)
            if old is not None and old[0] in (_TREE, _GITLINK):
                return None  # a file where a directory (or a submodule) was: the index decides
            if entry is None:
                dirs[here].pop(name, None)
            else:
                dirs[here][name] = entry
        return self._write_all(dirs, was)

    def _enter(
        self, dirs: dict[bytes, _Entries], was: dict[bytes, str], here: bytes, part: bytes, *, make: bool
    ) -> bytes | None:
        """Directory ``part`` of ``here``, read into ``dirs``; b"" where it is absent (and not ``make``), None where
        a file is."""
        child = here + b"/" + part if here else part
        if child in dirs:
            return child
        found = dirs[here].get(part)
        if found is None:
            if not make:
                return b""
            dirs[child] = {}
        elif found[0] == _TREE:
            was[child] = found[1].decode()
            dirs[child] = dict(self._read(was[child]))
        else:
            return None
        return child

    def _write_all(self, dirs: dict[bytes, _Entries], was: dict[bytes, str]) -> str:
        """Write each directory of ``dirs`` that changed, the deepest first; the top one's tree."""
        top = ""
        for directory in sorted(dirs, key=lambda d: -(d.count(b"/") + 1) if d else 0):
            entries, before = dirs[directory], was.get(directory)
            sha = before if before is not None and self._trees.get(before) == entries else self._write(entries)
            if not directory:
                top = sha
                break
            parent, _, name = directory.rpartition(b"/")
            if entries:
                dirs[parent][name] = (_TREE, sha.encode())
            else:
                dirs[parent].pop(name, None)  # git keeps no empty directory
        return top

    def _read(self, sha: str) -> _Entries:
        entries = self._trees.get(sha)
        if entries is not None:
            self._trees.move_to_end(sha)
            return entries
        reader = self._batch("cat-file", "--batch")
        reader.send(sha.encode() + b"\n")
        header = reader.line().split()
        if len(header) != 3 or header[1] != b"tree":
            raise GitError(f"git cat-file: {sha} is not a tree")
        data = reader.read(int(header[2]) + 1)[:-1]
        entries = {}
        at = 0
        while at < len(data):
            space = data.index(b" ", at)
            nul = data.index(b"\0", space)
            entries[data[space + 1 : nul]] = (data[at:space], data[nul + 1 : nul + 21].hex().encode())
            at = nul + 21
        return self._keep(sha, entries)

    def _write(self, entries: _Entries) -> str:
        writer = self._batch("mktree", "-z", "--missing", "--batch")
        kinds = {_TREE: b"tree", _GITLINK: b"commit"}
        listing = b"".join(
            b"%s %s %s\t%s\0" % (mode, kinds.get(mode, b"blob"), sha, name) for name, (mode, sha) in entries.items()
        )
        writer.send(listing + b"\0")
        sha = writer.line().decode()
        self._keep(sha, dict(entries))
        return sha

    def _keep(self, sha: str, entries: _Entries) -> _Entries:
        if sha not in self._trees:
            self._entries += len(entries)
        self._trees[sha] = entries
        while self._entries > _CACHED_ENTRIES and len(self._trees) > 1:
            self._entries -= len(self._trees.popitem(last=False)[1])
        return entries

    def compare(self, old: str, new: str) -> Comparison | None:
        """What ``Git.compare(old, new)`` says, from a ``diff-tree --stdin`` kept for the run; None where it cannot
        say (a conversion may apply, see ``plain``).

        Each request ends with a line diff-tree does not read as trees and prints back as it is: a random one,
        that no file's patch can hold to end the answer early.
        """
        if self._plain is not True or self._failures > 2:
            return None
        end = b"#loope-%s\n" % secrets.token_hex(16).encode()
        try:
            self._same_top()
            differ = self._batch(COMPARE[0], "--stdin", *COMPARE[1:], env=NO_INDEX)
            differ.send(b"%s %s\n%s" % (old.encode(), new.encode(), end))
            answer = differ.until(end)[: -len(end)]
        except (GitError, OSError):
            self._failures += 1
            self.close()
            return None
        if not answer:
            return Comparison([], b"")  # the same tree: nothing printed
        header, _, raw = answer.partition(b"\n")
        if header != b"%s %s" % (old.encode(), new.encode()):
            self._failures += 1
            self.close()
            return None
        return comparison(raw)

    def commits(self, env: Mapping[str, str]) -> bool:
        """Whether ``commit`` can write a commit with ``env``'s identity."""
        return self._config()[1] and self._failures <= 2 and None not in (identity(env, "AUTHOR"), identity(env))

    def commit(self, tree: str, parent: str, message: str, env: Mapping[str, str]) -> str | None:
        """The commit ``git commit-tree TREE -p PARENT -m MESSAGE`` would write now with ``env``, written by a
        ``hash-object -t commit`` kept for the run (which checks it as git checks a commit); None where only
        commit-tree can say."""
        now = int(time.time())
        author, committer = identity(env, "AUTHOR", now), identity(env, "COMMITTER", now)
        if not self.commits(env) or author is None or committer is None or "\0" in message:
            return None
        body = f"tree {tree}\nparent {parent}\nauthor {author}\ncommitter {committer}\n\n{message}"
        try:
            data = (body if body.endswith("\n") else body + "\n").encode("utf-8")
            fd, name = tempfile.mkstemp(prefix="loope-commit-")
        except (UnicodeError, OSError):
            return None
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            self._same_top()
            writer = self._batch("hash-object", "-t", "commit", "-w", "--no-filters", "--stdin-paths")
            writer.send(os.fsencode(name) + b"\n")
            return writer.line().decode()
        except (GitError, OSError):
            self._failures += 1
            self.close()
            return None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(name)

    def _same_top(self) -> None:
        """Start the batch commands again where the work tree's directory is another one than they run in
        (moved away and made anew): a path is hashed from where loope looked at it."""
        info = os.stat(self.git.work_tree)
        if self._batches and self._top != (info.st_dev, info.st_ino):
            self.close()
        self._top = (info.st_dev, info.st_ino)

    def _batch(self, *args: str, env: dict[str, str] | None = None) -> _Batch:
        found = self._batches.get(args)
        if found is None:
            found = self._batches[args] = _Batch(self.git, *args, env=env)
        return found

    def close(self) -> None:
        """End the batch commands (they start again when next needed)."""
        batches, self._batches = self._batches, {}
        for batch in batches.values():
            batch.close()


def _attributes(path: str) -> bool:
    return path == ".gitattributes" or path.endswith("/.gitattributes")
