"""A finished run's worktree is removed (its result is on the run branch and in the run dir), unless kept.

``show --diff``, ``apply``, ``status`` and ``continue`` work without it; ``continue`` makes it again
from the branch, with the agent's state file. Nothing in the worktree that is in no commit is lost:
such a worktree is kept. A removal that fails leaves the run as it finished, and says so.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from loope.workspace import overlayfs
from tests.conftest import FIX, FIXED_CALC, GATE, git, in_workspace, one_error_line, run_file, unsandboxed
from tests.integration.test_control import DEADLINE_S, Runners, read_json, wait_for

NOTE = "print('state file said: ' + pathlib.Path(os.environ['LOOPE_STATE_FILE']).read_text().splitlines()[-1])\n"
REMEMBER = (
    "state = pathlib.Path(os.environ['LOOPE_STATE_FILE']); state.write_text(state.read_text() + 'REMEMBER-ME-7\\n')\n"
)


@pytest.fixture
def cli(cli):  # type: ignore[no-untyped-def]
    """A worktree's removal and making again; some of these agents change file attributes and read files
    the test wrote: unsandboxed runs."""
    return in_workspace(unsandboxed(cli), "worktree")


def worktrees(project) -> str:  # type: ignore[no-untyped-def]
    return project.git("worktree", "list", "--porcelain")


def run_fix(project, agent_script, cli, *extra: str, body: str = FIX + REMEMBER):  # type: ignore[no-untyped-def]
    result = cli(
        "run", "fix add", "--implementer", agent_script(body), "--no-review", "--verify-cmd", GATE,
        "--plain", *extra, cwd=project.path,
    )  # fmt: skip
    return result, project.run_json(), project.runs()[-1]


def test_a_finished_run_s_worktree_is_removed_and_its_result_stays_on_the_branch(project, agent_script, cli):
    result, run, rundir = run_fix(project, agent_script, cli)

    assert result.exit_code == 0, result.out + result.err
    ws = run["workspace"]
    assert (ws["removed"], ws["note"]) == (True, None)
    assert not (rundir / "workspace").exists()
    assert not (rundir / "workspace.removed").exists()
    assert str(rundir) not in worktrees(project)  # git forgot it too
    assert project.git("show", f"{ws['branch']}:calc.py") == FIXED_CALC
    assert "REMEMBER-ME-7" in (rundir / "state.md").read_text()  # the agent's memory is kept in the run dir
    assert "removed when the run ended" in (rundir / "report.md").read_text()

    diff = cli("show", run["run_id"], "--diff", cwd=project.path)
    assert diff.exit_code == 0
    assert "+    return a + b" in diff.out
    status = cli("status", run["run_id"], "--json", cwd=project.path)
    assert json.loads(status.out)["frontmatter"]["status"] == "in-progress", status.out
    applied = cli("apply", run["run_id"], cwd=project.path)
    assert applied.exit_code == 0, applied.out + applied.err
    assert project.read("calc.py") == FIXED_CALC


def test_keep_workspace_keeps_it_from_the_flag_or_loope_toml(project, agent_script, cli):
    result, run, rundir = run_fix(project, agent_script, cli, "--keep-workspace")
    assert result.exit_code == 0, result.out + result.err
    assert run["workspace"]["removed"] is False
    assert (Path(run["workspace"]["path"]) / "calc.py").read_text() == FIXED_CALC
    assert str(rundir / "workspace") in worktrees(project)

    project.write("loope.toml", "keep_workspace = true\n")
    project.commit("keep workspaces")
    result, run, rundir = run_fix(project, agent_script, cli)
    assert result.exit_code == 0, result.out + result.err
    assert (rundir / "workspace" / "calc.py").read_text() == FIXED_CALC


def test_keep_workspace_on_an_overlay_run_says_where_its_files_are(project, agent_script, cli):
    if not overlayfs.probe(project.path.parent).works:
        pytest.skip("overlay workspaces do not work on this machine")
    result, run, rundir = run_fix(project, agent_script, cli, "--workspace", "overlay", "--keep-workspace")

    assert result.exit_code == 0, result.out + result.err
    assert run["workspace"]["removed"] is False
    assert run["workspace"]["note"].startswith("not kept: an overlay workspace is a mount that goes with its runner")
    assert "loope branch RUN" in run["workspace"]["note"]
    assert "workspace not kept: an overlay workspace" in result.out
    assert "REMEMBER-ME-7" in (rundir / "state.md").read_text()  # what only the tree held is in the run dir
    assert run_file(run, "calc.py") == FIXED_CALC


def test_continue_makes_the_worktree_again_with_the_state_file(project, agent_script, cli, tmp_path):
    calls = tmp_path / "calls"
    body = (
        f"log = pathlib.Path({str(calls)!r}); n = int(log.read_text()) + 1 if log.exists() else 1\n"
        "log.write_text(str(n))\n"
        f"if n == 1:\n    {REMEMBER}    print('not yet'); sys.exit(0)\n"
        f"{NOTE}{FIX}"
    )
    first, run, rundir = run_fix(project, agent_script, cli, "--max-iters", "1", body=body)
    assert first.exit_code == 1
    assert run["workspace"]["removed"] is True

    result = cli("continue", run["run_id"], "--plain", cwd=project.path)

    assert result.exit_code == 0, result.out + result.err
    after = project.run_json()
    assert after["stop_reason"] == "converged"
    assert after["workspace"]["removed"] is True
    (second,) = sorted((rundir / "agents").glob("03-implementer-*"))
    assert "state file said: REMEMBER-ME-7" in (second / "result.md").read_text()
    assert project.git("show", f"{after['workspace']['branch']}:calc.py") == FIXED_CALC


def test_continue_makes_again_a_kept_worktree_the_user_deleted(project, agent_script, cli):
    first, run, rundir = run_fix(
        project, agent_script, cli, "--keep-workspace", "--max-iters", "1", body="print('no')\n"
    )
    assert first.exit_code == 1
    shutil.rmtree(rundir / "workspace")

    result = cli("continue", run["run_id"], "--plain", "--max-iters", "1", cwd=project.path)

    assert result.exit_code == 1, result.out + result.err  # the agent still changes nothing: max_iters again
    assert (rundir / "workspace" / "calc.py").exists()  # kept, as the saved spec says
    assert project.run_json()["iterations"] == 2


def test_continue_goes_on_while_the_user_has_the_run_branch_checked_out(project, agent_script, cli):
    first, run, _ = run_fix(project, agent_script, cli, "--max-iters", "1", body="print('no')\n")
    assert first.exit_code == 1
    project.git("checkout", "-q", run["workspace"]["branch"])  # the run's worktree is detached: the branch is free

    result = cli("continue", run["run_id"], "--plain", "--max-iters", "1", cwd=project.path)

    assert result.exit_code == 1, result.out + result.err
    assert project.run_json()["iterations"] == 2
    assert project.git("branch", "--show-current").strip() == run["workspace"]["branch"]


def test_continue_says_so_when_the_run_s_commits_are_gone(project, agent_script, cli):
    first, run, rundir = run_fix(project, agent_script, cli, "--max-iters", "1", body="print('no')\n")
    assert first.exit_code == 1
    record = json.loads((rundir / "run.json").read_text())
    record["workspace"]["head"] = record["completed_head"] = "0" * 40  # as if the user pruned them
    (rundir / "run.json").write_text(json.dumps(record))

    result = cli("continue", run["run_id"], "--plain", cwd=project.path)

    assert result.exit_code == 2
    line = one_error_line(result.err)
    assert "its workspace was removed and its last commit 0000000000 is gone" in line


def test_a_worktree_the_user_changed_during_the_run_is_kept(project, tmp_path):
    agent = tmp_path / "agent.sh"
    agent.write_text("#!/bin/sh\necho ready\nexec sleep 300\n")
    runners = Runners(project)
    try:
        runner = runners.start(
            "run", "fix add", "--implementer", f"exec:sh {agent}", "--no-review", "--verify-cmd", GATE, "--plain",
            "--workspace", "worktree",
        )  # fmt: skip

        def step_ready() -> bool:
            runs = project.runs()
            logs = list((runs[-1] / "agents").glob("01-*/transcript.log")) if runs else []
            return bool(logs) and "ready" in logs[0].read_text()

        wait_for(step_ready, "the implementer to start")
        workspace = project.runs()[-1] / "workspace"
        (workspace / "notes.txt").write_text("draft\n")  # the user's edit, in no commit of the run
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=DEADLINE_S) == 143, runners.log()
    finally:
        runners.cleanup()

    ws = read_json(project.runs()[-1] / "run.json")["workspace"]
    assert ws["removed"] is False
    assert ws["note"] == "kept: notes.txt changed after the last commit"
    assert (workspace / "notes.txt").read_text() == "draft\n"
    assert "workspace kept: notes.txt changed after the last commit" in runners.log()


@pytest.fixture
def chattr(tmp_path):  # type: ignore[no-untyped-def]
    """Skips where the immutable attribute cannot be set; clears every one a test set, so tmp_path can go."""
    probe = tmp_path / "probe"
    probe.write_text("")
    done = subprocess.run(["chattr", "+i", str(probe)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not permitted here: {done.stderr.decode().strip()}")
    subprocess.run(["chattr", "-i", str(probe)], check=True)
    yield
    subprocess.run(["chattr", "-R", "-i", str(tmp_path)], capture_output=True, check=False)


def once(marker: Path, command: str) -> str:
    """Agent code that runs ``command`` (argv as a Python list) on its first call only."""
    return (
        f"if not os.path.exists({str(marker)!r}):\n"
        f"    import subprocess; subprocess.run({command}, check=True); open({str(marker)!r}, 'w').close()\n"
    )


def test_a_removal_that_cannot_delete_everything_leaves_the_run_finished_and_says_where(
    project, agent_script, cli, tmp_path, chattr
):
    body = FIX + once(tmp_path / "once", "['chattr', '+i', 'calc.py']")

    result, run, rundir = run_fix(project, agent_script, cli, body=body)

    assert result.exit_code == 0, result.out + result.err
    ws = run["workspace"]
    assert ws["removed"] is True
    assert ws["note"].startswith(f"removed, but {rundir / 'workspace.removed'} could not be deleted")
    assert not (rundir / "workspace").exists()
    assert str(rundir) not in worktrees(project)
    subprocess.run(["chattr", "-R", "-i", str(rundir)], check=True)
    # The run goes on from its branch; the next removal clears what the last one left.
    again = cli("continue", run["run_id"], "--goal", "keep add", "--max-iters", "1", "--plain", cwd=project.path)
    assert "Traceback" not in again.err
    assert project.run_json()["iterations"] == 2, again.out + again.err
    assert (project.run_json()["workspace"]["removed"], project.run_json()["workspace"]["note"]) == (True, None)
    assert not (rundir / "workspace").exists()
    assert not (rundir / "workspace.removed").exists()


def test_a_worktree_that_cannot_be_moved_is_kept_and_the_run_still_finishes(
    project, agent_script, cli, tmp_path, chattr
):
    body = FIX + once(tmp_path / "once", "['chattr', '+i', os.environ['LOOPE_WORKSPACE']]")

    result, run, rundir = run_fix(project, agent_script, cli, body=body)

    assert result.exit_code == 0, result.out + result.err
    assert run["stop_reason"] == "converged"
    ws = run["workspace"]
    assert (ws["removed"], ws["note"]) == (False, "kept: it could not be removed (Operation not permitted)")
    assert (rundir / "workspace" / "calc.py").read_text() == FIXED_CALC
    assert git(project.path, "show", f"{ws['branch']}:calc.py") == FIXED_CALC
