"""The one subprocess helper (proc.py): process groups, timeouts, cancel, output, start errors."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from loope import proc
from loope.errors import LoopeError
from loope.proc import run_process
from loope.spawn import spawn_detached
from tests.conftest import alive_in_group, gone

PY = sys.executable


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "child.py"
    path.write_text("import os, subprocess, sys, time, pathlib\n" + textwrap.dedent(body))
    return [PY, str(path)]


# A child that starts a grandchild (sleeping), writes both pids, and then sleeps itself.
SPAWNER = """
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
pathlib.Path(sys.argv[1]).write_text(f"{os.getpid()} {grandchild.pid}")
print("spawned", flush=True)
time.sleep(120)
"""


def pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()]


def test_a_finished_process_reports_its_exit_and_output(tmp_path: Path) -> None:
    argv = script(tmp_path, "print('out'); print('err', file=sys.stderr); sys.exit(3)")
    result = run_process(argv, cwd=tmp_path)
    assert (result.exit_code, result.ok, result.timed_out, result.cancelled) == (3, False, False, False)
    assert result.stdout_tail == "out"
    assert result.stderr_tail == "err"
    assert result.describe() == "exit code 3"
    ok = run_process([PY, "-c", "pass"], cwd=tmp_path)
    assert ok.ok
    assert ok.exit_code == 0


def test_stdin_env_and_cwd_reach_the_process(tmp_path: Path) -> None:
    argv = script(tmp_path, "print(sys.stdin.read().upper()); print(os.environ['MARK']); print(os.getcwd())")
    result = run_process(argv, cwd=tmp_path, stdin="hello", env={**os.environ, "MARK": "m-1"}, capture=True)
    assert result.text.splitlines() == ["HELLO", "m-1", str(tmp_path)]


def test_output_streams_to_files_and_callbacks_with_a_bounded_tail(tmp_path: Path) -> None:
    argv = script(tmp_path, "for i in range(1000): print(f'line {i}')\nprint('e', file=sys.stderr)")
    seen: list[str] = []
    result = run_process(
        argv,
        cwd=tmp_path,
        stdout_path=tmp_path / "out.log",
        stderr_path=tmp_path / "err.log",
        on_stdout_line=seen.append,
    )
    assert seen == [f"line {i}" for i in range(1000)]
    assert (tmp_path / "out.log").read_text().splitlines()[-1] == "line 999"
    assert (tmp_path / "err.log").read_text() == "e\n"
    tail = result.stdout_tail.splitlines()
    assert tail[-1] == "line 999"
    assert len(tail) < 1000


def test_more_input_and_output_than_a_pipe_holds_flow_both_ways_at_once(tmp_path: Path) -> None:
    data = b"".join(b"line %d of what the process is given\n" % i for i in range(40_000))  # ~1.4 MB
    echo = "while chunk := sys.stdin.buffer.read1(4096): sys.stdout.buffer.write(chunk); sys.stdout.flush()"
    result = run_process(script(tmp_path, echo), cwd=tmp_path, stdin=data, capture=True, timeout=60)
    assert (result.exit_code, result.stdout) == (0, data)


def test_a_process_that_never_reads_its_input_still_ends(tmp_path: Path) -> None:
    result = run_process(script(tmp_path, "print('ignored my input')"), cwd=tmp_path, stdin=b"x" * 4_000_000)
    assert (result.exit_code, result.stdout_tail) == (0, "ignored my input")


def test_output_is_read_on_the_callers_own_thread(tmp_path: Path) -> None:
    seen: set[str] = set()
    before = threading.active_count()
    result = run_process(
        script(tmp_path, "print('a'); print('b', file=sys.stderr)"),
        cwd=tmp_path,
        stdin="input",
        on_stdout_line=lambda _: seen.add(threading.current_thread().name),
        on_stderr_line=lambda _: seen.add(threading.current_thread().name),
    )
    assert result.exit_code == 0
    assert seen == {threading.current_thread().name}
    assert threading.active_count() == before


def test_merged_stderr_is_interleaved_into_stdout(tmp_path: Path) -> None:
    argv = script(tmp_path, "print('a', flush=True); print('b', file=sys.stderr, flush=True); print('c')")
    result = run_process(argv, cwd=tmp_path, stdout_path=tmp_path / "all.log", merge_stderr=True)
    assert (tmp_path / "all.log").read_text().splitlines() == ["a", "b", "c"]
    assert result.stderr_tail == ""


def test_non_utf8_output_is_replaced_not_fatal(tmp_path: Path) -> None:
    argv = script(tmp_path, r"sys.stdout.buffer.write(b'bad \xff\xfe bytes\n'); sys.stderr.buffer.write(b'\xc3(\n')")
    seen: list[str] = []
    result = run_process(argv, cwd=tmp_path, capture=True, on_stdout_line=seen.append, stdout_path=tmp_path / "o")
    assert result.stdout_tail == "bad \ufffd\ufffd bytes"
    assert result.text == "bad \ufffd\ufffd bytes\n"
    assert seen == ["bad \ufffd\ufffd bytes"]
    assert "\ufffd" in result.stderr_tail
    assert (tmp_path / "o").read_bytes() == b"bad \xff\xfe bytes\n"  # the file keeps the real bytes


def test_a_missing_program_is_a_start_error_not_an_exception(tmp_path: Path) -> None:
    result = run_process([str(tmp_path / "no-such-program"), "--flag"], cwd=tmp_path)
    assert result.exit_code is None
    assert not result.ok
    assert result.start_error is not None
    assert "not found" in result.start_error
    assert "no-such-program" in result.start_error
    assert result.describe() == result.start_error
    on_path = run_process(["loope-test-surely-not-installed"], cwd=tmp_path)
    assert on_path.start_error == "command not found: loope-test-surely-not-installed"


def test_a_missing_working_directory_is_not_reported_as_a_missing_program(tmp_path: Path) -> None:
    result = run_process([PY, "-c", "pass"], cwd=tmp_path / "gone")
    assert result.start_error == f"working directory not found: {tmp_path / 'gone'}"


def test_a_program_that_is_not_executable_is_a_start_error(tmp_path: Path) -> None:
    target = tmp_path / "data.txt"
    target.write_text("not a program")
    result = run_process([str(target)], cwd=tmp_path)
    assert result.start_error is not None
    assert "permission denied" in result.start_error


def test_a_timeout_kills_the_whole_process_group_grandchildren_included(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    result = run_process([*script(tmp_path, SPAWNER), str(pid_file)], cwd=tmp_path, timeout=1.5)
    assert result.timed_out
    assert not result.ok
    assert not result.cancelled
    assert result.stdout_tail == "spawned"
    assert result.describe().startswith("timed out after")
    child, grandchild = pids(pid_file)
    assert gone(child)
    assert gone(grandchild), "the grandchild outlived the timeout"


def test_a_process_that_exits_leaves_nothing_running_in_its_group(tmp_path: Path) -> None:
    body = """
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pathlib.Path(sys.argv[1]).write_text(str(grandchild.pid))
    """
    pid_file = tmp_path / "pid"
    result = run_process([*script(tmp_path, body), str(pid_file)], cwd=tmp_path)
    assert result.exit_code == 0
    assert gone(int(pid_file.read_text())), "a background child outlived its parent's step"


def test_a_cancel_event_stops_the_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    cancel = threading.Event()

    def cancel_once_started(line: str) -> None:
        if line == "spawned":
            cancel.set()

    result = run_process(
        [*script(tmp_path, SPAWNER), str(pid_file)],
        cwd=tmp_path,
        cancel=cancel,
        on_stdout_line=cancel_once_started,
        timeout=100,
    )
    assert result.cancelled
    assert not result.timed_out
    assert not result.ok
    assert result.describe() == "stopped"
    child, grandchild = pids(pid_file)
    assert gone(child)
    assert gone(grandchild)


def test_the_process_runs_in_its_own_process_group(tmp_path: Path) -> None:
    argv = script(tmp_path, "print(os.getpgid(0), os.getsid(0))")
    result = run_process(argv, cwd=tmp_path, capture=True)
    pgid, sid = (int(x) for x in result.text.split())
    assert pgid != os.getpgid(0)
    assert sid != os.getsid(0)


def test_a_process_killed_by_a_signal_says_which(tmp_path: Path) -> None:
    argv = script(tmp_path, "import signal; os.kill(os.getpid(), signal.SIGKILL)")
    result = run_process(argv, cwd=tmp_path)
    assert result.exit_code == -9
    assert result.signal_name == "SIGKILL"
    assert result.describe() == "killed by SIGKILL"


def test_a_callback_error_is_raised_after_the_process_is_gone(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"

    def explode(line: str) -> None:
        raise RuntimeError("observer broke")

    body = "pathlib.Path(sys.argv[1]).write_text(str(os.getpid())); print('x', flush=True)"
    try:
        run_process([*script(tmp_path, body), str(pid_file)], cwd=tmp_path, on_stdout_line=explode)
    except RuntimeError as exc:
        assert "observer broke" in str(exc)  # noqa: PT017 - the process must be gone too
    else:
        raise AssertionError("the callback's error was swallowed")
    assert gone(int(pid_file.read_text()))


def test_any_os_error_at_start_is_a_start_error(tmp_path: Path) -> None:
    too_long = run_process([PY, "-c", "pass", "x" * 200_000], cwd=tmp_path)  # one argument past MAX_ARG_STRLEN
    assert too_long.exit_code is None
    assert too_long.start_error == f"cannot run {PY}: Argument list too long"
    no_format = tmp_path / "no-shebang"
    no_format.write_bytes(b"\x7fELF not really a program\n")
    no_format.chmod(0o755)
    result = run_process([str(no_format)], cwd=tmp_path)
    assert result.start_error == f"cannot run {no_format}: Exec format error"
    assert result.describe() == result.start_error


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a disk that is always full)")
def test_a_full_disk_stops_the_log_but_not_the_process(tmp_path: Path) -> None:
    seen: list[str] = []
    argv = script(tmp_path, "for i in range(5000): print(f'line {i} ' + 'x' * 60)\nprint('end', file=sys.stderr)")
    result = run_process(
        argv, cwd=tmp_path, stdout_path=Path("/dev/full"), on_stdout_line=seen.append, capture=True, timeout=60
    )
    assert (result.exit_code, result.timed_out) == (0, False)  # the pipe was drained to the end
    assert len(seen) == 5000
    assert result.stdout_tail.splitlines()[-1].startswith("line 4999 ")
    assert result.text.count("\n") == 5000
    assert result.output_error == "could not write /dev/full: No space left on device; the rest was not saved"
    assert result.stderr_tail.splitlines() == ["end", f"loope: {result.output_error}"]


def test_a_failing_on_spawn_kills_the_group_and_is_raised(tmp_path: Path) -> None:
    spawned: list[int] = []

    def refuse(pgid: int) -> None:
        spawned.append(pgid)
        raise RuntimeError("cannot record the pid")

    with pytest.raises(RuntimeError, match="cannot record the pid"):
        run_process(script(tmp_path, "print('up', flush=True)\ntime.sleep(120)"), cwd=tmp_path, on_spawn=refuse)
    assert len(spawned) == 1
    assert gone(spawned[0]), "the process outlived its failed on_spawn"
    assert alive_in_group(spawned[0]) == []


def _thread_errors(monkeypatch: pytest.MonkeyPatch) -> list[BaseException | None]:
    """Exceptions that end a thread (the drain threads of run_process), collected instead of printed."""
    errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    return errors


def _wait_for_threads(count: int) -> None:
    deadline = time.monotonic() + 60
    while threading.active_count() > count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= count, "run_process left a thread running"


def test_ctrl_c_kills_the_group_and_closes_the_log_only_once_nothing_writes_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors = _thread_errors(monkeypatch)
    before = threading.active_count()
    spawned: list[int] = []

    def slow_reader(line: str) -> None:
        if line.startswith("line 0 "):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, while the pipe is full of unread lines
        time.sleep(0.001)

    body = "for i in range(20000): print(f'line {i} ' + 'x' * 40)\nsys.stdout.flush()\ntime.sleep(120)"
    with pytest.raises(KeyboardInterrupt):
        run_process(
            script(tmp_path, body),
            cwd=tmp_path,
            stdout_path=tmp_path / "out.log",
            on_stdout_line=slow_reader,
            on_spawn=spawned.append,
        )
    assert gone(spawned[0])
    _wait_for_threads(before)
    assert errors == []  # no drain thread wrote to (or flushed) a closed log
    assert (tmp_path / "out.log").read_text().startswith("line 0 ")


def test_a_grandchild_that_left_the_group_cannot_hold_up_or_break_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proc, "DRAIN_S", 0.5)  # only to give up on the held pipe sooner than 10 s
    errors = _thread_errors(monkeypatch)
    before = threading.active_count()
    release, pid_file = tmp_path / "release", tmp_path / "escaped"
    escaper = f"""
    import os, pathlib, sys, time
    while not pathlib.Path({str(release)!r}).exists():
        time.sleep(0.05)
    print("late line", flush=True)
    """
    body = f"""
    escaped = subprocess.Popen([sys.executable, "-c", {textwrap.dedent(escaper)!r}], start_new_session=True)
    pathlib.Path({str(pid_file)!r}).write_text(str(escaped.pid))
    print("child done", flush=True)
    """
    try:
        result = run_process(script(tmp_path, body), cwd=tmp_path, stdout_path=tmp_path / "out.log", capture=True)
        assert result.exit_code == 0
        assert result.stdout_tail == "child done"
        assert result.text == "child done\n"
    finally:
        release.touch()  # the escaped grandchild now writes to the pipe run_process no longer reads for anyone
    assert gone(int(pid_file.read_text()))
    _wait_for_threads(before)
    assert errors == []
    assert (tmp_path / "out.log").read_text() == "child done\n"


def test_spawn_detached_starts_a_process_that_outlives_its_starter(tmp_path: Path) -> None:
    log = tmp_path / "runner.log"
    log.write_text("earlier\n")
    body = """
    print(os.getsid(0) == os.getpid(), repr(sys.stdin.read()), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    """
    pid = spawn_detached(script(tmp_path, body), cwd=tmp_path, log_path=log)
    assert gone(pid)
    assert log.read_text() == "earlier\nTrue ''\nto stderr\n"  # appended; its own session; stdin /dev/null


def test_spawn_detached_that_cannot_start_says_so_on_one_line(tmp_path: Path) -> None:
    with pytest.raises(LoopeError) as refused:
        spawn_detached([str(tmp_path / "no-python")], cwd=tmp_path, log_path=tmp_path / "runner.log")
    assert str(refused.value) == f"cannot start a background process: command not found: {tmp_path / 'no-python'}"
    with pytest.raises(LoopeError, match=r"cannot open .*missing/runner.log for "):
        spawn_detached([PY, "-c", "pass"], cwd=tmp_path, log_path=tmp_path / "missing" / "runner.log")
