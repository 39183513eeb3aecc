"""The one helper every external process goes through.

Each process runs in its own process group (a new session), so a timeout, a stop request or Ctrl-C
kills everything it started. Output is streamed to files line by line while only a bounded tail is
kept in memory, decoded as UTF-8 with replacement. Failures come back as data, never as exceptions.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

LineCallback = Callable[[str], None]

_POLL_S = 0.05


@dataclass(frozen=True)
class ProcResult:
    """What became of one process."""

    argv: tuple[str, ...]
    exit_code: int | None
    """The exit status; negative when a signal killed it; None when it never started."""
    duration_s: float
    stdout_tail: str = ""
    stderr_tail: str = ""
    stdout: bytes | None = None
    """The whole of stdout, only when the caller asked for ``capture=True``."""
    timed_out: bool = False
    cancelled: bool = False
    start_error: str | None = None
    """Why the process could not start (for example, the program is not installed)."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.cancelled

    @property
    def signal_name(self) -> str | None:
        if self.exit_code is None or self.exit_code >= 0:
            return None
        try:
            return signal.Signals(-self.exit_code).name
        except ValueError:
            return f"signal {-self.exit_code}"

    @property
    def text(self) -> str:
        """Captured stdout as text (UTF-8, invalid bytes replaced)."""
        return (self.stdout or b"").decode("utf-8", "replace")

    def describe(self) -> str:
        """A one-line account of how the process ended."""
        if self.start_error:
            return self.start_error
        if self.timed_out:
            return f"timed out after {self.duration_s:.0f}s"
        if self.cancelled:
            return "stopped"
        if self.signal_name:
            return f"killed by {self.signal_name}"
        return f"exit code {self.exit_code}"


@dataclass
class _Stream:
    """Drains one pipe: to a file, to a callback, and into a bounded tail."""

    pipe: IO[bytes]
    sink: IO[bytes] | None
    on_line: LineCallback | None
    capture: bool
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=200))
    chunks: list[bytes] = field(default_factory=list)
    callback_error: BaseException | None = None

    def drain(self) -> None:
        for raw in iter(self.pipe.readline, b""):
            if self.sink is not None:
                self.sink.write(raw)
                self.sink.flush()
            if self.capture:
                self.chunks.append(raw)
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            self.tail.append(line[:4000])
            if self.on_line is not None and self.callback_error is None:
                try:
                    self.on_line(line)
                except BaseException as exc:  # noqa: BLE001 - re-raised by run_process once the pipe is drained
                    self.callback_error = exc
        self.pipe.close()

    def tail_text(self) -> str:
        return "\n".join(self.tail)


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group (one left behind by a runner that died)."""
    _signal_group(pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _terminate(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after ``grace_s``."""
    _signal_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _feed(pipe: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        pipe.write(data)
    with contextlib.suppress(BrokenPipeError, OSError):
        pipe.close()


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str] | None = None,
    stdin: str | bytes | None = None,
    timeout: float | None = None,
    stdout_path: Path | None = None,
    stderr_path: Path | None = None,
    on_stdout_line: LineCallback | None = None,
    on_stderr_line: LineCallback | None = None,
    cancel: threading.Event | None = None,
    capture: bool = False,
    merge_stderr: bool = False,
    term_grace_s: float = 30.0,
    on_spawn: Callable[[int], None] | None = None,
) -> ProcResult:
    """Run ``argv`` to completion in its own process group and report how it ended.

    ``stdin`` is written then closed (None gives the process a closed stdin). A timeout or a set
    ``cancel`` event sends SIGTERM to the group and SIGKILL ``term_grace_s`` later; when the process
    ends, anything it left running in its group is killed too. ``merge_stderr`` interleaves stderr
    into stdout, as a terminal would show it. ``on_spawn`` receives the process group id as soon as
    the process exists (so another runner can kill an orphaned group later).
    """
    argv_t = tuple(argv)
    started = time.monotonic()
    opened: list[IO[bytes]] = []
    try:
        out_sink = _open_sink(stdout_path, opened)
        err_sink = _open_sink(stderr_path, opened)
        proc = _start(argv_t, cwd, env, piped_stdin=stdin is not None, merge_stderr=merge_stderr)
        if isinstance(proc, ProcResult):
            return proc
        if on_spawn is not None:
            on_spawn(proc.pid)
        assert proc.stdout is not None
        out = _Stream(proc.stdout, out_sink, on_stdout_line, capture)
        streams = [out]
        if proc.stderr is not None:
            err = _Stream(proc.stderr, err_sink, on_stderr_line, False)
            streams.append(err)
        threads = [threading.Thread(target=s.drain, daemon=True) for s in streams]
        if stdin is not None:
            assert proc.stdin is not None
            data = stdin.encode() if isinstance(stdin, str) else stdin
            threads.append(threading.Thread(target=_feed, args=(proc.stdin, data), daemon=True))
        for t in threads:
            t.start()
        timed_out, cancelled = _wait(proc, timeout, cancel, started, term_grace_s)
        _signal_group(proc.pid, signal.SIGKILL)  # whatever it left behind in its group
        for t in threads:
            t.join(timeout=10)
        for stream in streams:
            if stream.callback_error is not None:
                raise stream.callback_error
        return ProcResult(
            argv_t,
            proc.returncode,
            time.monotonic() - started,
            stdout_tail=out.tail_text(),
            stderr_tail=streams[1].tail_text() if len(streams) > 1 else "",
            stdout=b"".join(out.chunks) if capture else None,
            timed_out=timed_out,
            cancelled=cancelled,
        )
    finally:
        for f in opened:
            f.close()


def _start(
    argv: tuple[str, ...], cwd: Path | str, env: Mapping[str, str] | None, *, piped_stdin: bool, merge_stderr: bool
) -> subprocess.Popen[bytes] | ProcResult:
    """The started process in a new session, or why it could not start."""
    try:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE if piped_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        if not Path(cwd).is_dir():  # Popen reports a missing working directory the same way
            return ProcResult(argv, None, 0.0, start_error=f"working directory not found: {cwd}")
        return ProcResult(argv, None, 0.0, start_error=f"command not found: {argv[0]}")
    except PermissionError:
        return ProcResult(argv, None, 0.0, start_error=f"permission denied running {argv[0]}")
    except NotADirectoryError:
        return ProcResult(argv, None, 0.0, start_error=f"not a directory: {cwd}")


def _open_sink(path: Path | None, opened: list[IO[bytes]]) -> IO[bytes] | None:
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    sink = path.open("ab")
    opened.append(sink)
    return sink


def _wait(
    proc: subprocess.Popen[bytes],
    timeout: float | None,
    cancel: threading.Event | None,
    started: float,
    grace_s: float,
) -> tuple[bool, bool]:
    """Wait for ``proc``; returns (timed_out, cancelled). Any exception kills the group first."""
    try:
        while True:
            try:
                proc.wait(timeout=_POLL_S)
                return False, False
            except subprocess.TimeoutExpired:
                pass
            if cancel is not None and cancel.is_set():
                _terminate(proc, min(grace_s, 5.0))
                return False, True
            if timeout is not None and time.monotonic() - started > timeout:
                _terminate(proc, grace_s)
                return True, False
    except BaseException:
        _terminate(proc, 1.0)
        raise
