"""How a run travels between machines: its records and its workspace as one commit on a git remote.

A run's *records commit* holds the run dir (everything but the workspace, transcripts capped at
``STEP_FILE_CAP`` bytes each) plus the agent's state file; its first parent is the workspace's
head, so fetching the one ref brings the code along. Each segment pushes its records to a ref of
its own, ``refs/loope-records/<key>/<seq>.<attempt>``, and the run's branch to ``refs/loope/<key>``:
an attempt that was given up on (a worker presumed dead that still pushes) never overwrites the
state another attempt starts from. Files are read without following links, so an agent cannot
make the transport upload something outside its run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loope.errors import LoopeError
from loope.proc import kill_group
from loope.records.atomic import write_text
from loope.workspace.git import Git, toplevel
from loope.workspace.loopedir import ensure_loope_dir
from loope.workspace.workspace import INDEX_FILE

STEP_FILE_CAP = 4 * 1024 * 1024
"""Bytes kept of each file under ``agents/`` (a transcript past that keeps its first part and says so)."""
# Machine-local: the workspace itself, the runner's lock, and loope's own index (split, its shared part
# beside it; a worker begins it again from its own checkout).
_SKIP = frozenset({"workspace", "runner.lock", INDEX_FILE})
_STATE = ".travel/state.md"
"""Where the agent's state file (``<workspace>/.loope/state.md``, outside git) rides in the records."""
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


def _git_lock(repo: Git) -> threading.Lock:
    """One git transaction at a time per repository (segments of one run, or runs sharing a repository)."""
    with _LOCKS_LOCK:
        return _LOCKS.setdefault(str(repo.work_tree.resolve()), threading.Lock())


@dataclass(frozen=True)
class Snapshot:
    """A pushed state of a run: the records ref and commit, and the workspace commit they carry."""

    ref: str
    commit: str
    head: str


def records_ref(key: str, seq: int, attempt: int) -> str:
    return f"refs/loope-records/{key}/{seq}.{attempt}"


def branch_ref(key: str) -> str:
    return f"refs/loope/{key}"


def push(repo: Git, rundir: Path, remote: str, ref: str, key: str) -> Snapshot:
    """Commit ``rundir``'s records over its workspace head, and push both to ``remote``."""
    record = json.loads((rundir / "run.json").read_text(encoding="utf-8"))
    workspace = Path(record["workspace"]["path"])
    head = Git(workspace).out("rev-parse", "HEAD")
    parents = [head]
    # The kept state, and the user's HEAD the run's branch is replayed on: their objects travel too.
    for extra in (record.get("completed_head"), record["workspace"].get("start")):
        if isinstance(extra, str) and extra and extra not in parents:
            parents.append(extra)
    with _git_lock(repo):
        commit = _commit(repo, rundir, workspace, parents, f"loope records of {record['run_id']}")
        _push(repo, remote, [f"{commit}:{ref}", f"+{head}:{branch_ref(key)}"])
        repo.run("update-ref", ref, commit)  # this copy now holds exactly what ``ref`` names
    return Snapshot(ref, commit, head)


def _commit(repo: Git, rundir: Path, workspace: Path, parents: list[str], message: str) -> str:
    """One commit of the run dir's files (through ``git fast-import``, in one process); its id."""
    stamp = int(time.time())
    temp = f"refs/loope-tmp/{os.getpid()}-{threading.get_ident()}"
    chunks = [
        f"commit {temp}\ncommitter loope <loope@localhost> {stamp} +0000\n".encode(),
        _data(message.encode()),
        f"from {parents[0]}\n".encode(),
        *(f"merge {p}\n".encode() for p in parents[1:]),
        b"deleteall\n",
    ]
    files = [(rel, _read(path, rel)) for rel, path in _files(rundir)]
    state = _read_nofollow(workspace / ".loope" / "state.md")
    if state is not None:
        files.append((_STATE, state))
    for rel, data in files:
        if data is not None:
            chunks += [f"M 100644 inline {rel}\n".encode(), _data(data)]
    chunks.append(b"\n")
    repo.run("fast-import", "--quiet", "--force", stdin=b"".join(chunks))
    commit = repo.out("rev-parse", temp)
    repo.run("update-ref", "-d", temp)
    return commit


def _data(data: bytes) -> bytes:
    return f"data {len(data)}\n".encode() + data + b"\n"


def _files(rundir: Path) -> list[tuple[str, Path]]:
    """The run dir's regular files (no links followed, nothing from the workspace), as (path, file)."""
    found: list[tuple[str, Path]] = []
    for top, dirs, names in os.walk(rundir, followlinks=False):
        here = Path(top)
        rel_dir = here.relative_to(rundir)
        if rel_dir == Path("."):
            dirs[:] = [d for d in dirs if d not in _SKIP]
        for name in names:
            rel = (rel_dir / name).as_posix()
            if rel in _SKIP or rel.startswith("sharedindex.") or "\n" in rel or rel.startswith('"'):
                continue
            found.append((rel, here / name))
    return sorted(found)


def _read(path: Path, rel: str) -> bytes | None:
    data = _read_nofollow(path)
    if data is not None and rel.startswith("agents/") and len(data) > STEP_FILE_CAP:
        note = f"\n[loope: cut at {STEP_FILE_CAP} of {len(data)} bytes on its way between machines]\n"
        data = data[:STEP_FILE_CAP] + note.encode()
    return data


def _read_nofollow(path: Path) -> bytes | None:
    """The file's bytes when it is a regular file (never through a link), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def _push(repo: Git, remote: str, refspecs: list[str]) -> None:
    result = repo.run("push", "--quiet", "--atomic", "--no-verify", remote, *refspecs, check=False)
    if not result.ok:
        lines = result.stderr_tail.strip().splitlines()
        raise LoopeError(f"cannot push the run to {remote}: {lines[-1] if lines else result.describe()}")


def fetch(repo: Git, remote: str, ref: str) -> str:
    """Fetch ``ref`` (a records ref) from ``remote``; its commit."""
    with _git_lock(repo):
        result = repo.run("fetch", "--quiet", "--no-tags", remote, f"+{ref}:{ref}", check=False)
    if not result.ok:
        lines = result.stderr_tail.strip().splitlines()
        raise LoopeError(f"cannot fetch {ref} from {remote}: {lines[-1] if lines else result.describe()}")
    return repo.out("rev-parse", f"{ref}^{{commit}}")


def unpack(repo: Git, commit: str, rundir: Path, *, but: tuple[str, ...] = ()) -> None:
    """Write the records of ``commit`` into ``rundir``, but those named ``but`` (its other files are left as
    they are)."""
    index = rundir.parent / f".{rundir.name}.travel-index"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        repo.run("read-tree", f"{commit}^{{tree}}", env=env)
        if but:
            repo.run("update-index", "--force-remove", "--", *but, env=env)
        repo.run("checkout-index", "-a", "-f", f"--prefix={rundir}/", env=env)
    finally:
        index.unlink(missing_ok=True)


def clear_records(rundir: Path, *, keep: tuple[str, ...] = ()) -> None:
    """Remove the run dir's records, keeping its workspace and ``keep`` (before newer ones are unpacked)."""
    for entry in rundir.iterdir():
        if entry.name in _SKIP or entry.name in keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def place_state(rundir: Path, workspace: Path) -> None:
    """Move the travelling state file into the workspace's ``.loope/``."""

    travelled = rundir / _STATE
    if travelled.exists():
        target = ensure_loope_dir(workspace) / "state.md"
        target.unlink(missing_ok=True)
        travelled.replace(target)
    shutil.rmtree(rundir / ".travel", ignore_errors=True)


def relocate(
    rundir: Path, *, workdir: Path, workspace: Path, git_dir: Path | None, record: dict[str, Any] | None = None,
    **fields: Any,
) -> None:  # fmt: skip
    """Point the run's records at this machine's paths (and set ``fields`` of run.json); ``record``: the run.json
    to write, where it is not in ``rundir`` yet."""
    if record is None:
        record = json.loads((rundir / "run.json").read_text(encoding="utf-8"))
    record["workdir"] = str(workdir)
    record["workspace"]["path"] = str(workspace)
    record["workspace"]["git_dir"] = str(git_dir) if git_dir else None
    record.update(fields)
    write_text(rundir / "run.json", json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    spec = json.loads((rundir / "spec.json").read_text(encoding="utf-8"))
    spec["workdir"] = str(workdir)
    write_text(rundir / "spec.json", json.dumps(spec, indent=2, ensure_ascii=False) + "\n")


def repo_of(workdir: Path) -> tuple[Git, str]:
    """The git repository ``workdir`` is in, and ``workdir``'s path below its top (``.`` at the top)."""
    top = toplevel(workdir)
    if top is None:
        raise LoopeError(f"{workdir} is not in a git repository; a fleet on Temporal needs each task in one")
    return Git(top), workdir.resolve().relative_to(top.resolve()).as_posix()


def kill_leftovers(rundir: Path) -> None:
    """Kill the process groups a dead runner's steps left behind in ``rundir`` (before it is replaced)."""

    agents = rundir / "agents"
    if not agents.is_dir():
        return
    for pid_file in agents.glob("*/process.pid"):
        with contextlib.suppress(OSError, ValueError):
            kill_group(int(pid_file.read_text().strip()))
