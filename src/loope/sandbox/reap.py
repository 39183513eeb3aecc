"""Finding every process a step started, wherever it went, and killing it.

A process group is not enough: ``setsid`` or a double fork leaves it. Two nets that such a process
cannot leave on its own:

- a **cgroup v2** of its own per step (where the unified hierarchy is mounted and writable): the
  step's first process moves itself in before it runs the command, so everything it starts is born
  inside; ``cgroup.kill`` ends them all at once;
- a **marker** in the environment (``LOOPE_STEP_TOKEN=<random>``), inherited by every descendant;
  the runner looks for it in ``/proc/*/environ``. It catches what a cgroup cannot (no cgroup v2,
  or a process that moved itself out) unless the process also cleared its environment.

Inside the sandbox the step's PID namespace ends everything already; these nets are the same code
with the sandbox off.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import time
from pathlib import Path

TOKEN_VAR = "LOOPE_STEP_TOKEN"
_SWEEPS = 50
"""Rounds of look-and-kill at most: a process may fork between two looks, never for ever."""


def new_token() -> str:
    return secrets.token_hex(12)


def kill_marked(token: str) -> int:
    """SIGKILL every process whose environment carries ``token``; how many were found."""
    needle = f"{TOKEN_VAR}={token}".encode()
    me = os.getpid()
    killed: set[int] = set()
    for _ in range(_SWEEPS):
        found = [pid for pid in _pids() if pid != me and needle in _environ(pid)]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed.update(found)
        time.sleep(0.01)  # a killed process is a zombie (with no environment) once it is gone
    return len(killed)


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or not ours to read
        return b""


# -- cgroup v2 --------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def cgroup_base() -> Path | None:
    """Where step cgroups can be made (under this process's own cgroup), or None."""
    mount = _cgroup2_mount()
    if mount is None:
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    if own is None:
        return None
    base = mount / own.lstrip("/")
    probe = base / f"loope-probe-{new_token()}"
    try:
        probe.mkdir()
    except OSError:
        return None
    usable = (probe / "cgroup.procs").exists() and (probe / "cgroup.kill").exists()
    with contextlib.suppress(OSError):
        probe.rmdir()
    return base if usable else None


def _cgroup2_mount() -> Path | None:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].split(" ", 1)[0] == "cgroup2":
            return Path(fields[0].split()[4])
    return None


class StepCgroup:
    """A cgroup for one step's processes, removed when the step ends."""

    def __init__(self, base: Path, token: str) -> None:
        self.path = base / f"loope-step-{token}"
        self.path.mkdir()

    def prefix(self) -> tuple[str, ...]:
        """A command prefix that moves the step's first process in before it becomes the command."""
        return ("/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs"))

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            (self.path / "cgroup.kill").write_text("1")
        for _ in range(_SWEEPS * 4):
            if not self._members():
                return
            time.sleep(0.005)

    def remove(self) -> None:
        self.kill()
        with contextlib.suppress(OSError):
            self.path.rmdir()

    def _members(self) -> bool:
        try:
            return bool((self.path / "cgroup.procs").read_text().strip())
        except OSError:
            return False
