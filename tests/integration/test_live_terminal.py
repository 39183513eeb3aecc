"""The live view as a person sees it: a real run on a pseudo-terminal, drawn by a terminal emulator (pyte).

The run has a failing gate, a blocking reviewer and a metric search; at 80 and 160 columns the screen
must show why each attempt failed, and the redrawn header must never wrap.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pyte
import pytest

from tests.conftest import GATE
from tests.integration.test_metric_mode import METRIC, scored

__all__ = ["scored"]  # a fixture used here

DEADLINE_S = 120.0
ROWS = 300  # tall enough that nothing scrolls away: the whole run stays on the screen

SOLUTION_TESTS = """\
import solution


def test_score_is_positive():
    assert solution.SCORE > 0, f"SCORE is {solution.SCORE}"
"""

# Attempt 1 breaks the gate, attempt 2 is blocked by the reviewer, 3 improves, 4 waits for the test.
IMPLEMENTER = """
import time
n = int(os.environ["LOOPE_ITERATION"])
scores = {1: -1, 2: 7, 3: 6, 4: 5}
pathlib.Path("solution.py").write_text(f"SCORE = {scores[n]}\\n")
print(json.dumps({"type": "action", "action": "edit", "target": "solution.py"}), flush=True)
print(json.dumps({"type": "message", "text": f"attempt {n}: SCORE = {scores[n]}"}), flush=True)
if n == 4:
    marks = pathlib.Path(MARKS)
    (marks / "started").touch()
    deadline = time.monotonic() + 120
    while not (marks / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
"""

REVIEWER = """
n = int(os.environ["LOOPE_ITERATION"])
if n == 2:
    print("solution.py hard-codes the score: compute it instead.")
    print("VERDICT: BLOCK")
else:
    print("VERDICT: PASS")
"""

GOAL = (
    "lower the score of solution.py while its tests keep passing, without hard-coding anything at all,"
    " and keep the measuring script untouched: a goal longer than the widest terminal tested here"
)


class Terminal:
    """A process on a pseudo-terminal of ``columns`` x ROWS, and the screen a terminal emulator draws from it."""

    def __init__(self, argv: list[str], cwd: Path, columns: int) -> None:
        self.screen = pyte.Screen(columns, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, columns, 0, 0))
        env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}
        env["TERM"] = "xterm-256color"
        self.proc = subprocess.Popen(argv, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=env)
        os.close(slave)
        self.master = master

    def pump(self, timeout: float = 0.1) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if ready:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # the other side closed
                return
            self.stream.feed(data)

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    def text(self) -> str:
        return "\n".join(self.lines())

    def wait_for(self, condition: Callable[[], object], what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            if time.monotonic() > deadline:
                pytest.fail(f"waited {DEADLINE_S:.0f}s for {what}; the screen:\n{self.text()}")
            self.pump()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        os.close(self.master)


def settled(lines: list[str]) -> int | None:
    """Where the header is, once the screen shows it whole: one header, then the iteration, then the step.

    A header that wrapped would push the iteration line down and never satisfy this; a redraw that
    left an old header behind would show two.
    """
    headers = [i for i, line in enumerate(lines) if line.startswith("loope 0001-lower-the-score")]
    if len(headers) != 1 or headers[0] + 3 >= len(lines):
        return None
    at = headers[0]
    ok = (
        lines[at + 1].startswith("iteration 4/4 ")
        and "[13] implementer exec" in lines[at + 2]
        and "✎ edit solution.py · attempt 4: SCORE = 5" in lines[at + 3]
    )
    return at if ok else None


@pytest.mark.parametrize("columns", [80, 160])
def test_the_live_view_shows_why_and_never_wraps_its_header(scored, agent_script, tmp_path, columns):
    scored.write("tests/test_solution.py", SOLUTION_TESTS)
    scored.commit("a score must be positive")
    marks = tmp_path / "marks"
    marks.mkdir()
    implementer = agent_script(f"MARKS = {str(marks)!r}\n" + IMPLEMENTER)
    argv = [
        sys.executable, "-m", "loope", "run", GOAL, "--implementer", implementer, "--reviewer", agent_script(REVIEWER),
        "--verify-cmd", GATE, "--metric-cmd", METRIC, "--direction", "lower", "--editable", "solution.py",
        "--target", "1", "--max-iters", "4", "--patience", "5", "--stall-after", "5", "--max-cost", "2",
        "--sandbox-writable", str(marks),
    ]  # fmt: skip
    term = Terminal(argv, scored.path, columns)
    try:
        term.wait_for((marks / "started").exists, "attempt 4 to start")
        term.wait_for(lambda: settled(term.lines()), "the header and the step in flight, drawn once, unwrapped")
        during = term.lines()
        header = settled(during)
        assert header is not None
        full = f"loope 0001-lower-the-score-of-solution-py · {GOAL}"
        assert len(full) > columns
        assert during[header].endswith("…")
        assert full.startswith(during[header][:-1])
        assert len(during[header]) <= columns
        assert " of $2.00 · " in during[header + 1]
        shown = term.text()
        # Why attempt 1 failed: the gate, its count, the failing test and its assertion.
        assert "[04] verifier gate  failed (exit 1)" in shown
        assert "failing 1" in shown
        assert "✗ tests/test_solution.py::test_score_is_positive" in shown
        # Why attempt 2 was reverted: the reviewer's finding.
        assert "[08] reviewer exec: BLOCK" in shown
        assert "│ solution.py hard-codes the score: compute it instead." in shown
        # The search so far.
        assert "baseline 10" in shown
        assert "attempt 3: score 6, kept · best 6 · baseline 10 · " in shown
        (marks / "release").touch()
        term.wait_for(lambda: term.proc.poll() is not None, "the run to end")
        for _ in range(20):
            term.pump(0.05)
        after = term.text()
        assert "stopped after 4 iterations (max_iters)" in after
        assert "best score 5 (baseline 10)" in after
        assert "next: loope show 0001 --diff, then loope apply 0001" in after
        assert not any(line.startswith("loope 0001-lower") for line in term.lines())  # the header is gone
    finally:
        (marks / "release").touch()
        term.close()
