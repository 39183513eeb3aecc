"""Whether codex's own sandbox can run a command on this machine.

When it cannot, ``codex exec`` does not say so: the command produces no item and nothing on stderr,
and a reviewer that could read nothing still gives a verdict. Known causes: a system bubblewrap
(which codex prefers to its bundled one) while codex's home sits under the temporary directory
(codex then refuses to make the helper it runs inside bubblewrap), or a kernel or container that
allows no unprivileged user namespaces. ``codex sandbox -- true`` shows it in a tenth of a second,
with a reason on stderr, so loope asks that first and fails the step with the reason instead.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from loope.proc import run_process
from loope.text import one_line

PROBE_TIMEOUT_S = 30.0
FIX = (
    "run loope with its own sandbox (install bubblewrap; --sandbox on), or let the container be the"
    ' sandbox: [agents.codex] args = ["-s", "danger-full-access"]'
)

_cache: dict[tuple[str, ...], str | None] = {}
_lock = threading.Lock()


def sandbox_problem(binary: str, env: Mapping[str, str], cwd: Path) -> str | None:
    """Why codex's own sandbox cannot run a command with ``env``, or None.

    Asked as a step would run it, with a private TMPDIR; cached by what decides it: the binary,
    codex's home, and PATH (which bubblewrap codex finds).
    """
    home = os.path.abspath(env.get("CODEX_HOME") or str(Path(env.get("HOME") or Path.home()) / ".codex"))
    key = (binary, home, env.get("PATH", ""))
    with _lock:
        if key in _cache:
            return _cache[key]
    problem = _probe(binary, env, cwd)
    with _lock:
        _cache[key] = problem
    return problem


def _probe(binary: str, env: Mapping[str, str], cwd: Path) -> str | None:
    # Asked the way a step runs codex: with a private TMPDIR of its own (see loope.sandbox).
    with tempfile.TemporaryDirectory(prefix="loope-codex-probe-", ignore_cleanup_errors=True) as tmp:
        probe_env = {**env, "TMPDIR": tmp}
        result = run_process(
            [binary, "sandbox", "--", "true"], cwd=cwd, env=probe_env, capture=True, timeout=PROBE_TIMEOUT_S
        )
    if result.ok:
        return None
    lines = [ln.strip() for ln in result.stderr_tail.splitlines() if ln.strip()]
    detail = next((ln for ln in reversed(lines) if not ln.startswith("WARNING")), None) or result.describe()
    return f"codex's own sandbox cannot run a command here ({one_line(detail)}); {FIX}"


def own_sandbox_in_use(args: Sequence[str]) -> bool:
    """Whether codex will run commands in its own sandbox (the args choose none other than its default)."""
    if "--dangerously-bypass-approvals-and-sandbox" in args or "--yolo" in args:
        return False
    for i, arg in enumerate(args):
        value = args[i + 1] if arg in ("-s", "--sandbox") and i + 1 < len(args) else None
        if arg.startswith("--sandbox="):
            value = arg.split("=", 1)[1]
        if value == "danger-full-access":
            return False
    return True
