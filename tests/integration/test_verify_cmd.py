"""``loope verify``: the configured gate (and metric) once, for hooks and CI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXED_CALC, GATE, PYTHON, Project, one_error_line

STOP_HOOK_INPUT = {
    "session_id": "abc123",
    "transcript_path": "/tmp/transcript.jsonl",
    "cwd": "/tmp",
    "hook_event_name": "Stop",
    "stop_hook_active": False,
}


def configure(proj: Project, **settings: object) -> None:
    lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    proj.write("loope.toml", "\n".join(lines) + "\n")


def fix(proj: Project) -> None:
    proj.write("calc.py", FIXED_CALC)


def hook(proj: Project, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``loope verify --hook claude`` as Claude Code runs a Stop hook: a process, the hook's JSON on stdin."""
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("LOOPE_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "loope", "verify", "--hook", "claude"],
        cwd=proj.path,
        input=json.dumps(STOP_HOOK_INPUT) if stdin is None else stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


# -- the verdict --------------------------------------------------------------------------------------


def test_a_failing_gate_exits_1_and_lists_the_failures(project, cli):
    configure(project, verify_cmd=GATE)
    result = cli("verify", cwd=project.path)
    assert result.exit_code == 1, result.out + result.err
    lines = result.out.splitlines()
    assert lines[0] == f"FAIL: {GATE} (exit 1)"
    assert any(line.startswith("  tests/test_calc.py::test_add:") for line in lines)
    assert any(line.startswith("  tests/test_calc.py::test_add_negative:") for line in lines)


def test_a_passing_gate_exits_0(project, cli):
    configure(project, verify_cmd=GATE)
    fix(project)
    result = cli("verify", cwd=project.path)
    assert result.exit_code == 0, result.out + result.err
    assert result.out.splitlines() == [f"PASS: {GATE} (exit 0)"]


def test_verify_runs_on_the_tree_as_it_is_and_leaves_it_alone(project, cli):
    configure(project, verify_cmd=GATE)
    fix(project)  # uncommitted: verify sees the working tree, not HEAD
    before = project.git("status", "--porcelain")
    assert cli("verify", cwd=project.path).exit_code == 0
    assert project.git("status", "--porcelain") == before
    assert project.read("calc.py") == FIXED_CALC
    assert not (project.path / ".loope" / "runs").exists()


def test_json_has_the_verdict_fields(project, cli):
    configure(project, verify_cmd=GATE)
    failing = cli("verify", "--json", cwd=project.path)
    assert failing.exit_code == 1, failing.out + failing.err
    data = json.loads(failing.out)
    assert set(data) >= {"command", "passed", "exit_code", "failures", "score"}
    assert (data["command"], data["passed"], data["exit_code"], data["score"]) == (GATE, False, 1, None)
    assert [f["test"] for f in data["failures"]] == [
        "tests/test_calc.py::test_add",
        "tests/test_calc.py::test_add_negative",
    ]
    assert all(f["message"] for f in data["failures"])
    fix(project)
    passing = cli("verify", "--json", cwd=project.path)
    assert passing.exit_code == 0
    assert json.loads(passing.out) | {"command": None} == {
        "command": None,
        "passed": True,
        "exit_code": 0,
        "failures": [],
        "score": None,
    }


def test_the_gate_gets_the_users_environment_without_loopes_variables(project, cli, monkeypatch):
    monkeypatch.setenv("LOOPE_RUN_ID", "0001-leaked")
    monkeypatch.setenv("MY_SETTING", "kept")
    configure(project, verify_cmd='test "$MY_SETTING" = kept && test -z "$LOOPE_RUN_ID"')
    result = cli("verify", cwd=project.path)
    assert result.exit_code == 0, result.out + result.err


def test_workdir_points_verify_at_another_directory(project, cli, tmp_path):
    configure(project, verify_cmd="test -f calc.py")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = cli("verify", "--workdir", str(project.path), cwd=elsewhere)
    assert result.exit_code == 0, result.out + result.err


def test_a_gate_in_pyproject_tool_loope_is_used(project, cli):
    project.write("pyproject.toml", f"[tool.loope]\ngate = {json.dumps(GATE)}\n")
    fix(project)
    result = cli("verify", cwd=project.path)
    assert result.exit_code == 0, result.out + result.err
    assert result.out.startswith(f"PASS: {GATE}")


# -- with a metric ----------------------------------------------------------------------------------------


@pytest.fixture
def scored(project: Project) -> Project:
    fix(project)
    project.write("measure.py", "print('benchmark v1.2.3')\nprint('score:', 42.5)\n")
    configure(project, verify_cmd=GATE, metric_cmd=f"{PYTHON} measure.py", direction="lower")
    return project


def test_with_a_metric_verify_prints_the_score(scored, cli):
    result = cli("verify", cwd=scored.path)
    assert result.exit_code == 0, result.out + result.err
    assert result.out.splitlines() == [f"PASS: {GATE} (exit 0)", "score: 42.5 (lower is better)"]


def test_json_with_a_metric(scored, cli):
    result = cli("verify", "--json", cwd=scored.path)
    assert result.exit_code == 0, result.out + result.err
    data = json.loads(result.out)
    assert (data["passed"], data["score"], data["direction"], data["metric_error"]) == (True, 42.5, "lower", None)


def test_the_metric_repeat_setting_takes_the_median(scored, cli, tmp_path):
    counter = tmp_path / "calls"
    scored.write(
        "measure.py",
        "import pathlib\n"
        f"c = pathlib.Path({str(counter)!r})\n"
        "n = int(c.read_text()) if c.exists() else 0\n"
        "c.write_text(str(n + 1))\n"
        "print([3, 9, 5][n])\n",
    )
    with (scored.path / "loope.toml").open("a") as toml:
        toml.write("metric_repeat = 3\n")
    result = cli("verify", "--json", cwd=scored.path)
    assert json.loads(result.out)["score"] == 5
    assert counter.read_text() == "3"


def test_a_metric_that_prints_no_number_fails_verify(scored, cli):
    scored.write("measure.py", "print('all good')\n")
    result = cli("verify", cwd=scored.path)
    assert result.exit_code == 1, result.out + result.err
    assert result.out.splitlines()[0] == f"FAIL: {GATE} (exit 0)"  # the gate passed; the verdict did not
    assert "no score: the metric command printed no number (last line: 'all good')" in result.out
    data = json.loads(cli("verify", "--json", cwd=scored.path).out)
    assert data["passed"] is False
    assert data["score"] is None
    assert "printed no number" in data["metric_error"]


def test_the_metric_is_not_run_when_the_gate_fails(scored, cli, tmp_path):
    marker = tmp_path / "metric-ran"
    scored.write("measure.py", f"open({str(marker)!r}, 'w').write('yes')\nprint(1)\n")
    scored.write("calc.py", "def add(a, b):\n    return a - b\n")
    result = cli("verify", "--json", cwd=scored.path)
    assert result.exit_code == 1
    assert json.loads(result.out)["score"] is None
    assert not marker.exists()


# -- configuration errors ------------------------------------------------------------------------------


def test_no_gate_configured_is_one_line_exit_2(project, cli):
    result = cli("verify", cwd=project.path)
    assert result.exit_code == 2
    line = one_error_line(result.err)
    assert "no gate configured" in line
    assert "loope init" in line


def test_invalid_loope_toml_is_one_line_exit_2(project, cli):
    project.write("loope.toml", "verify_cmd = \n")
    result = cli("verify", cwd=project.path)
    assert result.exit_code == 2
    assert "not valid TOML" in one_error_line(result.err)


@pytest.mark.parametrize("direction", [None, "sideways"])
def test_a_metric_without_a_valid_direction_is_one_line_exit_2(project, cli, direction):
    settings = {"verify_cmd": "true", "metric_cmd": "echo 3"}
    if direction:
        settings["direction"] = direction
    configure(project, **settings)
    result = cli("verify", cwd=project.path)
    assert result.exit_code == 2, result.out + result.err
    line = one_error_line(result.err)
    assert "loope.toml" in line
    assert 'direction = "lower"' in line


# -- the Claude Code Stop hook ----------------------------------------------------------------------------


def test_hook_claude_blocks_the_stop_with_the_failures_on_stderr(project):
    configure(project, verify_cmd=GATE, max_attempts=5)
    done = hook(project)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "fails (attempt 1 of 5)" in done.stderr
    assert "- tests/test_calc.py::test_add:" in done.stderr
    assert "- tests/test_calc.py::test_add_negative:" in done.stderr
    assert done.stdout == ""
    again = hook(project)
    assert again.returncode == 2
    assert "attempt 2 of 5" in again.stderr


def test_hook_claude_lets_a_passing_session_stop_and_resets_the_count(project):
    configure(project, verify_cmd=GATE, max_attempts=5)
    assert hook(project).returncode == 2
    fix(project)
    passed = hook(project)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert passed.stderr == ""
    project.write("calc.py", "def add(a, b):\n    return 0\n")
    broken = hook(project)
    assert broken.returncode == 2
    assert "attempt 1 of 5" in broken.stderr  # counting starts again after a pass


def test_hook_claude_gives_up_after_max_attempts_failures(project):
    configure(project, verify_cmd=GATE, max_attempts=2)
    codes = [hook(project).returncode for _ in range(2)]
    assert codes == [2, 2]
    gave_up = hook(project)
    assert gave_up.returncode == 0, gave_up.stdout + gave_up.stderr
    assert "the gate still fails after 2 attempts; stopping here" in gave_up.stderr
    # The next session starts counting afresh.
    fresh = hook(project)
    assert fresh.returncode == 2
    assert "attempt 1 of 2" in fresh.stderr


def test_hook_claude_reports_a_metric_without_a_number(scored):
    scored.write("measure.py", "print('fast enough')\n")
    done = hook(scored)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "printed no number" in done.stderr


def test_hook_claude_tolerates_an_empty_or_odd_stdin(project):
    configure(project, verify_cmd=GATE)
    fix(project)
    assert hook(project, stdin="").returncode == 0
    assert hook(project, stdin="not json").returncode == 0


def test_hook_claude_with_a_broken_configuration_does_not_trap_the_session(project):
    """A Stop hook's exit 2 keeps the agent working; a configuration error must not do that for ever."""
    done = hook(project)  # no loope.toml: no gate
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no gate configured" in done.stderr
    assert "Traceback" not in done.stderr


def test_hook_state_lives_in_loopes_own_directory(project):
    configure(project, verify_cmd=GATE, max_attempts=3)
    hook(project)
    state = Path(project.path / ".loope" / "hook-attempts.json")
    assert json.loads(state.read_text()) == {"attempts": 1}
    assert project.git("status", "--porcelain", "--", ".loope") == ""  # git-ignored
