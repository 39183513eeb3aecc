"""Whether a run's runner is alive: kept free of heavy imports, for the commands that start fast."""

from __future__ import annotations

import contextlib
import os
from typing import Any


def runner_alive(pid: Any) -> bool:
    """Whether ``pid`` (a run's runner) is a live process."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    # A runner this process started (the MCP server's) that died is a zombie until reaped, and a
    # zombie still answers kill(pid, 0); reap it first. Not our child: ChildProcessError.
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


def effective_status(record: dict[str, Any]) -> str:
    """The run's status, ``dead`` for a run still marked running whose runner is gone (resumable)."""
    status = str(record.get("status", "?"))
    return "dead" if status == "running" and not runner_alive(record.get("pid")) else status
