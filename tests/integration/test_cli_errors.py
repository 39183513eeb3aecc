"""Bad input: one clear ``loope: error:`` line on stderr, exit 2, no traceback, no run left behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIX, GATE, no_loope_runs, one_error_line


def exec_ok(agent_script) -> str:  # type: ignore[no-untyped-def]
    return agent_script(FIX)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--bogus-flag"], "--bogus-flag"),
        (["--max-iters", "0"], "--max-iters"),
        (["--max-iters", "many"], "--max-iters"),
        (["--stall-after", "0"], "--stall-after"),
        (["--max-time", "5 parsecs"], "'5 parsecs' is not a duration"),
        (["--timeout", "soon"], "--timeout"),
        (["--workspace", "elsewhere"], "--workspace"),
        (["--preset", "nope"], "unknown preset 'nope'"),
        (["--metric-cmd", "echo 1"], "--direction"),
        (["--min-improvement", "lots"], "--min-improvement"),
    ],
)
def test_bad_flags(project, agent_script, cli, args, expected):
    result = cli("run", "fix add", "--implementer", exec_ok(agent_script), "--no-review", *args, cwd=project.path)
    assert result.exit_code == 2, result.out + result.err
    assert expected.lower() in one_error_line(result.err).lower()
    assert no_loope_runs(project.path)


def test_an_unknown_adapter_lists_the_known_ones(project, cli):
    result = cli("run", "fix add", "--implementer", "clippy", cwd=project.path)
    assert result.exit_code == 2
    line = one_error_line(result.err)
    assert "unknown agent 'clippy'" in line
    for name in ("claude", "codex", "stub", "exec"):
        assert name in line
    assert no_loope_runs(project.path)


def test_an_unknown_reviewer_is_refused_before_anything_runs(project, agent_script, cli, tmp_path):
    marker = tmp_path / "ran"
    implementer = agent_script(f"pathlib.Path({str(marker)!r}).touch()")
    result = cli("run", "fix add", "--implementer", implementer, "--reviewers", "stub,nonesuch", cwd=project.path)
    assert result.exit_code == 2
    assert "unknown agent 'nonesuch'" in one_error_line(result.err)
    assert not marker.exists()
    assert no_loope_runs(project.path)


@pytest.mark.parametrize(
    "command", ["exec:/no/such/agent.sh --flag", "exec:loope-test-no-such-program", "exec:./missing.py"]
)
def test_an_exec_command_that_is_not_found(project, cli, command):
    result = cli("run", "fix add", "--implementer", command, "--no-review", cwd=project.path)
    assert result.exit_code == 2
    assert "command not found" in one_error_line(result.err)
    assert no_loope_runs(project.path)


def test_an_empty_exec_command(project, cli):
    result = cli("run", "fix add", "--implementer", "exec:", "--no-review", cwd=project.path)
    assert result.exit_code == 2
    assert "exec: needs a command" in one_error_line(result.err)


def test_a_workdir_that_does_not_exist(project, agent_script, cli, tmp_path):
    missing = tmp_path / "nowhere"
    result = cli("run", "fix add", "--implementer", exec_ok(agent_script), "--workdir", str(missing), cwd=project.path)
    assert result.exit_code == 2
    assert "does not exist" in one_error_line(result.err)
    assert not missing.exists()


@pytest.mark.parametrize("goal", ["", "   "])
def test_an_empty_goal(project, agent_script, cli, goal):
    result = cli("run", goal, "--implementer", exec_ok(agent_script), "--no-review", cwd=project.path)
    assert result.exit_code == 2
    assert "goal" in one_error_line(result.err)
    assert no_loope_runs(project.path)


def test_no_goal_at_all(project, agent_script, cli):
    result = cli("run", "--implementer", exec_ok(agent_script), "--no-review", cwd=project.path)
    assert result.exit_code == 2
    assert "no goal" in one_error_line(result.err)


def test_a_goal_file_that_does_not_exist(project, cli, tmp_path):
    result = cli("run", "--goal-file", str(tmp_path / "goal.md"), "--implementer", "stub", cwd=project.path)
    assert result.exit_code == 2
    one_error_line(result.err)
    assert no_loope_runs(project.path)


def test_worktree_mode_outside_git(tmp_path, agent_script, cli):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "calc.py").write_text("x = 1\n")
    result = cli(
        "run", "fix", "--workspace", "worktree", "--implementer", exec_ok(agent_script), "--no-review", cwd=plain
    )
    assert result.exit_code == 2
    line = one_error_line(result.err)
    assert "not in a git repository" in line
    assert "--workspace copy" in line
    assert no_loope_runs(plain)
    assert sorted(p.name for p in plain.iterdir() if p.name != ".loope") == ["calc.py"]


def test_a_run_branch_that_already_exists(project, agent_script, cli):
    project.git("branch", "taken")
    result = cli(
        "run", "fix", "--branch", "taken", "--implementer", exec_ok(agent_script), "--no-review", cwd=project.path
    )
    assert result.exit_code == 2
    assert "branch taken already exists" in one_error_line(result.err)
    assert no_loope_runs(project.path)
    assert "loope" not in project.git("worktree", "list")


def test_a_bad_loope_toml_names_the_file(project, agent_script, cli):
    project.write("loope.toml", "max_iters = 0\n")
    result = cli("run", "fix", "--implementer", exec_ok(agent_script), "--no-review", cwd=project.path)
    assert result.exit_code == 2
    assert "loope.toml: max_iters" in one_error_line(result.err)
    assert no_loope_runs(project.path)


def run_twice(project, agent_script, cli):  # type: ignore[no-untyped-def]
    for goal in ("first goal", "second goal"):
        result = cli(
            "run", goal, "--implementer", exec_ok(agent_script), "--no-review", "--verify-cmd", GATE, cwd=project.path
        )
        assert result.exit_code == 0, result.out + result.err


@pytest.mark.parametrize("command", ["show", "apply"])
def test_a_run_id_that_matches_no_run_or_several(project, agent_script, cli, command):
    run_twice(project, agent_script, cli)
    unknown = cli(command, "0042", cwd=project.path)
    assert unknown.exit_code == 2
    assert "no run matches '0042'" in one_error_line(unknown.err)
    ambiguous = cli(command, "000", cwd=project.path)
    assert ambiguous.exit_code == 2
    line = one_error_line(ambiguous.err)
    assert "matches 2 runs" in line
    assert "0001-first-goal" in line
    assert "0002-second-goal" in line


def test_show_without_any_run(project, cli):
    result = cli("show", "1", cwd=project.path)
    assert result.exit_code == 2
    assert "no runs" in one_error_line(result.err)


def test_the_console_script_prints_one_line_too(project, tmp_path):
    loope = Path(sys.executable).parent / "loope"
    done = subprocess.run(
        [str(loope), "run", "fix", "--implementer", "nosuchagent"],
        cwd=project.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "unknown agent 'nosuchagent'" in one_error_line(done.stderr)
    assert done.stdout == ""
    assert no_loope_runs(project.path)
