"""Running the user's check commands (gate, metric, success) in the workspace."""

from __future__ import annotations

import contextlib
import os
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

from loope.proc import ProcResult, run_process
from loope.record import record
from loope.records.atomic import append_line
from loope.sandbox import UNSANDBOXED, RunSandbox
from loope.verify.failures import parse_failures
from loope.verify.report import MAX_FAILURES, GateReport, tail
from loope.verify.summary import runner_summary

OUTPUT_SCAN_BYTES = 1_000_000
COUNT_LIMIT = 100_000  # failures parsed to count them when the runner printed no summary
PARSE_ERRORS = "parse-errors.log"
"""In the gate step's directory: the traceback of a failure parser that broke on its output."""


def check_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment checks run in: the user's, without loope's own LOOPE_* variables.

    A check writes no Python bytecode into the tree: a ``.pyc`` is trusted by its source's mtime (to
    the second) and size, so one a check left would be run in place of a file the agent rewrote in that
    second to the same size (``a - b`` to ``a + b``), and the next check would judge the old code.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPE_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


def run_shell(
    command: str,
    *,
    cwd: Path,
    log: Path,
    timeout: float | None,
    cancel: threading.Event | None = None,
    env: dict[str, str] | None = None,
    sandbox: RunSandbox = UNSANDBOXED,
) -> ProcResult:
    """``command`` through the shell, stdout and stderr interleaved into ``log``, in a box of ``sandbox``.

    The process group id goes to ``<log dir>/process.pid`` so a resumed run can kill it if its
    runner died while the command ran.
    """
    return run_process(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=env if env is not None else check_env(),
        timeout=timeout,
        stdout_path=log,
        cancel=cancel,
        merge_stderr=True,
        term_grace_s=5.0,
        on_spawn=pid_recorder(log.parent),
        confine=sandbox.check(command, cwd),
    )


def pid_recorder(step_dir: Path) -> Callable[[int], None]:
    """A callback that notes a step's process group in ``step_dir/process.pid``."""

    def record(pgid: int) -> None:
        # A step that moved its own run directory away at once leaves no directory to note it in
        # (and nothing of the step's own in its place is written into); the run's anchor ends the run.
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            (step_dir / "process.pid").write_text(f"{pgid}\n")

    return record


@record(frozen=True)
class GateResult:
    command: str
    proc: ProcResult
    output: str
    """The end of the output (up to a megabyte), enough to find the failures."""
    failures: tuple[tuple[str, str], ...]
    """The first failing checks (test id, assertion line)."""
    failing: int = 0
    """How many checks failed: the runner's own count, else how many were parsed."""
    summary: str = ""
    """The runner's closing summary line, when it printed one."""

    @property
    def passed(self) -> bool:
        return self.proc.ok

    def report(self) -> GateReport:
        return GateReport(
            command=self.command,
            passed=self.passed,
            exit_code=self.proc.exit_code,
            failures=self.failures,
            output=tail(self.output),
            timed_out=self.proc.timed_out,
            failing=self.failing,
        )


def read_output(log: Path) -> str:
    if not log.exists():
        return ""
    with log.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - OUTPUT_SCAN_BYTES))
        return handle.read().decode("utf-8", "replace")


def run_gate(
    command: str,
    *,
    cwd: Path,
    log: Path,
    timeout: float | None,
    cancel: threading.Event | None = None,
    env: dict[str, str] | None = None,
    sandbox: RunSandbox = UNSANDBOXED,
) -> GateResult:
    """Run the gate once; pass/fail with the failing checks parsed from its output."""

    proc = run_shell(command, cwd=cwd, log=log, timeout=timeout, cancel=cancel, env=env, sandbox=sandbox)
    output = read_output(log)
    if proc.start_error:
        output = proc.start_error

    def dropped(runner: str, exc: Exception) -> None:
        trace = "".join(traceback.format_exception(exc))
        append_line(log.parent / PARSE_ERRORS, f"the {runner} output parser failed and was skipped:\n{trace}")

    if proc.ok:
        return GateResult(command, proc, output, ())
    parsed = parse_failures(output, limit=COUNT_LIMIT, on_error=dropped)
    failures = tuple((f.test, f.message) for f in parsed[:MAX_FAILURES])
    summary = runner_summary(output)
    failing = summary.failing if summary else len(parsed)
    return GateResult(command, proc, output, failures, failing, summary.line if summary else "")
