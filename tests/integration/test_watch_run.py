"""Seeing what a run does and why: plain lines that explain, `logs [-f]`, `status` and `show` of a running run.

Real runs: scripted exec: agents, real git, real pytest as the gate; followers are real processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import GATE, PYTHON, one_error_line
from tests.integration.test_control import DONE, loope, marks, runners, wait_for, waiting
from tests.integration.test_metric_mode import METRIC, scored

__all__ = ["marks", "runners", "scored"]  # fixtures used here

MANY_TESTS = """\
import pytest
from calc import add


@pytest.mark.parametrize("n", range(33))
def test_add(n):
    assert add(n, 1) == n + 1
"""

# Iteration 1 fixes 21 of the 33 cases, iteration 2 the rest.
PARTIAL_FIX = """
n = int(os.environ["LOOPE_ITERATION"])
body = "return a + b if a < 21 else a - b" if n == 1 else "return a + b"
pathlib.Path("calc.py").write_text(f"def add(a, b):\\n    {body}\\n")
print(json.dumps({"type": "action", "action": "edit", "target": "calc.py"}))
print(f"attempt {n}: add fixed for small numbers" if n == 1 else "add fixed for all numbers")
"""

PASS_REVIEW = "print('add() returns the sum.')\nprint('VERDICT: PASS')\n"
BLOCK_REVIEW = (
    "print('add() has no docstring: the public API must say what it returns.')\n"
    "print('Negative numbers are untested.')\n"
    "print('VERDICT: BLOCK')\n"
)


@pytest.fixture
def many(project):  # type: ignore[no-untyped-def]
    project.write("tests/test_calc.py", MANY_TESTS)
    project.commit("33 cases")
    return project


def test_plain_lines_say_why_each_iteration_failed(many, agent_script, cli):
    args = [
        "run", "fix add", "--implementer", agent_script(PARTIAL_FIX),
        "--reviewer", agent_script(PASS_REVIEW), "--reviewer", agent_script(BLOCK_REVIEW),
        "--verify-cmd", GATE, "--max-iters", "2", "--max-cost", "1", "--plain",
    ]  # fmt: skip
    result = cli(*args, cwd=many.path)
    assert result.exit_code == 1, result.err
    out = result.out
    # The gate: the runner's own count (not a capped number of parsed failures), and the first ids.
    assert "[02] verifier gate  failed (exit 1)" in out
    assert ": failing 12\n" in out
    assert "     12 failed, 21 passed in " in out
    assert "✗ tests/test_calc.py::test_add[21] — assert 20 == (21 + 1)" in out
    assert "  … and 9 more" in out
    # Iteration 2: fewer failing is not enough, its gate passes; the reviewers share an adapter.
    assert "[04] verifier gate  passed" in out
    assert "(was failing 12)" in out
    assert "reviewer exec #1: PASS" in out
    assert "reviewer exec #2: BLOCK" in out
    assert "│ add() has no docstring: the public API must say what it returns." in out
    assert "│ Negative numbers are untested." in out
    assert "» attempt 1: add fixed for small numbers" in out
    assert "iteration 2/2 · " in out
    assert " of $1.00 · " in out
    assert out.rstrip().splitlines()[-1].startswith("next: loope ")
    assert "stopped after 2 iterations (max_iters)" in out

    # `loope logs` tells it the same way, from the file.
    run_id = many.run_json()["run_id"]
    replay = cli("logs", run_id[:4], "--plain", cwd=many.path)
    assert replay.exit_code == 0, replay.err
    assert replay.out == out


def test_failing_down_from_33_to_12_and_the_count_agrees_with_pytest(many, agent_script, cli):
    body = """
    n = int(os.environ["LOOPE_ITERATION"])
    limit = {1: 0, 2: 21}[n]
    pathlib.Path("calc.py").write_text(f"def add(a, b):\\n    return a + b if a < {limit} else a - b\\n")
    print(f"attempt {n}")
    """
    result = cli(
        "run", "fix add", "--implementer", agent_script(body), "--no-review", "--verify-cmd", GATE,
        "--max-iters", "2", "--stall-after", "5", "--plain", cwd=many.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.err
    assert ": failing 33\n" in result.out
    assert ": failing 33 → 12\n" in result.out
    assert "     12 failed, 21 passed in " in result.out
    assert "✗ tests/test_calc.py::test_add[21] — assert 20 == (21 + 1)" in result.out
    events = [json.loads(line) for line in (many.runs()[-1] / "events.jsonl").read_text().splitlines()]
    gates = [e for e in events if e["type"] == "verify_finished"]
    assert [g["failing"] for g in gates] == [33, 12]
    assert [g["summary"].split(" in ")[0] for g in gates] == ["33 failed", "12 failed, 21 passed"]


def test_a_gate_that_fails_without_tests_shows_its_last_lines(project, agent_script, cli):
    gate = f"{PYTHON} -c \"import sys; print('lint: calc.py:1: line too long'); sys.exit(3)\""
    result = cli(
        "run", "fix", "--implementer", agent_script("print('nothing to do')"), "--no-review",
        "--verify-cmd", gate, "--max-iters", "1", "--plain", cwd=project.path,
    )  # fmt: skip
    assert "[02] verifier gate  failed (exit 3)" in result.out
    assert "     | lint: calc.py:1: line too long" in result.out


def test_a_metric_search_shows_each_attempt_kept_or_reverted_with_a_sparkline(scored, agent_script, cli):
    proj = scored
    body = """
    scores = {1: 8, 2: 9, 3: 5}
    n = int(os.environ["LOOPE_ITERATION"])
    pathlib.Path("solution.py").write_text(f"SCORE = {scores[n]}\\n")
    """
    result = cli(
        "run", "lower the score", "--implementer", agent_script(body), "--no-review",
        "--metric-cmd", METRIC, "--direction", "lower", "--editable", "solution.py", "--target", "1",
        "--max-iters", "3", "--patience", "5", "--plain", cwd=proj.path,
    )  # fmt: skip
    out = result.out
    assert "     baseline 10" in out
    assert "attempt 1: score 8, kept · best 8 · baseline 10" in out
    assert "attempt 2: score 9, reverted · best 8 · baseline 10 · " in out
    assert "attempt 3: score 5, kept · best 5 · baseline 10 · " in out
    spark = out.split("attempt 3: score 5, kept · best 5 · baseline 10 · ")[1].split("\n")[0]
    assert len(spark) == 3
    assert spark[0] not in (spark[1], spark[2])  # 8, 9, 5: three different heights


def test_detach_says_how_to_follow_and_logs_f_follows_to_the_end(project, agent_script, marks, runners):
    gate_script = project.path.parent / "gate.py"
    gate_script.write_text(
        textwrap.dedent(
            f"""
            import pathlib, sys, time
            print("gate: checking calc.py", flush=True)
            marks = pathlib.Path({str(marks)!r})
            (marks / "gate-started").touch()
            deadline = time.monotonic() + 120
            while not (marks / "gate-release").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            print("gate: all good", flush=True)
            """
        )
    )
    body = waiting(marks, at=1, then=DONE + "print(json.dumps({'type': 'message', 'text': 'wrote notes'}))")
    detach = loope(
        project.path, "run", "write notes", "--implementer", agent_script(body), "--no-review",
        "--verify-cmd", f"{PYTHON} {gate_script}", "--no-baseline", "--max-iters", "2", "--detach",
        "--sandbox-writable", str(marks),
    )  # fmt: skip
    assert detach.returncode == 0, detach.stderr
    run_id = detach.stdout.strip()
    short = run_id.split("-")[0]
    assert f"follow: loope logs {short} -f" in detach.stderr
    out_path = project.path.parent / "follower.out"
    with out_path.open("wb") as sink:
        follower = subprocess.Popen(
            [sys.executable, "-m", "loope", "logs", short, "-f", "--plain"],
            cwd=project.path,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for((marks / "started-1").exists, "iteration 1 to start")
        wait_for(lambda: "[01] implementer exec …" in out_path.read_text(), "the follower to show the step")
        assert follower.poll() is None
        (marks / "release").touch()
        wait_for((marks / "gate-started").exists, "the gate to start")
        wait_for(lambda: "| gate: checking calc.py" in out_path.read_text(), "the gate's output as it arrives")
        assert "verifier gate  passed" not in out_path.read_text()
        (marks / "gate-release").touch()
        follower.wait(timeout=120)
    finally:
        (marks / "release").touch()
        (marks / "gate-release").touch()
        if follower.poll() is None:
            follower.kill()
    out = out_path.read_text()
    assert follower.returncode == 0, out
    assert "» wrote notes" in out
    assert "[02] verifier gate  passed" in out
    assert "converged in 1 iteration" in out
    assert out.rstrip().splitlines()[-1] == f"next: loope show {short} --diff, then loope apply {short}"


def test_logs_f_ends_when_the_runner_dies(project, agent_script, marks, runners):
    runner = runners.start("run", "count", "--implementer", agent_script(waiting(marks)), "--no-review", "--plain")
    wait_for((marks / "started-1").exists, "iteration 1 to start")
    run_id = project.runs()[-1].name
    follower = subprocess.Popen(
        [sys.executable, "-m", "loope", "logs", run_id, "-f", "--plain"],
        cwd=project.path,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()  # reaped, as its shell would
        out, _ = follower.communicate(timeout=120)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0
    assert "[01] implementer exec …" in out


def test_status_shows_the_step_in_flight_and_show_what_changed_so_far(project, agent_script, marks, runners):
    body = f"""
    n = int(os.environ["LOOPE_ITERATION"])
    if n == 1:
        pathlib.Path("notes.txt").write_text("one\\n")
        sys.exit(0)
    print(json.dumps({{"type": "action", "action": "command", "target": "pytest -q"}}), flush=True)
    print(json.dumps({{"type": "message", "text": "checking the tests\\nnow waiting"}}), flush=True)
    {waiting(marks, at=2).strip().replace(chr(10), chr(10) + "    ")}
    """
    runners.start("run", "notes", "--implementer", agent_script(body), "--no-review", "--max-iters", "3", "--plain")
    wait_for((marks / "started-2").exists, "iteration 2 to start")
    run_id = project.runs()[-1].name
    try:
        wait_for(lambda: "now waiting" in loope(project.path, "status", run_id).stdout, "status to show the message")
        human = loope(project.path, "status", run_id).stdout
        assert "  now: [02] implementer exec · " in human
        assert "    ▸ run pytest -q · now waiting" in human
        assert "  elapsed " in human
        info = json.loads(loope(project.path, "status", run_id, "--json").stdout)
        (step,) = info["activity"]["steps"]
        assert (step["label"], step["last_action"], step["last_message"]) == (
            "[02] implementer exec",
            "▸ run pytest -q",
            "now waiting",
        )
        shown = loope(project.path, "show", run_id).stdout
        assert "| notes.txt | added | 1 | 0 |" in shown
        assert "No files changed" not in shown
        assert "+one" in loope(project.path, "show", run_id, "--diff").stdout
    finally:
        (marks / "release").touch()


def test_show_step_prints_its_prompt_result_and_transcript(project, agent_script, cli):
    body = "print(json.dumps({'type': 'action', 'action': 'read', 'target': 'calc.py'}))\nprint('looked at calc.py')"
    cli("run", "look", "--implementer", agent_script(body), "--no-review", "--max-iters", "1", cwd=project.path)
    run_id = project.run_json()["run_id"]
    step = cli("show", run_id, "--step", "1", cwd=project.path)
    assert step.exit_code == 0, step.err
    assert step.out.startswith("# step 01-implementer-exec\n")
    assert "## prompt\n\n" in step.out
    assert "look" in step.out.split("## prompt")[1]
    assert "## result\n\nlooked at calc.py" in step.out
    assert '"target": "calc.py"' in step.out.split("## events.jsonl")[1]
    missing = cli("show", run_id, "--step", "9", cwd=project.path)
    assert missing.exit_code == 2
    assert "has no step 9; its steps: 01" in one_error_line(missing.err)
