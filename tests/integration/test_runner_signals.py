"""SIGTERM and SIGHUP to a real runner: the step in flight and all it started killed, the run ``stopped``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from loope.sandbox import bwrap, reap
from tests.conftest import GATE
from tests.integration.test_control import DEADLINE_S, Runners, read_json, wait_for
from tests.integration.test_sandbox_attacks import markers, survivors

SANDBOX = ["off", pytest.param("on", marks=pytest.mark.skipif(not bwrap.support().works, reason="needs bubblewrap"))]


@pytest.fixture
def runners(project):  # type: ignore[no-untyped-def]
    started = Runners(project)
    yield started
    started.cleanup()


@pytest.mark.parametrize("sandbox", SANDBOX)
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_to_the_runner_stops_the_run_like_stop_now(project, tmp_path, runners, *, signum, code, sandbox):
    agent = tmp_path / "agent.sh"
    agent.write_text(
        '#!/bin/sh\necho "marker $LOOPE_STEP_TOKEN"\nsetsid sleep 300 >/dev/null 2>&1 &\n(sleep 300 &)\necho ready\n'
        "exec sleep 300\n"
    )
    runner = runners.start(
        "run", "fix add", "--implementer", f"exec:sh {agent}", "--no-review", "--verify-cmd", GATE,
        "--sandbox", sandbox, "--plain",
    )  # fmt: skip

    def step_ready() -> bool:
        runs = project.runs()
        logs = list((runs[-1] / "agents").glob("01-*/transcript.log")) if runs else []
        return bool(logs) and "ready" in logs[0].read_text()

    wait_for(step_ready, "the implementer to start its processes")
    (step,) = (project.runs()[-1] / "agents").glob("01-*")
    tokens = markers(step)
    runner.send_signal(signum)

    assert runner.wait(timeout=DEADLINE_S) == code, runners.log()
    record = read_json(project.runs()[-1] / "run.json")
    name = signal.Signals(signum).name
    assert (record["status"], record["stop_reason"], record["stop_detail"]) == (
        "stopped",
        "stopped",
        f"stopped by {name}",
    )
    assert survivors(tokens) == []


@pytest.fixture
def own_cgroup():  # type: ignore[no-untyped-def]
    """A cgroup of this test's own for its runners: every runner sweeps the cgroup it is in, and other
    tests' runners (running at the same time) must not sweep this test's leftovers before it looks."""
    base = reap.cgroup_base()
    assert base is not None
    home = base / f"loope-test-{reap.new_token()}"
    home.mkdir()
    yield home
    for current, _dirs, _files in os.walk(home, topdown=False):
        with contextlib.suppress(OSError):
            (Path(current) / "cgroup.kill").write_text("1")
            os.rmdir(current)


def _loope_in(home: Path, project, *args: str, out: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:  # type: ignore[no-untyped-def]
    """``loope ARGS`` started inside the cgroup ``home``."""
    enter = ("/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(home / "cgroup.procs"))
    argv = [*enter, sys.executable, "-m", "loope", *args]
    return subprocess.Popen(argv, cwd=project.path, stdout=out, stderr=subprocess.STDOUT)


@pytest.mark.skipif(reap.cgroup_base() is None, reason="needs a writable cgroup v2 hierarchy")
@pytest.mark.parametrize("cleaner", ["loope gc", "the next run"])
def test_a_runner_killed_outright_leaves_no_cgroup_or_process_once_loope_runs_again(
    project, tmp_path, own_cgroup, *, cleaner
):
    agent = tmp_path / "agent.sh"
    agent.write_text(
        '#!/bin/sh\necho "marker $LOOPE_STEP_TOKEN"\nsetsid sleep 300 >/dev/null 2>&1 &\necho ready\nexec sleep 300\n'
    )
    run = ("run", "fix add", "--implementer", f"exec:sh {agent}", "--no-review", "--plain", "--sandbox", "off")
    runner = _loope_in(own_cgroup, project, *run)
    try:
        wait_for(lambda: "ready" in _step_log(project), "the implementer to start its processes")
        (left,) = own_cgroup.glob(f"loope-step-{runner.pid}-*")  # the step's, named for its runner
    finally:
        runner.kill()
        runner.wait(timeout=DEADLINE_S)
    (step,) = (project.runs()[-1] / "agents").glob("01-*")
    tokens = markers(step)
    assert left.exists()  # SIGKILL: the runner could not remove it
    assert survivors(tokens)  # nor end its step

    if cleaner == "loope gc":
        gc = _loope_in(own_cgroup, project, "gc", out=subprocess.PIPE)
        out = gc.communicate(timeout=DEADLINE_S)[0].decode()
        assert gc.returncode == 0, out
        assert "removed 1 step cgroup(s) left by runners that died" in out
    else:
        quick = tmp_path / "quick.sh"
        quick.write_text("#!/bin/sh\necho done\n")
        again = _loope_in(own_cgroup, project, "run", "again", "--implementer", f"exec:sh {quick}", "--no-review")
        assert again.wait(timeout=DEADLINE_S) == 1

    assert not left.exists()
    assert survivors(tokens) == []


def _step_log(project) -> str:  # type: ignore[no-untyped-def]
    logs = list((project.runs()[-1] / "agents").glob("01-*/transcript.log")) if project.runs() else []
    return logs[0].read_text() if logs else ""
