"""Every command run in a subdirectory acts on the repository root's ``.loope/``, as git does."""

from __future__ import annotations

from tests.conftest import FIX, GATE


def test_run_and_the_other_commands_from_a_subdirectory_use_the_roots_runs(project, agent_script, cli):
    sub = project.path / "tests"
    result = cli("run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE, cwd=sub)
    assert result.exit_code == 0, result.out + result.err
    assert not (sub / ".loope").exists()
    (rundir,) = project.runs()
    run_id = rundir.name
    assert run_id in cli("runs", cwd=sub).out
    assert cli("status", run_id[:4], cwd=sub).exit_code == 0
    assert "converged" in cli("show", run_id[:4], cwd=sub).out
    assert cli("apply", run_id[:4], "--dry-run", cwd=sub).exit_code == 0


def test_workdir_still_wins(project, agent_script, cli, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert cli("runs", "--workdir", str(other), cwd=project.path / "tests").out.startswith("no runs yet")


def test_a_runs_own_workspace_belongs_to_the_project_above_it(project, agent_script, cli):
    cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE, "--keep-workspace",
        cwd=project.path,
    )  # fmt: skip
    workspace = project.runs()[-1] / "workspace"
    assert project.runs()[-1].name in cli("runs", cwd=workspace).out
