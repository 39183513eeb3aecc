"""The user commits in their own checkout while a step runs: what loope does with their ``.git``.

With the sandbox, the step cannot write the user's ``.git``: a change there is the user's, and it
stays. Without it, the guard cannot tell the user's commit from an agent moving the branch: the
branch is put back, and the violation names the commit, which stays in the repository.
"""

from __future__ import annotations

import threading
import time

import pytest

from loope.sandbox import bwrap
from tests.conftest import GATE, Project

SANDBOX = ["off", pytest.param("on", marks=pytest.mark.skipif(not bwrap.support().works, reason="needs bubblewrap"))]

# The agent tells the test it runs, then waits: both through files git ignores (`__pycache__/`).
AGENT = "mkdir -p __pycache__\ntouch __pycache__/ready\nwhile [ ! -e __pycache__/go ]; do sleep 0.05; done\necho done\n"


def _commit_while_the_step_runs(project: Project, done: dict[str, str]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready = list((project.path / ".loope" / "runs").glob("*/workspace/__pycache__/ready"))
        if ready:
            break
        time.sleep(0.05)
    else:
        return
    project.write("mine.txt", "the user's own work\n")
    project.git("add", "mine.txt")
    project.git("-c", "user.name=u", "-c", "user.email=u@u", "commit", "-qm", "mine")
    done["commit"] = project.git("rev-parse", "HEAD").strip()
    (ready[0].parent / "go").touch()


@pytest.mark.parametrize("sandbox", SANDBOX)
def test_a_commit_the_user_makes_during_a_step(project, cli, tmp_path, sandbox):
    agent = tmp_path / "agent.sh"
    agent.write_text("#!/bin/sh\n" + AGENT)
    done: dict[str, str] = {}
    user = threading.Thread(target=_commit_while_the_step_runs, args=(project, done))
    user.start()
    result = cli(
        "run", "fix add", "--implementer", f"exec:sh {agent}", "--no-review", "--verify-cmd", GATE,
        "--max-iters", "1", "--plain", "--sandbox", sandbox, cwd=project.path,
    )  # fmt: skip
    user.join()

    assert result.exit_code == 1, result.out + result.err
    commit = done["commit"]
    head = project.git("rev-parse", "HEAD").strip()
    violations = [v for s in project.run_json()["steps"] for v in s.get("violations", [])]
    if sandbox == "on":  # the step could not have written there: the change is the user's and stays
        assert head == commit
        assert "mine.txt" in project.git("ls-files")
        assert not [v for v in violations if ".git/" in v]
    else:  # whose it was cannot be told: put back, and the line says how to get it back
        assert head != commit
        (line,) = [v for v in violations if v.startswith(".git/refs/heads/main ")]
        assert f"it had moved to {commit}" in line
        project.git("branch", "recovered", commit)
        assert project.git("log", "-1", "--format=%s", "recovered").strip() == "mine"
