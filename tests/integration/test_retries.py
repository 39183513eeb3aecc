"""Transient failures retried, usage limits waited out: exec: agents speaking the protocol's retry and limit lines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loope.agents.setback import parse_reset
from tests.conftest import APPROVE, FIX, GATE, gone, reporting_to

FAST = "retry_delay = 0.01\n"


@pytest.fixture
def cli(cli, tmp_path):  # type: ignore[no-untyped-def]
    """The agents count their calls in a file beside the project, which the sandbox lets them write."""
    return reporting_to(cli, tmp_path)


def flaky(counter: Path, fail_times: int, failure: str, then: str = FIX) -> str:
    """An agent body that fails ``fail_times`` times with ``failure`` (Python that exits), then runs ``then``.

    Each call records its start time in ``counter`` (one line a call), outside the workspace.
    """
    return (
        f"log = pathlib.Path({str(counter)!r})\n"
        "import time\n"
        "calls = log.read_text().splitlines() if log.exists() else []\n"
        "log.write_text(''.join(c + '\\n' for c in calls + [repr(time.time())]))\n"
        "print(json.dumps({'type': 'usage', 'input_tokens': 10, 'output_tokens': 5, 'cost_usd': 0.01}))\n"
        f"if len(calls) < {fail_times}:\n" + "".join(f"    {line}\n" for line in failure.splitlines()) + then
    )


RETRY = "print(json.dumps({'type': 'retry', 'reason': 'HTTP 529 overloaded'}))\nsys.exit(1)"


def limit_in(seconds: float) -> str:
    return (
        f"reset = time.time() + {seconds}\n"
        "from datetime import datetime, timezone\n"
        "print(json.dumps({'type': 'limit', 'reset_at': datetime.fromtimestamp(reset, timezone.utc).isoformat()}))\n"
        "sys.exit(1)"
    )


def events_of(rundir: Path) -> list[dict]:
    return [json.loads(line) for line in (rundir / "events.jsonl").read_text().splitlines()]


def calls(counter: Path) -> list[float]:
    return [float(line) for line in counter.read_text().splitlines()]


def test_a_transient_failure_is_retried_within_the_same_step(project, agent_script, cli, tmp_path):
    project.write("loope.toml", FAST)
    counter = tmp_path / "calls"
    result = cli(
        "run", "fix add", "--implementer", agent_script(flaky(counter, 1, RETRY)),
        "--reviewer", agent_script(APPROVE), "--verify-cmd", GATE, cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert run["iterations"] == 1
    assert run["stop_reason"] == "converged"
    (impl,) = [s for s in run["steps"] if s["role"] == "implementer"]
    assert impl["attempts"] == 2
    assert impl["ok"]
    assert len(calls(counter)) == 2
    step = project.runs()[-1] / impl["dir"]
    assert "HTTP 529 overloaded" in (step / "attempts" / "1" / "transcript.log").read_text()
    (line,) = [json.loads(x) for x in (step / "attempts.jsonl").read_text().splitlines()]
    assert line["attempt"] == 1
    assert line["kind"] == "transient"
    assert line["cost_usd"] == 0.01
    assert "fixed add" in (step / "transcript.log").read_text()
    # Both attempts' cost counts: 0.01 each.
    assert impl["cost_usd"] == 0.02
    assert impl["input_tokens"] == 20
    types = [e["type"] for e in events_of(project.runs()[-1])]
    assert types.index("step_retry") < types.index("step_finished")
    assert types.count("iteration_started") == 1


def test_a_persistent_failure_ends_as_step_failed_after_the_retries(project, agent_script, cli, tmp_path):
    project.write("loope.toml", FAST)
    counter = tmp_path / "calls"
    result = cli(
        "run", "fix add", "--implementer", agent_script(flaky(counter, 99, RETRY)), "--no-review",
        "--verify-cmd", GATE, "--retries", "2", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    run = project.run_json()
    assert run["stop_reason"] == "step_failed"
    assert "after 3 attempts" in run["stop_detail"]
    assert len(calls(counter)) == 3
    assert run["steps"][0]["attempts"] == 3
    assert run["totals"]["cost_usd"] == 0.03


def test_a_failure_without_the_retry_line_is_not_retried(project, agent_script, cli, tmp_path):
    counter = tmp_path / "calls"
    failing = "print('API Error: 529 overloaded')\nsys.exit(1)"  # exec: agents are never guessed at
    result = cli(
        "run", "fix add", "--implementer", agent_script(flaky(counter, 99, failing)), "--no-review",
        "--verify-cmd", GATE, cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    assert project.run_json()["stop_reason"] == "step_failed"
    assert len(calls(counter)) == 1


def test_a_usage_limit_is_waited_out_then_the_step_runs_again(project, agent_script, cli, tmp_path):
    counter = tmp_path / "calls"
    result = cli(
        "run", "fix add", "--implementer", agent_script(flaky(counter, 1, limit_in(2))),
        "--no-review", "--verify-cmd", GATE, "--retries", "0", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert run["stop_reason"] == "converged"
    assert run["iterations"] == 1
    assert run["waiting"] is None
    events = events_of(project.runs()[-1])
    types = [e["type"] for e in events]
    (wait,) = [e for e in events if e["type"] == "limit_wait"]
    assert types.index("limit_wait") < types.index("step_finished")
    reset = parse_reset(wait["reset_at"])
    assert reset is not None
    first, second = calls(counter)
    assert first < reset <= second  # the second attempt started only once the limit had reset
    assert run["totals"]["cost_usd"] == 0.02


def test_no_wait_stops_at_a_usage_limit_with_its_reset_time(project, agent_script, cli, tmp_path):
    counter = tmp_path / "calls"
    result = cli(
        "run", "fix add", "--implementer", agent_script(flaky(counter, 1, limit_in(3600))),
        "--no-review", "--verify-cmd", GATE, "--no-wait", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    run = project.run_json()
    assert run["stop_reason"] == "usage_limited"
    line = json.loads(
        (project.runs()[-1] / "agents" / "01-implementer-exec" / "transcript.log").read_text().split("\n")[1]
    )
    reset = (
        datetime.fromisoformat(line["reset_at"]).astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )
    assert f"resets at {reset}" in run["stop_detail"]
    assert len(calls(counter)) == 1


def _start(project, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "loope", "run", *args, "--plain", "--sandbox-writable", str(project.path.parent)],
        cwd=project.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _wait_for_waiting(project, proc: subprocess.Popen[str]) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        runs = project.runs()
        if runs and (runs[-1] / "run.json").exists():
            run = json.loads((runs[-1] / "run.json").read_text())
            if run.get("waiting"):
                return run
        time.sleep(0.05)
    raise AssertionError("the run never started waiting")


def test_stop_ends_a_wait_at_once_and_status_says_until_when(project, agent_script, cli, tmp_path):
    counter = tmp_path / "calls"
    impl = agent_script(flaky(counter, 1, limit_in(3600)))
    proc = _start(project, "fix add", "--implementer", impl, "--no-review", "--verify-cmd", GATE)
    try:
        run = _wait_for_waiting(project, proc)
        status = cli("status", run["run_id"], cwd=project.path)
        assert "waiting for the usage limit until " in status.out
        assert cli("stop", run["run_id"], cwd=project.path).exit_code == 0
        proc.wait(timeout=60)  # a hang guard: an hour-long wait must end with the stop
    finally:
        proc.kill()
        proc.wait()
    run = project.run_json()
    assert run["stop_reason"] == "stopped"
    assert "while waiting for the usage limit" in run["stop_detail"]
    assert len(calls(counter)) == 1


def test_a_runner_killed_while_waiting_waits_again_when_resumed(project, agent_script, cli, tmp_path):
    counter = tmp_path / "calls"
    impl = agent_script(flaky(counter, 1, limit_in(20)))  # far enough for a resume on a loaded machine
    proc = _start(project, "fix add", "--implementer", impl, "--no-review", "--verify-cmd", GATE, "--retries", "0")
    try:
        run = _wait_for_waiting(project, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        proc.kill()
        proc.wait()
    assert gone(proc.pid)
    reset = parse_reset(run["waiting"]["reset_at"])
    assert reset is not None
    resumed = time.time()
    result = cli("resume", run["run_id"], "--plain", cwd=project.path)
    assert result.exit_code == 0, result.out + result.err
    final = project.run_json()
    assert final["stop_reason"] == "converged"
    assert final["waiting"] is None
    first, second = calls(counter)
    assert first < reset <= second
    waits = [e for e in events_of(project.runs()[-1]) if e["type"] == "limit_wait"]
    # The first runner's wait, then the resumed runner's; a machine so loaded that the resume began after the
    # reset time has nothing left to wait for.
    assert len(waits) == (2 if resumed < reset else 1)


def test_status_says_a_step_is_retrying_and_stop_ends_the_backoff(project, agent_script, cli, tmp_path):
    project.write("loope.toml", "retry_delay = 3600\n")  # a backoff of minutes: only the stop can end it
    counter = tmp_path / "calls"
    proc = _start(project, "fix add", "--implementer", agent_script(flaky(counter, 1, RETRY)), "--no-review")
    try:
        run = _wait_for_waiting(project, proc)
        assert run["waiting"]["kind"] == "retry"
        status = cli("status", run["run_id"], cwd=project.path)
        assert "retrying after a transient failure at " in status.out
        assert "HTTP 529 overloaded" in status.out
        assert cli("stop", run["run_id"], cwd=project.path).exit_code == 0
        proc.wait(timeout=60)  # a hang guard: the backoff must end with the stop
    finally:
        proc.kill()
        proc.wait()
    final = project.run_json()
    assert final["stop_reason"] == "stopped"
    assert "while waiting for a retry" in final["stop_detail"]
    assert final["waiting"] is None
    assert len(calls(counter)) == 1
