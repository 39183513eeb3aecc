"""``--detach`` with an overlay: the starter prepares the run and unmounts; the background runner
mounts it again in a namespace of its own (candidates' forks too), and is watched, stopped,
continued and landed from outside, where no mount is ever seen."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers.attacks import shell_implementer
from tests.helpers.overlay import loope, our_mounts, run_args
from tests.integration.test_control import wait_for

__all__ = ["loope"]  # a fixture

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# Iteration 1: the fix, then a mark for the test, then a wait for the test's release (at most ~2 minutes).
WAITING = """
printf 'def add(a, b):\\n    return a + b\\n' > calc.py
if [ "$LOOPE_ITERATION" = 1 ]; then
  ls > {marks}/seen.$$
  mv {marks}/seen.$$ {marks}/started
  i=0
  while [ ! -e {marks}/release ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i + 1)); done
fi
echo fixed
"""


def status(project: Project, loope, run_id: str) -> dict:  # type: ignore[no-untyped-def]
    shown = loope("status", run_id, "--json", cwd=project.path)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["loop"]


def detached(project: Project, loope, tmp_path: Path, marks: Path, *extra: str) -> tuple[str, Path]:  # type: ignore[no-untyped-def]
    agent = shell_implementer(tmp_path / "agents", WAITING.format(marks=marks))
    started = loope(*run_args(agent, "--detach", "--sandbox-writable", str(marks), *extra), cwd=project.path)
    assert started.returncode == 0, started.stdout + started.stderr
    run_id = started.stdout.strip()
    assert started.stdout == f"{run_id}\n"
    rundir = project.path / ".loope" / "runs" / run_id
    wait_for((marks / "started").exists, "the detached run's agent to start")
    return run_id, rundir


def ended(rundir: Path) -> bool:
    try:
        return json.loads((rundir / "run.json").read_text())["status"] != "running"
    except (OSError, ValueError):
        return False


def test_a_detached_overlay_run_is_watched_from_outside_finishes_and_is_applied(project, tmp_path, loope):
    marks = tmp_path / "marks"
    marks.mkdir()
    run_id, rundir = detached(project, loope, tmp_path, marks, "--candidates", "2")  # forks, in the background
    # The background runner's agents saw the merged view: the project's files through the mount.
    assert {"calc.py", "tests"} <= set((marks / "started").read_text().split())
    assert our_mounts(project.path) == []  # the mount lives in the runner's namespace only
    loop = status(project, loope, run_id)
    assert (loop["status"], loop["runner_alive"]) == ("running", True)
    logs = loope("logs", run_id, "--plain", cwd=project.path)
    assert logs.returncode == 0, logs.stderr
    assert "implementer" in logs.stdout

    (marks / "release").write_text("")
    wait_for(lambda: ended(rundir), "the detached run to finish")
    assert status(project, loope, run_id)["status"] == "converged"
    record = json.loads((rundir / "run.json").read_text())
    assert record["workspace"]["mode"] == "overlay"
    assert [c["path"] for c in record["changes"]["files"]] == ["calc.py"]
    assert [len(r["candidates"]) for r in record["rounds"]] == [2]
    assert our_mounts(project.path) == []
    applied = loope("apply", run_id, cwd=project.path)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert project.read("calc.py") == "def add(a, b):\n    return a + b\n"


def test_a_detached_overlay_run_stops_when_asked_from_outside_and_continues_later(project, tmp_path, loope):
    marks = tmp_path / "marks"
    marks.mkdir()
    run_id, rundir = detached(project, loope, tmp_path, marks)
    stopped = loope("stop", run_id, "--now", cwd=project.path)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    wait_for(lambda: ended(rundir), "the detached run to stop")
    assert status(project, loope, run_id)["status"] == "stopped"
    assert our_mounts(project.path) == []
    (marks / "release").write_text("")
    more = loope("continue", run_id, "--max-iters", "1", cwd=project.path)  # mounted again, by this process
    assert more.returncode == 0, more.stdout + more.stderr
    assert status(project, loope, run_id)["status"] == "converged"
    assert our_mounts(project.path) == []
