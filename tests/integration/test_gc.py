"""``loope rm`` and ``loope gc``: finished runs go with their worktrees, branches and refs; nothing else does."""

from __future__ import annotations

import json
import os

from loope.engine.run import RunnerLock
from tests.conftest import FIX, GATE, git


def _run(cli, project, agent_script, goal: str = "fix add") -> str:
    result = cli(
        "run", goal, "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE, "--keep-workspace",
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    return project.run_json()["run_id"]


def _branches(project) -> list[str]:
    return project.git("for-each-ref", "--format=%(refname:short)", "refs/heads/loope").split()


def test_rm_removes_the_run_dir_worktree_branch_and_refs(project, agent_script, cli):
    run_id = _run(cli, project, agent_script)
    workspace = project.runs()[-1] / "workspace"
    project.git("update-ref", f"refs/loope/{run_id}/attempt-1", "HEAD")
    result = cli("rm", run_id[:4], cwd=project.path)
    assert result.exit_code == 0, result.err
    assert project.runs() == []
    assert not workspace.exists()
    assert _branches(project) == []
    assert project.git("for-each-ref", "refs/loope").strip() == ""
    assert run_id not in project.git("worktree", "list")
    assert "no runs yet" in cli("runs", cwd=project.path).out


def test_gc_keeps_a_branch_holding_a_users_own_commit(project, agent_script, cli):
    run_id = _run(cli, project, agent_script)
    workspace = project.runs()[-1] / "workspace"
    git(workspace, "switch", "-q", f"loope/{run_id}")  # the worktree itself works on a detached HEAD
    (workspace / "mine.txt").write_text("my own work on the run's branch\n")
    git(workspace, "add", "mine.txt")
    git(workspace, "commit", "-qm", "my own change")
    result = cli("gc", cwd=project.path)
    assert result.exit_code == 0, result.err
    assert project.runs() == []
    assert _branches(project) == [f"loope/{run_id}"]
    assert "kept branch" in result.out
    assert "not made by the run" in result.out


def test_gc_keep_and_status_and_dry_run(project, agent_script, cli):
    first = _run(cli, project, agent_script, "fix add")
    second = _run(cli, project, agent_script, "fix add again")
    dry = cli("gc", "--keep", "1", "--dry-run", cwd=project.path)
    assert f"{first}: would remove" in dry.out
    assert second not in dry.out
    assert len(project.runs()) == 2
    assert cli("gc", "--status", "stalled", cwd=project.path).out.strip() == "nothing to remove"
    assert cli("gc", "--older-than", "14d", cwd=project.path).out.strip() == "nothing to remove"
    assert cli("gc", "--keep", "1", cwd=project.path).exit_code == 0
    assert [p.name for p in project.runs()] == [second]


def test_a_running_run_is_never_removed(project, agent_script, cli):
    run_id = _run(cli, project, agent_script)
    path = project.runs()[-1] / "run.json"
    data = json.loads(path.read_text())
    data.update(status="running", pid=os.getpid())
    path.write_text(json.dumps(data))
    lock = RunnerLock(path.parent / "runner.lock")
    assert lock.acquire()  # this test process stands in for its live runner
    try:
        result = cli("rm", run_id, cwd=project.path)
        assert "kept, it is running" in result.out
        assert cli("gc", cwd=project.path).out.strip() == "nothing to remove"
        assert len(project.runs()) == 1
    finally:
        lock.release()
    # Its runner gone (the lock let go), the same record is a dead run: rm takes it, as it would a crashed one.
    assert "kept, it is running" not in cli("rm", run_id, cwd=project.path).out


def test_gc_refuses_an_unknown_status(project, cli):
    result = cli("gc", "--status", "finished", cwd=project.path)
    assert result.exit_code == 2
    assert "unknown finished" in result.err
