"""A thin git client over the one subprocess helper.

Commits made here never run the user's hooks or signing, and carry loope's identity, so they work
in any repository and on a machine with no git configuration. No git command loope runs executes a
program a repository configures (an agent can write a repository's config): hooks, fsmonitor,
clean/smudge/process filters, textconv and external diff tools, pagers, editors, credential
helpers and ssh commands are all switched off in one place, ``safe_command`` and ``safe_env``.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from loope.errors import LoopeError
from loope.proc import ProcResult, Started, run_process
from loope.spawn import spawn_batch
from loope.workspace.comparison import Comparison, comparison
from loope.workspace.git_drivers import runs_no_driver
from loope.workspace.refmove import move_head

if TYPE_CHECKING:
    import subprocess


_IDENTITY = {
    "GIT_AUTHOR_NAME": "loope",
    "GIT_AUTHOR_EMAIL": "loope@localhost",
    "GIT_COMMITTER_NAME": "loope",
    "GIT_COMMITTER_EMAIL": "loope@localhost",
}
_SAFE_CONFIG = {
    "core.hooksPath": "/dev/null",
    "core.fsmonitor": "false",
    "core.pager": "cat",
    "core.editor": "false",
    "sequence.editor": "false",
    "core.askPass": "",
    "core.sshCommand": "ssh",
    "credential.helper": "",
    "commit.gpgsign": "false",
    "tag.gpgsign": "false",
    "protocol.ext.allow": "never",
    "core.quotepath": "off",
    "gc.auto": "0",  # no packing of refs and objects in the middle of a run (nor its hook)
    "maintenance.auto": "false",
}
_CONFIG = tuple(arg for key, value in _SAFE_CONFIG.items() for arg in ("-c", f"{key}={value}"))
_TREE_DIFF = ("-r", "--no-ext-diff", "--no-textconv", "--no-renames")  # never an external diff tool or textconv
# diff-tree reads the whole index though it compares two trees (1.6 MB at 20,000 files); a missing one
# costs nothing. No one can create a file in /proc/self, so the path stays missing; attributes still
# come from the work tree's .gitattributes.
NO_INDEX = {"GIT_INDEX_FILE": "/proc/self/loope-no-index"}
COMPARE = ("diff-tree", *_TREE_DIFF, "-z", "--raw", "--numstat", "-p", "--binary", "--full-index")
"""How ``Git.compare`` asks for the files changed and the patch (``trees.TreeWriter.compare`` too)."""
# Per driver name: the settings that would run a program, each set to nothing.
_DRIVER_PROGRAMS = {"filter": ("clean", "smudge", "process"), "diff": ("textconv",)}
# Variables that could make git run something, or point it at another repository or config.
_SCRUBBED_PREFIXES = ("GIT_", "SSH_ASKPASS")


def safe_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for git: no inherited ``GIT_*`` settings, no system config, no pager, no prompts."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith(_SCRUBBED_PREFIXES)}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        PAGER="cat",
        GIT_EDITOR="false",
        GIT_ASKPASS="",
    )
    return env


def safe_command(*args: str, drivers: Sequence[str] = ()) -> list[str]:
    """``git ARGS`` with every program a repository could configure switched off."""
    return [_git_on(os.environ.get("PATH", os.defpath)), *_CONFIG, *drivers, *args]


@functools.lru_cache(maxsize=4)
def _git_on(path: str) -> str:
    """The git program on ``path`` (a PATH value), looked up once rather than by every command loope starts.

    Starting ``git`` by name tries each directory of PATH in turn (eight failed ``execve`` calls before
    /usr/bin on a usual PATH, for each of the four commands an iteration runs). A relative directory is
    passed over: git commands run in the workspace, where the agent could put a program of that name.
    """
    for directory in path.split(os.pathsep):
        candidate = os.path.join(directory, "git")
        if os.path.isabs(directory) and os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return "git"  # none: starting it says that git is not installed


class GitError(LoopeError):
    """A git command failed where it should not have."""


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    sha: str


def blob_sha(data: bytes) -> str:
    """The git object id a file with ``data`` would have."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


class Git:
    """Git commands against one work tree, optionally with a separate git dir (a shadow repository)."""

    def __init__(self, work_tree: Path, git_dir: Path | None = None, *, env: Mapping[str, str] | None = None) -> None:
        self.work_tree = work_tree
        self.git_dir = git_dir
        self._extra = dict(env or {})
        self._env = safe_env()
        self._env.update(_IDENTITY)
        self._env["GIT_LITERAL_PATHSPECS"] = "1"  # paths are file names, never globs
        self._drivers: tuple[str, ...] | None = None
        if git_dir is not None:
            self._env["GIT_DIR"] = str(git_dir)
            self._env["GIT_WORK_TREE"] = str(work_tree)
        self._env.update(env or {})
        self._author: dict[str, str] | None = None

    def refresh_drivers(self) -> None:
        """Read the filter and diff driver names configured now, so none of their programs runs.

        Git has no switch that turns every filter off; naming each configured driver with an
        empty program does. Called once the repository's config is known to be the user's own.
        """
        self._drivers = None

    def _driver_overrides(self, args: Sequence[str]) -> tuple[str, ...]:
        if self._drivers is None and not runs_no_driver(args):
            raw = run_process(
                safe_command("config", "-z", "--name-only", "--get-regexp", r"^(filter|diff)\."),
                cwd=self.work_tree,
                env=self._env,
                capture=True,
            ).text
            overrides: list[str] = []
            for key in sorted({k for k in raw.split("\0") if k.count(".") >= 2}):
                section, name = key.split(".", 1)[0], key.split(".", 1)[1].rsplit(".", 1)[0]
                for program in _DRIVER_PROGRAMS.get(section.lower(), ()):
                    setting = f"{section}.{name}.{program}="
                    if setting not in overrides:
                        overrides += ["-c", setting]
            self._drivers = tuple(overrides)
        return self._drivers or ()

    def with_env(self, **env: str) -> Git:
        """The same repository with more variables (another index file, say)."""
        return Git(self.work_tree, self.git_dir, env={**self._extra, **env})

    @property
    def index_file(self) -> Path | None:
        """The index this client uses when it is not git's default one."""
        value = self._env.get("GIT_INDEX_FILE")
        return Path(value) if value else None

    def index_path(self) -> Path:
        """The absolute path of the index this client's commands use."""
        if self.git_dir is not None and self.git_dir.is_absolute() and self.index_file is None:
            return self.git_dir / "index"  # what `git rev-parse --git-path index` says for a git dir named so
        return Path(self.out("rev-parse", "--path-format=absolute", "--git-path", "index"))

    def run(
        self, *args: str, stdin: bytes | None = None, check: bool = True, env: Mapping[str, str] | None = None
    ) -> ProcResult:
        full_env = {**self._env, **env} if env else self._env
        argv = safe_command(*args, drivers=self._driver_overrides(args))
        result = run_process(argv, cwd=self.work_tree, env=full_env, stdin=stdin, capture=True)
        return checked(args[0], result) if check else result

    def start(self, *args: str, env: Mapping[str, str] | None = None, stdin: bytes | None = None) -> Started:
        """``run``'s command (its output small, its input under ``Started.STDIN_MAX``), started now and finished
        by the caller."""
        full_env = {**self._env, **env} if env else self._env
        argv = safe_command(*args, drivers=self._driver_overrides(args))
        return Started(argv, cwd=self.work_tree, env=full_env, stdin=stdin)

    def batch(self, *args: str, stderr: IO[bytes], env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """A git batch command (``cat-file --batch``, ``mktree --batch``) started to answer many requests."""
        argv = safe_command(*args, drivers=self._driver_overrides(args))
        return spawn_batch(argv, cwd=self.work_tree, env={**self._env, **(env or {})}, stderr=stderr)

    def out(self, *args: str) -> str:
        return self.run(*args).text.strip()

    def rev(self, ref: str) -> str | None:
        result = self.run("rev-parse", "--verify", "-q", f"{ref}^{{commit}}", check=False)
        return result.text.strip() if result.ok else None

    def tree_of(self, ref: str) -> str:
        return self.out("rev-parse", f"{ref}^{{tree}}")

    def add_all(self) -> None:
        self.run("add", "-A", "--", ".")

    def author(self) -> dict[str, str]:
        """The user's git identity (``user.name`` and ``user.email``) as commit variables; loope's when unset."""
        if self._author is None:
            found = self.run("config", "-z", "--get-regexp", r"^user\.(name|email)$", check=False).text
            values = dict(record.partition("\n")[::2] for record in found.split("\0") if record)  # the last one wins
            name, email = values.get("user.name", "").strip(), values.get("user.email", "").strip()
            self._author = {}
            if name and email:
                for role in ("AUTHOR", "COMMITTER"):
                    self._author[f"GIT_{role}_NAME"], self._author[f"GIT_{role}_EMAIL"] = name, email
        return self._author

    def commit_staged(self, message: str, *, allow_empty: bool = False) -> str:
        """Commit the index; the new commit."""
        empty = ["--allow-empty"] if allow_empty else []
        self.run("commit", "-q", "--no-verify", "--allow-empty-message", *empty, "-m", message)
        return self.out("rev-parse", "HEAD")

    def commit_all(self, message: str) -> str:
        """Commit every change in the work tree, even none (a starting point needs a commit)."""
        self.add_all()
        return self.commit_staged(message, allow_empty=True)

    def tree_changes(self, old: str, new: str) -> dict[str, tuple[TreeEntry | None, TreeEntry | None]]:
        """Each path changed from ``old`` to ``new``, with its entry on each side (None where it is absent).

        One ``diff-tree --raw``: the modes and object ids come with the changes, no ``ls-tree`` needed.
        """
        raw = self.run("diff-tree", *_TREE_DIFF, "--raw", "-z", old, new, env=NO_INDEX).stdout or b""
        found: dict[str, tuple[TreeEntry | None, TreeEntry | None]] = {}
        fields = raw.split(b"\0")
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            if not meta.startswith(b":"):
                continue
            old_mode, new_mode, old_sha, new_sha, _status = meta[1:].decode().split()
            found[os.fsdecode(path)] = (_entry(old_mode, old_sha), _entry(new_mode, new_sha))
        return found

    def compare(self, old: str, new: str) -> Comparison:
        """The files changed from ``old`` to ``new`` (commits or trees) and the byte-exact patch, in one git call."""
        return comparison(self.run(*COMPARE, old, new, env=NO_INDEX).stdout or b"")

    def update_index(self, paths: Sequence[str]) -> None:
        """Stage ``paths`` as they are on disk, whatever ignore rules say (a missing one leaves the index).

        ``--replace``: a file that became a directory or a link (or the reverse) replaces what the index held.
        """
        if paths:
            data = b"".join(os.fsencode(p) + b"\0" for p in paths)
            self.run("update-index", "--add", "--remove", "--replace", "-z", "--stdin", stdin=data)

    def drop_from_index(self, paths: Sequence[str]) -> None:
        """Remove ``paths`` from the index whatever is on disk (a path now beyond a symlink, say)."""
        if paths:
            data = b"".join(os.fsencode(p) + b"\0" for p in paths)
            self.run("update-index", "--force-remove", "-z", "--stdin", stdin=data)

    def write_tree(self) -> str:
        return self.out("write-tree")

    def commit_object(self, tree: str, parent: str, message: str) -> Started:
        """The commit object of ``tree`` on top of ``parent``, under way (no ref moves): ``commit_tree`` takes it."""
        return self.start("commit-tree", tree, "-p", parent, "-m", message, env=self.author())

    def commit_env(self) -> dict[str, str]:
        """The environment ``git commit-tree`` runs with: whose commit it is, and when."""
        return {**self._env, **self.author()}

    def commit_tree(
        self, tree: str, parent: str, message: str, *, started: Started | None = None, made: str | None = None
    ) -> str:
        """A commit of ``tree`` on top of ``parent``, and HEAD (its branch) moved there.

        ``started``: its ``commit_object``, begun earlier by the caller (with these very arguments); ``made``:
        the commit itself, written by the caller.
        """
        commit = (
            made or checked("commit-tree", (started or self.commit_object(tree, parent, message)).finish()).text.strip()
        )
        if self.git_dir is None or not move_head(self.git_dir, parent, commit, self._env):
            self.run("update-ref", "HEAD", commit)
        return commit

    def reset_hard(self, commit: str, keep: Path | None = None) -> None:
        """Make the work tree exactly ``commit``: tracked files restored, new files removed.

        ``keep`` is a file of ignore rules: files they match stay (and no ``.gitignore`` counts).
        """
        self.run("reset", "-q", "--hard", commit)
        if keep is None:
            self.run("clean", "-fdq")
            return
        rules = [line for line in keep.read_text(encoding="utf-8", errors="surrogateescape").splitlines() if line]
        self.run("clean", "-fdqx", *(f"--exclude={rule}" for rule in rules))

    def entries(self, ref: str, paths: Sequence[str]) -> dict[str, TreeEntry]:
        """``ls-tree`` entries for ``paths`` at ``ref``."""
        if not paths:
            return {}
        raw = self.run("ls-tree", "-z", "--full-tree", ref, "--", *paths).text
        found: dict[str, TreeEntry] = {}
        for record in raw.split("\0"):
            if not record:
                continue
            meta, _, path = record.partition("\t")
            mode, _kind, sha = meta.split()
            found[path] = TreeEntry(mode, sha)
        return found

    def blob(self, sha: str) -> bytes:
        return self.run("cat-file", "blob", sha).stdout or b""

    def blobs(self, shas: Sequence[str]) -> dict[str, bytes]:
        """The contents of many blobs, from one ``git cat-file --batch``."""
        wanted = list(dict.fromkeys(shas))
        if not wanted:
            return {}
        raw = (
            self.run("cat-file", "--batch", "--buffer", stdin="".join(f"{sha}\n" for sha in wanted).encode()).stdout
            or b""
        )
        found: dict[str, bytes] = {}
        pos = 0
        for sha in wanted:
            header_end = raw.index(b"\n", pos)
            header = raw[pos:header_end].split()
            if len(header) != 3:  # "<sha> missing"
                raise GitError(f"git cat-file: object {sha} is missing")
            size = int(header[2])
            start = header_end + 1
            found[sha] = raw[start : start + size]
            pos = start + size + 1
        return found


def checked(command: str, result: ProcResult) -> ProcResult:
    """``result`` of ``git command``, or the error it failed with."""
    if not result.ok:
        detail = result.stderr_tail.strip().splitlines()
        raise GitError(f"git {command} failed: {detail[-1] if detail else result.describe()}")
    return result


def _entry(mode: str, sha: str) -> TreeEntry | None:
    """A side of a raw diff record: None where the path does not exist (mode 000000)."""
    return None if mode == "000000" else TreeEntry(mode, sha)


def toplevel(path: Path) -> Path | None:
    """The root of the git work tree holding ``path``, or None when it is not in one."""
    result = run_process(safe_command("rev-parse", "--show-toplevel"), cwd=path, env=safe_env(), capture=True)
    return Path(result.text.strip()) if result.ok and result.text.strip() else None
