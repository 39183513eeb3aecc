"""Whether bubblewrap can sandbox steps here: its probe, asked once per process.

Apart from the sandbox package (which builds each step's box), so that ``loope doctor`` asks it
without loading that package.
"""

from __future__ import annotations

import functools
import shutil
import threading
from typing import NamedTuple

from loope.proc import run_process

PROBE_TIMEOUT_S = 20.0
BASE = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc")
# A PID namespace per step (its init ends every process in it when the command ends or its parent
# dies); no capabilities, even for root, so nothing inside can remount what is read-only.
ISOLATE = ("--unshare-pid", "--unshare-ipc", "--die-with-parent", "--cap-drop", "ALL")


class Support(NamedTuple):
    """What the probe found."""

    binary: str | None
    works: bool
    reason: str
    """Why it does not work (empty when it does)."""


_asking = threading.Lock()


def support() -> Support:
    """Whether bubblewrap can build the sandbox loope needs on this machine (asked once per process: a
    caller while another thread asks waits for its answer)."""
    with _asking:
        return _probe()


def forget() -> None:
    """Ask again on the next call (the machine changed under this process: another PATH, say)."""
    with _asking:
        _probe.cache_clear()


@functools.lru_cache(maxsize=1)
def _probe() -> Support:
    binary = shutil.which("bwrap")
    if binary is None:
        return Support(None, False, "bubblewrap is not installed (apt-get install bubblewrap)")
    probe = [binary, *BASE, "--tmpfs", "/tmp", *ISOLATE, "--unshare-net", "--", "true"]
    result = run_process(probe, cwd="/", capture=True, timeout=PROBE_TIMEOUT_S, term_grace_s=1)
    if result.ok:
        return Support(binary, True, "")
    lines = [ln.strip() for ln in result.stderr_tail.splitlines() if ln.strip()]
    detail = lines[-1] if lines else result.describe()
    return Support(binary, False, f"bubblewrap cannot make a sandbox here ({detail})")


def status_line() -> tuple[bool, str]:
    """What ``loope doctor`` says about the sandbox: (works, one line)."""
    found = support()
    if found.works:
        return True, f"bubblewrap at {found.binary}: every step runs sandboxed (--sandbox auto)"
    return False, f"{found.reason}: steps run unsandboxed, only the guard keeps the rules"
