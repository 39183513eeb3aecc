"""Controlling runs from other processes: detach, status, stop, stop --now, resume after a killed runner."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from loope.engine.run import RunnerLock
from loope.runners import process_alive, runner_alive, runner_pid
from tests.conftest import GATE, alive_in_group, gone, one_error_line, pid_alive, run_file, run_state
from tests.helpers import eventually

DEADLINE_S = 120.0


def wait_for(condition: Callable[[], object], what: str, within_s: float = DEADLINE_S) -> None:
    """Wait until ``condition()`` is true; fail (saying what never happened) after a generous deadline."""
    if not eventually(condition, within_s):
        pytest.fail(f"waited {within_s:.0f}s: {what}")


def loope(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``loope ARGS`` as a real process, to its end."""
    argv = [sys.executable, "-m", "loope", *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=DEADLINE_S * 2, check=False)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def finished(rundir: Path) -> bool:
    try:
        return read_json(rundir / "run.json")["status"] != "running"
    except (OSError, ValueError):
        return False


class Runners:
    """Runners started by a test, and the cleanup that ends whatever of them a failing test leaves behind."""

    def __init__(self, project) -> None:  # type: ignore[no-untyped-def]
        self.project = project
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        """``loope ARGS`` in the background (a runner in the foreground of its own terminal, as it were).

        A run is unsandboxed: these agents talk to the test through files outside the workspace
        (and report their pids), which is what the sandbox forbids.
        """
        if args[:1] == ("run",):
            args = (*args, "--sandbox", "off")
        log = (self.project.path.parent / f"runner-{len(self.procs)}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "loope", *args], cwd=self.project.path, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        self.procs.append(proc)
        return proc

    def log(self, index: int = 0) -> str:
        return (self.project.path.parent / f"runner-{index}.log").read_text()

    def cleanup(self) -> None:
        """End what a failed test left running: its runners, and the agents of runs still marked running."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for rundir in self.project.runs():
            with contextlib.suppress(OSError, ValueError):
                record = read_json(rundir / "run.json")
                if record.get("status") != "running":
                    continue  # its runner finished, and killed its steps itself
                pid = record.get("pid")
                if isinstance(pid, int) and pid != os.getpid() and _is_loope(pid):
                    os.kill(pid, signal.SIGKILL)  # a detached runner
                for pid_file in (rundir / "agents").rglob("process.pid"):
                    with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
                        os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)


def _is_loope(pid: int) -> bool:
    """Whether ``pid`` is (still) a loope process, not another one that reused its number."""
    try:
        return b"loope" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@pytest.fixture
def runners(project) -> Iterator[Runners]:  # type: ignore[no-untyped-def]
    started = Runners(project)
    yield started
    started.cleanup()


def waiting(marks: Path, *, at: int = 1, then: str = "") -> str:
    """An agent body: in iteration ``at`` it writes ``marks/started-N`` and waits for ``marks/release``."""
    return f"""
import time
marks = pathlib.Path({str(marks)!r})
n = int(os.environ["LOOPE_ITERATION"])
if n == {at}:
    (marks / f"started-{{n}}").write_text(str(os.getpid()))
    deadline = time.monotonic() + {DEADLINE_S}
    while not (marks / "release").exists():
        if time.monotonic() > deadline:
            print("never released", file=sys.stderr)
            sys.exit(1)
        time.sleep(0.05)
{then}
"""


DONE = (
    "state = pathlib.Path(os.environ['LOOPE_STATE_FILE'])\n"
    "state.write_text(state.read_text().replace('status: in-progress', 'status: done'))\n"
    "pathlib.Path('notes.txt').write_text('done\\n')\n"
)


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    path = tmp_path / "marks"
    path.mkdir()
    return path


# -- detach and status --------------------------------------------------------------------------


def test_detach_returns_at_once_and_status_follows_the_run(project, agent_script, cli, marks, runners):
    finished_first = cli(
        "run", "an earlier run", "--implementer", agent_script(DONE), "--no-review", cwd=project.path
    )  # fmt: skip
    assert finished_first.exit_code == 0, finished_first.err
    earlier = project.run_json()["run_id"]
    body = f"""
    n = int(os.environ["LOOPE_ITERATION"])
    state = pathlib.Path(os.environ["LOOPE_STATE_FILE"])
    if n == 1:
        notes = "".join(f"line {{i}}\\n" for i in range(1, 61))
        state.write_text(
            f"---\\nloop_id: {{os.environ['LOOPE_RUN_ID']}}\\nstatus: in-progress\\niteration: 1\\n"
            "owner: agent-7\\n---\\n"
            "# Goal\\nwrite notes\\n# Progress\\nstarted\\n# Next Action\\nfinish\\n# Notes\\n" + notes
        )
        pathlib.Path("notes.txt").write_text("one\\n")
        print(json.dumps({{"type": "usage", "input_tokens": 1000, "output_tokens": 100, "cost_usd": 0.25}}))
        sys.exit(0)
    {waiting(marks, at=2, then=DONE).strip().replace(chr(10), chr(10) + "    ")}
    """
    detach = loope(
        project.path, "run", "write notes", "--implementer", agent_script(body), "--no-review", "--max-iters", "3",
        "--max-cost", "5", "--detach", "--sandbox", "off",
    )  # fmt: skip
    # It returned while the run waits in iteration 2 for a release only this test gives.
    assert detach.returncode == 0, detach.stderr
    run_id = detach.stdout.strip()
    assert detach.stdout == f"{run_id}\n"
    rundir = project.path / ".loope" / "runs" / run_id
    assert rundir.is_dir()
    assert run_id != earlier
    wait_for((marks / "started-2").exists, "the detached run to reach iteration 2")
    assert not (marks / "release").exists()

    record = read_json(rundir / "run.json")
    runner_pid = record["pid"]
    assert pid_alive(runner_pid)  # a background runner, alive after the command that started it returned
    shown = loope(project.path, "status", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    info = json.loads(shown.stdout)
    loop = info["loop"]
    assert (loop["id"], loop["status"], loop["max_iterations"]) == (run_id, "running", 3)
    assert (loop["cost_usd"], loop["max_cost_usd"], loop["tokens"]) == (0.25, 5.0, 1100)
    assert (loop["runner_pid"], loop["runner_alive"]) == (runner_pid, True)
    assert loop["last_error"] is None
    assert loop["stop_requested"] is False
    assert info["frontmatter"] == {"loop_id": run_id, "status": "in-progress", "iteration": 1, "owner": "agent-7"}
    state_text = run_state(rundir)
    assert info["state_excerpt"] == "\n".join(state_text.splitlines()[:40])
    assert info["state_excerpt"].splitlines()[-1] == "line 27"  # 13 lines of frontmatter and headings first

    human = loope(project.path, "status", run_id[:4])  # a unique prefix will do
    assert human.returncode == 0, human.stderr
    assert f"{run_id} · running (runner pid {runner_pid}, alive)" in human.stdout
    assert "/3 · cost $0.2500/$5.00 · 1100 tokens" in human.stdout
    assert "    owner: agent-7" in human.stdout
    assert "    line 27\n" in human.stdout
    assert "line 28" not in human.stdout

    # Without RUN: every running run, and only those.
    listing = loope(project.path, "status", "--json")
    assert [i["loop"]["id"] for i in json.loads(listing.stdout)] == [run_id]
    listing = loope(project.path, "status")
    assert f"{run_id} · running" in listing.stdout
    assert earlier not in listing.stdout

    (marks / "release").touch()
    wait_for(lambda: finished(rundir), "the detached run to finish")
    record = read_json(rundir / "run.json")
    assert (record["status"], record["iterations"], record["totals"]["cost_usd"]) == ("converged", 2, 0.25)
    assert gone(runner_pid)
    assert loope(project.path, "status").stdout == "no run is running; `loope runs` lists them all\n"
    assert json.loads(loope(project.path, "status", "--json").stdout) == []
    info = json.loads(loope(project.path, "status", run_id, "--json").stdout)
    assert (info["loop"]["status"], info["loop"]["runner_alive"], info["loop"]["iteration"]) == ("converged", False, 2)


def test_status_shows_the_iteration_in_flight(project, agent_script, marks, runners):
    body = waiting(marks, at=2, then="pathlib.Path('n.txt').write_text(os.environ['LOOPE_ITERATION'])")
    runners.start(
        "run", "count", "--implementer", agent_script(body), "--no-review", "--max-iters", "3", "--plain"
    )  # fmt: skip
    wait_for((marks / "started-2").exists, "iteration 2 to start")
    run_id = project.runs()[-1].name
    info = json.loads(loope(project.path, "status", run_id, "--json").stdout)
    try:
        assert (info["loop"]["status"], info["loop"]["iteration"]) == ("running", 2)
        assert "iteration 2/3" in loope(project.path, "status", run_id).stdout
    finally:
        (marks / "release").touch()


def test_a_detached_start_keeps_nothing_of_the_run_open_in_the_starting_process(project, agent_script, cli):
    def held_under(path: Path) -> list[str]:
        found = []
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{fd}")
                if target.startswith(f"{path}/") or target == str(path):
                    found.append(target)
        return found

    result = cli(
        "run", "fix add", "--implementer", agent_script(DONE), "--no-review", "--detach", "--sandbox", "off",
        cwd=project.path,
    )  # fmt: skip

    assert result.exit_code == 0, result.err
    rundir = project.path / ".loope" / "runs" / result.out.strip()
    held = held_under(project.path.resolve())
    assert held == [], "\n".join(held)  # this process (an MCP server, say) may go on for days
    wait_for(lambda: read_json(rundir / "run.json")["status"] != "running", "the background run to finish")


def test_detach_with_bad_input_fails_at_once_and_starts_nothing(project, cli):
    result = cli(
        "run", "fix add", "--implementer", "exec:./no-such-agent.sh", "--no-review", "--detach", cwd=project.path
    )  # fmt: skip
    assert result.exit_code == 2
    assert "command not found: ./no-such-agent.sh" in one_error_line(result.err)
    assert result.out == ""
    assert not (project.path / ".loope" / "runs").exists() or not any((project.path / ".loope" / "runs").iterdir())


def test_status_shows_the_last_error(project, agent_script, cli):
    failing = agent_script("print('cannot reach the model', file=sys.stderr)\nsys.exit(3)")
    assert cli("run", "fix add", "--implementer", failing, "--no-review", cwd=project.path).exit_code == 1
    run_id = project.run_json()["run_id"]
    info = json.loads(cli("status", run_id, "--json", cwd=project.path).out)
    assert info["loop"]["status"] == "step_failed"
    assert "exit code 3" in info["loop"]["last_error"]
    assert "cannot reach the model" in info["loop"]["last_error"]
    human = cli("status", run_id, cwd=project.path).out
    assert "  last error: " in human
    assert "cannot reach the model" in human


# -- stop ---------------------------------------------------------------------------------------


def test_stop_ends_the_run_before_its_next_step(project, agent_script, marks, runners):
    runner = runners.start(
        "run", "fix add", "--implementer", agent_script(waiting(marks)), "--no-review", "--verify-cmd", GATE,
        "--max-iters", "3", "--plain",
    )  # fmt: skip
    wait_for((marks / "started-1").exists, "the implementer to start")
    run_id = project.runs()[-1].name
    stopped = loope(project.path, "stop", run_id)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout == f"stop requested for {run_id}: it stops before its next step\n"
    info = json.loads(loope(project.path, "status", run_id, "--json").stdout)
    assert (info["loop"]["status"], info["loop"]["stop_requested"]) == ("running", True)
    assert "stop requested: it stops before its next step" in loope(project.path, "status", run_id).stdout

    (marks / "release").touch()  # the step in flight finishes; nothing after it starts
    assert runner.wait(timeout=DEADLINE_S) == 1, runners.log()
    run = project.run_json()
    assert (run["status"], run["stop_reason"], run["stop_detail"]) == ("stopped", "stopped", "stop requested")
    assert [(s["iteration"], s["role"], s["ok"]) for s in run["steps"]] == [(1, "implementer", True)]
    again = loope(project.path, "stop", run_id)
    assert again.returncode == 1
    assert f"run {run_id} already finished (stopped); nothing to stop" in again.stderr


def test_stop_now_kills_the_step_in_flight_and_everything_it_started(project, agent_script, tmp_path, runners):
    pids = tmp_path / "agent-pids.json"
    body = f"""
    import subprocess, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    pathlib.Path({str(pids)!r}).write_text(json.dumps([os.getpid(), child.pid, os.getpgid(0)]))
    time.sleep(300)
    """
    runner = runners.start(
        "run", "fix add", "--implementer", agent_script(body), "--no-review", "--verify-cmd", GATE, "--plain"
    )
    wait_for(pids.exists, "the implementer to start its child")
    agent, child, group = json.loads(pids.read_text())
    run_id = project.runs()[-1].name
    stopped = loope(project.path, "stop", run_id, "--now")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout == f"stop requested for {run_id}: the step in flight is being killed\n"
    assert runner.wait(timeout=DEADLINE_S) == 1, runners.log()
    run = project.run_json()
    assert (run["status"], run["stop_reason"]) == ("stopped", "stopped")
    assert run["stop_detail"] == "stop requested; the step in flight was killed"
    assert [(s["role"], s["ok"]) for s in run["steps"]] == [("implementer", False)]
    assert gone(agent)
    assert gone(child)
    assert alive_in_group(group) == []


@pytest.mark.parametrize("args", [("stop", "nope"), ("stop", "nope", "--now"), ("resume", "nope"), ("status", "nope")])
def test_an_unknown_run_is_one_clear_line_and_exit_2(project, agent_script, cli, args):
    result = cli(*args, cwd=project.path)
    assert result.exit_code == 2
    assert "no runs in" in one_error_line(result.err)
    assert cli("run", "x", "--implementer", agent_script(DONE), "--no-review", cwd=project.path).exit_code == 0
    result = cli(*args, cwd=project.path)
    assert result.exit_code == 2
    assert "no run matches 'nope'; `loope runs` lists them" in one_error_line(result.err)


# -- resume -------------------------------------------------------------------------------------


def killed_midway(project, agent_script, marks: Path, runners: Runners, *extra: str):  # type: ignore[no-untyped-def]
    """A runner SIGKILLed while iteration 3's agent sleeps (after two completed iterations); its run dir."""
    body = f"""
    import time
    n = int(os.environ["LOOPE_ITERATION"])
    log = pathlib.Path("log.txt")
    text = log.read_text() if log.exists() else ""
    print(json.dumps({{"type": "usage", "input_tokens": 100, "output_tokens": 10, "cost_usd": 0.1}}), flush=True)
    slept = pathlib.Path({str(marks)!r}) / "slept.json"
    if n == 3 and not slept.exists():
        log.write_text(text + "iteration 3 partial\\n")
        slept.write_text(json.dumps([os.getpid(), os.getpgid(0)]))
        time.sleep(300)
    log.write_text(text + f"iteration {{n}}\\n")
    print(f"did iteration {{n}}")
    """
    runner = runners.start(
        "run", "write the log", "--implementer", agent_script(body), "--no-review", "--max-iters", "4",
        "--max-cost", "10", "--plain", *extra,
    )  # fmt: skip
    wait_for((marks / "slept.json").exists, "iteration 3's agent to start sleeping")
    rundir = project.runs()[-1]
    record = read_json(rundir / "run.json")
    assert record["pid"] == runner.pid
    assert (record["status"], record["completed"]) == ("running", 2)
    os.kill(record["pid"], signal.SIGKILL)
    assert runner.wait(timeout=DEADLINE_S) == -signal.SIGKILL
    return rundir


def test_resume_after_a_killed_runner_continues_from_the_last_completed_iteration(
    project, agent_script, marks, runners
):
    rundir = killed_midway(project, agent_script, marks, runners)
    run_id = rundir.name
    agent, group = json.loads((marks / "slept.json").read_text())
    assert pid_alive(agent)  # the agent lives on in its own process group
    info = json.loads(loope(project.path, "status", run_id, "--json").stdout)
    assert (info["loop"]["status"], info["loop"]["runner_alive"]) == ("dead", False)

    resumed = loope(project.path, "resume", run_id, "--plain")
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # max_iters: not converged
    assert gone(agent)  # the orphaned step was killed before the workspace was reset
    assert alive_in_group(group) == []
    run = read_json(rundir / "run.json")
    assert (run["status"], run["stop_reason"], run["iterations"], run["completed"]) == ("max_iters", "max_iters", 4, 4)
    # Only completed iterations' changes: the killed iteration's partial write is gone.
    assert run_file(run, "log.txt") == "iteration 1\niteration 2\niteration 3\niteration 4\n"
    iterations = [s["iteration"] for s in run["steps"]]
    assert iterations == [1, 2, 3, 4]
    assert [s["id"] for s in run["steps"]] == [1, 2, 3, 4]
    # The killed step's changes are gone, but not what it reported spending before it died.
    (cut,) = run["discarded_steps"]
    assert (cut["id"], cut["iteration"], cut["role"], cut["ok"]) == (3, 3, "implementer", False)
    assert cut["error"] == "cut short: the runner died during the step"
    assert (cut["cost_usd"], cut["input_tokens"], cut["output_tokens"]) == (0.1, 100, 10)
    assert cut["dir"].startswith("agents/discarded/")
    assert cut["dir"].endswith("/03-implementer-exec")
    assert run["totals"]["cost_usd"] == pytest.approx(0.5)  # four kept steps and the cut one
    assert run["totals"]["input_tokens"] == 500
    ledger = [json.loads(line) for line in (rundir / "ledger.jsonl").read_text().splitlines()]
    assert [a["iteration"] for a in ledger] == [1, 2, 3, 4]
    discarded = list((rundir / "agents" / "discarded").glob("*/03-implementer-exec"))
    assert len(discarded) == 1  # the cut-short step, set aside
    assert "iteration 3 partial" not in (rundir / "changes.diff").read_text()
    info = json.loads(loope(project.path, "status", run_id, "--json").stdout)["loop"]
    assert (info["status"], info["iteration"], info["cost_usd"]) == ("max_iters", 4, pytest.approx(0.5))


def test_a_stop_recorded_for_a_dead_runner_is_honoured_by_resume(project, agent_script, marks, runners):
    rundir = killed_midway(project, agent_script, marks, runners)
    run_id = rundir.name
    stopped = loope(project.path, "stop", run_id)
    assert stopped.returncode == 0, stopped.stderr
    assert "its runner is not running; `loope resume` would stop it" in stopped.stdout
    resumed = loope(project.path, "resume", run_id, "--plain")
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    run = read_json(rundir / "run.json")
    assert (run["status"], run["stop_reason"], run["iterations"]) == ("stopped", "stopped", 2)
    assert [s["iteration"] for s in run["steps"]] == [1, 2]
    assert run_file(run, "log.txt") == "iteration 1\niteration 2\n"


def test_a_second_runner_is_refused(project, agent_script, marks, runners):
    runner = runners.start(
        "run", "write notes", "--implementer", agent_script(waiting(marks, then=DONE)), "--no-review", "--plain"
    )
    wait_for((marks / "started-1").exists, "the implementer to start")
    run_id = project.runs()[-1].name
    refused = loope(project.path, "resume", run_id)
    assert refused.returncode == 2
    line = one_error_line(refused.stderr)
    assert f"run {run_id} is being run by another process (pid {runner.pid})" in line
    assert f"`loope stop {run_id}`" in line
    (marks / "release").touch()
    assert runner.wait(timeout=DEADLINE_S) == 0, runners.log()
    run = project.run_json()
    assert (run["status"], run["iterations"]) == ("converged", 1)  # the refused runner changed nothing
    assert [s["id"] for s in run["steps"]] == [1]


def test_a_refused_resume_keeps_a_pending_stop(project, agent_script, marks, runners):
    runner = runners.start(
        "run", "fix add", "--implementer", agent_script(waiting(marks)), "--no-review", "--verify-cmd", GATE, "--plain"
    )
    wait_for((marks / "started-1").exists, "the implementer to start")
    run_id = project.runs()[-1].name
    assert loope(project.path, "stop", run_id).returncode == 0
    assert loope(project.path, "resume", run_id).returncode == 2
    assert json.loads(loope(project.path, "status", run_id, "--json").stdout)["loop"]["stop_requested"] is True
    (marks / "release").touch()
    assert runner.wait(timeout=DEADLINE_S) == 1, runners.log()
    run = project.run_json()
    assert (run["status"], [s["role"] for s in run["steps"]]) == ("stopped", ["implementer"])


def test_resume_of_a_finished_run_is_refused(project, agent_script, cli):
    assert (
        cli("run", "write notes", "--implementer", agent_script(DONE), "--no-review", cwd=project.path).exit_code == 0
    )
    run_id = project.run_json()["run_id"]
    before = (project.runs()[-1] / "run.json").read_text()
    result = cli("resume", run_id, cwd=project.path)
    assert result.exit_code == 2
    line = one_error_line(result.err)
    assert f"run {run_id} already finished (converged); go on with `loope continue {run_id} --goal TEXT`" in line
    assert (project.runs()[-1] / "run.json").read_text() == before


# -- damaged records, lost rows, runners that never started or died -------------------------------


def test_a_dead_runner_started_by_this_process_is_not_alive(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])  # as the MCP server starts runners, never waited for
    wait_for(lambda: not pid_alive(child.pid), "the child to exit (a zombie until someone reaps it)")
    assert runner_alive(tmp_path, child.pid) is False
    assert not Path(f"/proc/{child.pid}").exists()  # reaped, not only reported dead
    assert process_alive(os.getpid()) is True  # a live process that is nobody's child here
    assert runner_alive(tmp_path, os.getpid()) is False  # ... but it holds no run's lock


@pytest.mark.parametrize("damage", ["{not json", "", '["a list"]'])
def test_status_and_stop_of_a_run_with_a_damaged_run_json_are_one_clear_line(project, agent_script, cli, damage):
    done = cli("run", "write notes", "--implementer", agent_script(DONE), "--no-review", cwd=project.path)
    assert done.exit_code == 0, done.err
    run_id = project.run_json()["run_id"]
    (project.runs()[-1] / "run.json").write_text(damage)
    for args in (("status", run_id), ("status", run_id, "--json"), ("stop", run_id), ("stop", run_id, "--now")):
        result = cli(*args, cwd=project.path)
        assert result.exit_code == 2, args
        assert f"loope: error: run {run_id}: run.json is damaged (" in one_error_line(result.err)
    listing = cli("status", cwd=project.path)  # every running run: the damaged one is not among them
    assert (listing.exit_code, listing.out) == (0, "no run is running; `loope runs` lists them all\n")


def test_status_shows_what_it_can_without_the_workspace_spec_or_database(project, agent_script, cli):
    flags = ("--implementer", agent_script(DONE), "--no-review", "--max-cost", "3")
    assert cli("run", "write notes", *flags, cwd=project.path).exit_code == 0
    rundir = project.runs()[-1]
    run_id = rundir.name
    (rundir / "spec.json").write_text("{damaged")
    info = json.loads(cli("status", run_id, "--json", cwd=project.path).out)["loop"]
    assert (info["status"], info["max_cost_usd"]) == ("converged", None)

    record = read_json(rundir / "run.json")
    del record["workspace"]
    (rundir / "run.json").write_text(json.dumps(record))
    (rundir / "spec.json").unlink()
    for name in ("loope.db", "loope.db-wal", "loope.db-shm"):  # the store's state_file goes with it
        (project.path / ".loope" / name).unlink(missing_ok=True)
    shown = cli("status", run_id, "--json", cwd=project.path)
    assert shown.exit_code == 0, shown.err
    info = json.loads(shown.out)
    assert (info["loop"]["status"], info["loop"]["state_file"], info["state_excerpt"]) == ("converged", None, "")
    assert info["state_problem"] == "run.json names no workspace, so no state file"
    assert cli("status", run_id, cwd=project.path).exit_code == 0


def test_stop_reaches_a_runner_whose_database_row_was_lost(project, agent_script, marks, runners):
    runner = runners.start(
        "run", "fix add", "--implementer", agent_script(waiting(marks)), "--no-review", "--verify-cmd", GATE,
        "--max-iters", "3", "--plain",
    )  # fmt: skip
    wait_for((marks / "started-1").exists, "the implementer to start")
    run_id = project.runs()[-1].name
    for name in ("loope.db", "loope.db-wal", "loope.db-shm"):  # moved aside, say, after it was damaged
        (project.path / ".loope" / name).unlink(missing_ok=True)
    stopped = loope(project.path, "stop", run_id)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout == f"stop requested for {run_id}: it stops before its next step\n"
    (marks / "release").touch()
    assert runner.wait(timeout=DEADLINE_S) == 1, runners.log()
    run = project.run_json()
    assert (run["status"], run["stop_reason"], run["stop_detail"]) == ("stopped", "stopped", "stop requested")
    assert [(s["iteration"], s["role"]) for s in run["steps"]] == [(1, "implementer")]


def test_a_detached_run_whose_runner_cannot_start_is_recorded_as_failed(
    project, agent_script, cli, monkeypatch, tmp_path
):
    from loope.store.db import Store

    gone_python = tmp_path / "no-python"
    monkeypatch.setattr(sys, "executable", str(gone_python))  # the interpreter was removed (a venv rebuilt, say)
    result = cli(
        "run", "write notes", "--implementer", agent_script(DONE), "--no-review", "--detach", cwd=project.path
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.out == ""
    run = project.run_json()
    run_id = run["run_id"]
    line = one_error_line(result.err)
    assert f"run {run_id} failed: cannot start a background process: command not found: {gone_python}" in line
    assert (run["status"], run["stop_reason"]) == ("failed", "failed")
    assert run["stop_detail"].startswith("the background runner could not start: cannot start a background process")
    assert run["finished_at"]
    row = Store.for_project(project.path).get(run_id)
    assert (row["status"], row["last_error"], row["finished_at"]) == ("failed", run["stop_detail"], run["finished_at"])
    info = json.loads(cli("status", run_id, "--json", cwd=project.path).out)["loop"]
    assert (info["status"], info["runner_alive"], info["last_error"]) == ("failed", False, run["stop_detail"])
    assert cli("status", cwd=project.path).out == "no run is running; `loope runs` lists them all\n"


# -- liveness is the lock: across a detach, a SIGKILL, a reused pid, rival runners -------------


def _status(project, run_id: str) -> dict:  # type: ignore[no-untyped-def]
    shown = loope(project.path, "status", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["loop"]


def _detached(project, agent_script, marks: Path, *extra: str) -> Path:  # type: ignore[no-untyped-def]
    """A detached run whose implementer waits in iteration 1 for ``marks/release``; its run dir."""
    detach = loope(
        project.path, "run", "write notes", "--implementer", agent_script(waiting(marks, then=DONE)),
        "--no-review", "--detach", "--sandbox", "off", *extra,
    )  # fmt: skip
    assert detach.returncode == 0, detach.stderr
    return project.path / ".loope" / "runs" / detach.stdout.strip()


def test_a_detached_run_is_held_from_the_moment_detach_returns(project, agent_script, marks, runners):
    rundir = _detached(project, agent_script, marks)
    # The background runner is still starting (an interpreter, loope's imports), yet the run was
    # never let go: nobody can take it, and every look sees it alive, until its agent runs.
    assert RunnerLock(rundir / "runner.lock").acquire() is False
    seen = [runner_alive(rundir)]  # one look at least, however soon the runner reaches its agent
    deadline = time.monotonic() + DEADLINE_S
    while not (marks / "started-1").exists():
        seen.append(runner_alive(rundir))
        assert time.monotonic() < deadline, "the detached run's implementer never started"
    assert all(seen)
    refused = loope(project.path, "resume", rundir.name)
    assert refused.returncode == 2
    runner = runner_pid(rundir)
    assert runner is not None
    assert pid_alive(runner)
    assert f"is being run by another process (pid {runner})" in one_error_line(refused.stderr)
    loop = _status(project, rundir.name)
    assert (loop["status"], loop["runner_alive"], loop["runner_pid"]) == ("running", True, runner)
    assert read_json(rundir / "run.json")["pid"] == runner  # the background runner took the run over
    (marks / "release").touch()
    wait_for(lambda: read_json(rundir / "run.json")["status"] != "running", "the detached run to finish")
    assert read_json(rundir / "run.json")["status"] == "converged"
    wait_for(lambda: not runner_alive(rundir), "the runner to let the run go once it finished")
    assert gone(runner)


def test_a_killed_runner_is_dead_at_once_whatever_its_pid_now_names_and_continue_takes_it_up(
    project, agent_script, marks, runners
):
    rundir = _detached(project, agent_script, marks, "--max-iters", "2")
    wait_for((marks / "started-1").exists, "the implementer to start")
    runner = runner_pid(rundir)
    assert runner is not None
    os.kill(runner, signal.SIGKILL)
    wait_for(lambda: not process_alive(runner), "the killed runner to exit")
    loop = _status(project, rundir.name)  # no grace period: the lock went with the process
    assert (loop["status"], loop["runner_alive"]) == ("dead", False)
    assert "dead (resumable)" in loope(project.path, "runs").stdout

    # The pid is reused by a live process that is not a runner: the run is still dead.
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = read_json(rundir / "run.json")
        record["pid"] = stranger.pid
        (rundir / "run.json").write_text(json.dumps(record))
        assert _status(project, rundir.name)["status"] == "dead"
    finally:
        stranger.kill()
        stranger.wait()

    (marks / "release").touch()
    continued = loope(project.path, "continue", rundir.name, "--max-iters", "1", "--plain")
    assert continued.returncode == 0, continued.stdout + continued.stderr
    run = read_json(rundir / "run.json")
    assert (run["status"], run["iterations"]) == ("converged", 1)
    assert [s["iteration"] for s in run["steps"]] == [1]


def test_two_continues_at_once_make_exactly_one_runner(project, agent_script, marks, runners):
    # Iteration 1 changes nothing and fails the gate (max_iters); the continued iteration 2 waits.
    body = waiting(marks, at=2)
    first = loope(
        project.path, "run", "fix add", "--implementer", agent_script(body), "--no-review", "--verify-cmd", GATE,
        "--max-iters", "1", "--sandbox", "off", "--plain",
    )  # fmt: skip
    assert first.returncode == 1, first.stdout + first.stderr
    run_id = project.runs()[-1].name
    rivals = [runners.start("continue", run_id, "--max-iters", "1", "--plain") for _ in range(2)]
    wait_for(lambda: any(p.poll() is not None for p in rivals), "one of the two to be refused")
    wait_for((marks / "started-2").exists, "the other one's implementer to start")
    (refused,) = [p for p in rivals if p.poll() is not None]
    (winner,) = [p for p in rivals if p is not refused]
    assert refused.returncode == 2
    log = runners.log(rivals.index(refused))
    assert f"run {run_id} is being run by another process (pid {winner.pid})" in log
    (marks / "release").touch()
    assert winner.wait(timeout=DEADLINE_S) == 1, runners.log(rivals.index(winner))
    run = project.run_json()
    assert (run["status"], run["iterations"]) == ("max_iters", 2)
    assert [(s["id"], s["iteration"]) for s in run["steps"] if s["role"] == "implementer"] == [(1, 1), (3, 2)]
    assert len(run["segments"]) == 2
    assert "discarded_steps" not in run or run["discarded_steps"] == []
