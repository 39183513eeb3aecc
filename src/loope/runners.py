"""Whether a run's runner is alive: kept free of heavy imports, for the commands that start fast.

A run's runner holds an exclusive ``flock`` on the run's ``runner.lock`` for as long as it drives
the run; the kernel drops it the moment the process dies, however it dies. So a run is alive when
that lock is held, whatever its recorded pid says: a pid can outlive its process as a zombie, or be
reused by another one, and a run handed from one process to another (``run --detach``) keeps its
lock, but not its pid, across the hand-over.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from os import PathLike

    RunRoot = str | PathLike[str]

LOCK_FILE = "runner.lock"


def runner_alive(run_root: RunRoot, pid: Any = None) -> bool:
    """Whether the run in ``run_root`` has a live runner (one holding its lock).

    ``pid`` (the recorded runner's) is reaped first when it is this process's own dead child (the
    MCP server starts runners and never waits for them), so that it leaves no zombie behind.
    """
    if isinstance(pid, int) and pid > 0:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    return lock_held(os.path.join(run_root, LOCK_FILE))


def lock_held(path: RunRoot) -> bool:
    """Whether some process holds an exclusive ``flock`` on ``path``; asked without waiting.

    A shared lock taken for an instant is the question; a runner taking the lock at that very
    instant retries (see ``RunnerLock.acquire``).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # no lock file: no runner ever took this run
    import fcntl  # here: only a run marked running is asked, and most runs a command reads have ended

    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def runner_pid(run_root: RunRoot) -> int | None:
    """The pid the run's lock holder wrote into its lock file (None when unreadable)."""
    try:
        with open(os.path.join(run_root, LOCK_FILE), encoding="ascii") as f:
            text = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def process_alive(pid: Any) -> bool:
    """Whether ``pid`` is a live process (for processes that hold no run lock: fleet coordinators)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    # A process this one started that died is a zombie until reaped, and a zombie still answers
    # kill(pid, 0); reap it first. Not our child: ChildProcessError.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A dead process nobody has reaped yet (its parent died first, and pid 1 does not reap)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat.rsplit(b")", 1)[-1].split()[:1] == [b"Z"]


def effective_status(record: dict[str, Any], run_root: RunRoot) -> str:
    """The run's status, ``dead`` for a run still marked running whose runner is gone (resumable)."""
    status = str(record.get("status", "?"))
    return "dead" if status == "running" and not runner_alive(run_root, record.get("pid")) else status
