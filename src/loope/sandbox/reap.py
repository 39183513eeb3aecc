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

A runner killed with SIGKILL cannot remove its step's cgroup (nor end what runs in it). The cgroup's
name says whose it is (the runner's pid and start time), so the next runner started in the same
cgroup, and ``loope gc``, end and remove those whose runner is gone (``sweep``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import secrets
import signal
import time
from pathlib import Path

TOKEN_VAR = "LOOPE_STEP_TOKEN"
_SWEEPS = 50
"""Rounds of look-and-kill at most: a process may fork between two looks, never for ever."""
_STEP_CGROUP = re.compile(r"loope-step-(?:(\d+)-(\d+)-)?[0-9a-f]{24}")
"""A step cgroup's name: its runner's pid and start time, then the step's token (older ones: the token only)."""
_UNOWNED_AGE_S = 3600
"""A step cgroup whose name says no owner is left alone this long: its runner may still be starting its step."""


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


@functools.lru_cache(maxsize=1)
def step_base() -> Path | None:
    """``cgroup_base()``, swept of what dead runners left there (once per process: before its first step)."""
    base = cgroup_base()
    sweep(base)
    return base


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


def sweep(base: Path | None) -> int:
    """End and remove the step cgroups under ``base`` whose runner died; how many were removed."""
    if base is None:
        return 0
    try:
        entries = list(os.scandir(base))
    except OSError:
        return 0
    removed = 0
    for entry in entries:
        match = _STEP_CGROUP.fullmatch(entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False):
            continue
        if match[1] is None:
            if _populated(Path(entry.path)) or _age(entry) < _UNOWNED_AGE_S:
                continue  # whose it is cannot be told: only an old, empty one is surely left over
        elif _start_time(int(match[1])) == int(match[2]):
            continue  # its runner is alive: the step is its to end
        removed += _remove_tree(Path(entry.path))
    return removed


def _remove_tree(path: Path) -> bool:
    """Kill what runs in the cgroup ``path`` (and the cgroups under it), then remove them all."""
    with contextlib.suppress(OSError):
        (path / "cgroup.kill").write_text("1")
    for _ in range(_SWEEPS * 4):
        if not _populated(path):
            break
        time.sleep(0.005)
    for current, _dirs, _files in os.walk(path, topdown=False):
        with contextlib.suppress(OSError):
            os.rmdir(current)
    return not os.path.lexists(path)


def _age(entry: os.DirEntry[str]) -> float:
    try:
        return time.time() - entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


def _populated(path: Path) -> bool:
    try:
        return "populated 1" in (path / "cgroup.events").read_text()
    except OSError:
        return False


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), None when it is gone: a pid alone may be reused."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return int(fields[19]) if len(fields) > 19 else None


class StepCgroup:
    """A cgroup for one step's processes, removed when the step ends."""

    def __init__(self, base: Path, token: str) -> None:
        self.path = base / f"loope-step-{os.getpid()}-{_start_time(os.getpid()) or 0}-{token}"
        self.path.mkdir()

    def prefix(self) -> tuple[str, ...]:
        """A command prefix that moves the step's first process in before it becomes the command."""
        return ("/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs"))

    def kill(self) -> None:
        if not self._members():
            return  # the usual end: nothing outlived the step's process
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
