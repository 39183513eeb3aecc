"""The one helper every external process goes through.

Each process runs in its own process group (a new session), so a timeout, a stop request or Ctrl-C
kills everything it started. Output is read in chunks and streamed to files while only a bounded
tail is kept in memory; callbacks get lines (or blocks of lines), decoded as UTF-8 with
replacement. Failures come back as data, never as exceptions.
:mod:`loope.spawn` starts the two kinds of process this supervision does not fit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, NamedTuple, Protocol

from loope.pump import Pump
from loope.streams import BlockCallback, LineCallback, Stream


class Confinement(Protocol):
    """What a process runs inside (``loope.sandbox``): a command prefix, and a kill of all it left.

    ``enter`` is called once before the process starts; ``kill`` whenever its group is killed (it
    ended, timed out, was stopped or interrupted) and must reach processes that left the group,
    with ``ended`` when the process had ended on its own (nothing killed it); ``close`` once at the
    very end.
    """

    def enter(self, argv: tuple[str, ...], env: dict[str, str]) -> tuple[tuple[str, ...], dict[str, str]]: ...

    def kill(self, *, ended: bool = False) -> None: ...

    def close(self) -> None: ...


_POLL_S = 0.05
DRAIN_S = 10.0
"""How long, once the process has ended, to wait for its output to be read to the end.

A grandchild that left the process group (its own ``setsid``) can hold the pipes open for ever;
the result is then built from what was read by this deadline.
"""
ABORT_DRAIN_S = 2.0
"""The same wait when run_process is leaving with an exception (Ctrl-C, a failed ``on_spawn``)."""


class ProcResult(NamedTuple):
    """What became of one process.

    A NamedTuple rather than a frozen dataclass: ``loope doctor`` defines it before its first program,
    and a dataclass compiles its methods from source when it is defined.
    """

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
    output_error: str | None = None
    """Why part of the output is missing from its file (the disk was full, say); the process ran on
    and its pipes were still drained. Also the last line of ``stderr_tail``."""

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


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group (one left behind by a runner that died)."""
    _signal_group(pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _terminate(pump: Pump, grace_s: float) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after ``grace_s`` (its output read meanwhile)."""
    _signal_group(pump.proc.pid, signal.SIGTERM)
    pump.wait(grace_s)
    _signal_group(pump.proc.pid, signal.SIGKILL)
    pump.wait(None)


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
    on_stdout_block: BlockCallback | None = None,
    cancel: threading.Event | None = None,
    capture: bool = False,
    merge_stderr: bool = False,
    term_grace_s: float = 30.0,
    on_spawn: Callable[[int], None] | None = None,
    confine: Confinement | None = None,
) -> ProcResult:
    """Run ``argv`` to completion in its own process group and report how it ended.

    ``stdin`` is written then closed (None gives the process a closed stdin). A timeout or a set
    ``cancel`` event sends SIGTERM to the group and SIGKILL ``term_grace_s`` later; when the process
    ends, anything it left running in its group is killed too. ``merge_stderr`` interleaves stderr
    into stdout, as a terminal would show it. ``on_stdout_block`` receives the complete lines of each
    chunk read, as one block of bytes (for callers that handle lines in bulk). ``on_spawn``
    receives the process group id as soon as the process exists (so another runner can kill an
    orphaned group later); if it raises, or anything interrupts the wait (Ctrl-C), the group is
    killed before the exception goes on.
    ``confine`` wraps the command (a sandbox) and kills what it left outside the group; the result
    names the command as given.
    """
    argv_t = tuple(argv)
    started = time.monotonic()
    opened: list[IO[bytes]] = []
    streams: list[Stream] = []
    try:
        out_sink = _open_sink(stdout_path, opened)
        err_sink = _open_sink(stderr_path, opened)
        command, full_env = argv_t, env
        if confine is not None:
            command, full_env = confine.enter(argv_t, dict(env if env is not None else os.environ))
        proc = _start(command, cwd, full_env, piped_stdin=stdin is not None, merge_stderr=merge_stderr)
        if isinstance(proc, ProcResult):
            return proc._replace(argv=argv_t)
        assert proc.stdout is not None
        streams.append(Stream(proc.stdout, out_sink, on_stdout_line, capture, on_stdout_block))
        if proc.stderr is not None:
            streams.append(Stream(proc.stderr, err_sink, on_stderr_line, False))
        data = stdin.encode() if isinstance(stdin, str) else stdin
        timed_out, cancelled = _supervise(
            proc,
            streams,
            data=data,
            on_spawn=on_spawn,
            timeout=timeout,
            cancel=cancel,
            started=started,
            grace_s=term_grace_s,
            confine=confine,
        )
        for stream in streams:
            if stream.callback_error is not None:
                raise stream.callback_error
        return _result(argv_t, proc, started, streams, capture=capture, timed_out=timed_out, cancelled=cancelled)
    finally:
        if confine is not None:
            confine.close()
        for stream in streams:
            stream.detach()
        for f in opened:
            with contextlib.suppress(OSError):  # a full disk fails the last flush too; already reported
                f.close()


class Started:
    """A process started now and waited for later (``finish``), so that the caller runs another meanwhile.

    For a command whose output is small (a commit id): nothing reads its pipes until ``finish``, and a
    process that filled one would wait there. Captured stdout, no timeout; its group is killed as it
    ends, as ``run_process`` does. ``stdin`` is written whole as it starts, so it must fit in a pipe
    (``STDIN_MAX``) for the caller not to wait for the process to read it.
    """

    STDIN_MAX = 32 * 1024
    """What ``stdin`` may weigh: well under a Linux pipe's 64 KiB, so writing it never waits."""

    def __init__(
        self, argv: Sequence[str], *, cwd: Path | str, env: Mapping[str, str] | None = None, stdin: bytes | None = None
    ) -> None:
        self.argv = tuple(argv)
        self._started = time.monotonic()
        self._proc = _start(self.argv, cwd, env, piped_stdin=stdin is not None, merge_stderr=False)
        self._streams: list[Stream] = []
        if not isinstance(self._proc, ProcResult):
            out, err = self._proc.stdout, self._proc.stderr
            assert out is not None
            assert err is not None
            self._streams = [Stream(out, None, None, True), Stream(err, None, None, False)]
            if self._proc.stdin is not None:
                with contextlib.suppress(BrokenPipeError):  # it ended at once: its exit says why
                    self._proc.stdin.write(stdin or b"")
                with contextlib.suppress(BrokenPipeError):
                    self._proc.stdin.close()
        self._result: ProcResult | None = None

    def finish(self) -> ProcResult:
        """Wait for the process to end (at once when it already has); how it ended."""
        if self._result is not None:
            return self._result
        proc = self._proc
        if isinstance(proc, ProcResult):
            self._result = proc._replace(argv=self.argv)
            return self._result
        try:
            timed_out, cancelled = _supervise(
                proc,
                self._streams,
                data=None,
                on_spawn=None,
                timeout=None,
                cancel=None,
                started=self._started,
                grace_s=1.0,
                confine=None,
            )
            self._result = _result(
                self.argv, proc, self._started, self._streams, capture=True, timed_out=timed_out, cancelled=cancelled
            )
        finally:
            for stream in self._streams:
                stream.detach()
        return self._result


def _supervise(
    proc: subprocess.Popen[bytes],
    streams: list[Stream],
    *,
    data: bytes | None,
    on_spawn: Callable[[int], None] | None,
    timeout: float | None,
    cancel: threading.Event | None,
    started: float,
    grace_s: float,
    confine: Confinement | None,
) -> tuple[bool, bool]:
    """Drain and feed ``proc`` until it ends; (timed_out, cancelled). Any exception kills the group first."""
    pump = Pump(proc, streams, data)
    try:
        if on_spawn is not None:
            on_spawn(proc.pid)
        outcome = _wait(pump, timeout, cancel, started, grace_s)
    except BaseException:
        _terminate(pump, 1.0)
        _signal_group(proc.pid, signal.SIGKILL)  # what it started while it was being ended
        if confine is not None:
            confine.kill()
        pump.drain(ABORT_DRAIN_S)  # let the output reach its files before they are closed
        raise
    _signal_group(proc.pid, signal.SIGKILL)  # whatever it left behind in its group
    if confine is not None:
        confine.kill(ended=outcome == (False, False))  # and whatever left the group (its own session, a double fork)
    pump.drain(DRAIN_S)
    return outcome


def _result(
    argv: tuple[str, ...],
    proc: subprocess.Popen[bytes],
    started: float,
    streams: list[Stream],
    *,
    capture: bool,
    timed_out: bool,
    cancelled: bool,
) -> ProcResult:
    out = streams[0]
    err_tail = streams[1].tail_text() if len(streams) > 1 else ""
    problems = [s.sink_error for s in streams if s.sink_error]
    output_error = "; ".join(problems) or None
    if output_error:
        err_tail = "\n".join(line for line in (err_tail, f"loope: {output_error}") if line)
    return ProcResult(
        argv,
        proc.returncode,
        time.monotonic() - started,
        stdout_tail=out.tail_text(),
        stderr_tail=err_tail,
        stdout=out.captured() if capture else None,
        timed_out=timed_out,
        cancelled=cancelled,
        output_error=output_error,
    )


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
    except OSError as exc:
        return ProcResult(argv, None, 0.0, start_error=start_error(argv, cwd, exc))


def start_error(argv: tuple[str, ...], cwd: Path | str, exc: OSError) -> str:
    """Why ``argv`` could not start, on one line."""
    if isinstance(exc, FileNotFoundError):
        if not Path(cwd).is_dir():  # Popen reports a missing working directory the same way
            return f"working directory not found: {cwd}"
        return f"command not found: {argv[0]}"
    if isinstance(exc, PermissionError):
        return f"permission denied running {argv[0]}"
    if isinstance(exc, NotADirectoryError):
        return f"not a directory: {cwd}"
    # E2BIG (the arguments are too long), ENOEXEC (not a program), EMFILE, ENOMEM, ...
    return f"cannot run {argv[0]}: {exc.strerror or exc}"


def _open_sink(path: Path | None, opened: list[IO[bytes]]) -> IO[bytes] | None:
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    sink = path.open("ab")
    opened.append(sink)
    return sink


def _wait(
    pump: Pump, timeout: float | None, cancel: threading.Event | None, started: float, grace_s: float
) -> tuple[bool, bool]:
    """Wait for the process, moving its bytes; returns (timed_out, cancelled).

    Its end is noticed at once (the poll watches its pidfd); with a timeout or a stop to watch for,
    the wait wakes at least every ``_POLL_S`` to look.
    """
    watching = timeout is not None or cancel is not None
    while not pump.wait(_POLL_S if watching else None):
        if cancel is not None and cancel.is_set():
            _terminate(pump, min(grace_s, 5.0))
            return False, True
        if timeout is not None and time.monotonic() - started > timeout:
            _terminate(pump, grace_s)
            return True, False
    return False, False
