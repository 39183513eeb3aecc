"""Processes :func:`loope.proc.run_process` does not supervise: a runner meant to outlive loope, an
agent loope converses with over its pipes (ACP), and a git batch command kept for a run's requests.

Both start in their own session, as every process loope starts does, and report a failure to start
the same way (:func:`loope.proc.start_error`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from loope.errors import LoopeError
from loope.proc import start_error

if TYPE_CHECKING:
    import asyncio


async def spawn_piped(
    argv: Sequence[str], *, cwd: Path | str, env: Mapping[str, str] | None, stderr_path: Path
) -> asyncio.subprocess.Process | str:
    """Start ``argv`` for a conversation over its stdin and stdout (ACP agents); or why it cannot start.

    Its own process group, as for :func:`loope.proc.run_process` (the caller kills the group with
    :func:`loope.proc.kill_group` when it is done); stderr goes to ``stderr_path``; the pipes carry
    newline-delimited JSON-RPC, so a line may be long (the stream limit is 64 MiB).
    """
    import asyncio  # only ACP agents need an event loop

    argv_t = tuple(argv)
    try:
        with stderr_path.open("ab") as stderr:
            return await asyncio.create_subprocess_exec(
                *argv_t,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                start_new_session=True,
                limit=64 * 1024 * 1024,
            )
    except OSError as exc:
        return start_error(argv_t, cwd, exc)


def spawn_detached(argv: Sequence[str], *, cwd: Path | str, log_path: Path, pass_fds: Sequence[int] = ()) -> int:
    """Start ``argv`` to outlive loope; its pid.

    The one place loope starts such a process: a new session (so the terminal's Ctrl-C and hangup
    do not reach it), stdin from /dev/null, stdout and stderr appended to ``log_path``, no open
    file of ours but ``pass_fds``. A LoopeError (one line) when it cannot start.
    """
    argv_t = tuple(argv)
    try:
        log = log_path.open("ab")
    except OSError as exc:
        raise LoopeError(f"cannot open {log_path} for {argv_t[0]}'s output: {exc.strerror or exc}") from None
    try:
        proc = subprocess.Popen(
            argv_t,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    except OSError as exc:
        raise LoopeError(f"cannot start a background process: {start_error(argv_t, cwd, exc)}") from None
    finally:
        log.close()
    # Nobody waits for it here: subprocess reaps it on a later Popen, runners.runner_alive when asked.
    return proc.pid


def spawn_batch(
    argv: Sequence[str], *, cwd: Path | str, env: Mapping[str, str], stderr: IO[bytes]
) -> subprocess.Popen[bytes]:
    """Start ``argv`` to answer requests on its stdin, one after another, on its stdout (``git cat-file --batch``).

    Its own session, as every process loope starts; stderr goes to ``stderr`` (a file, so that no
    warning it prints can fill a pipe nobody reads). The caller ends it by closing its stdin. A
    LoopeError (one line) when it cannot start.
    """
    argv_t = tuple(argv)
    try:
        return subprocess.Popen(
            argv_t,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
    except OSError as exc:
        raise LoopeError(start_error(argv_t, cwd, exc)) from None
