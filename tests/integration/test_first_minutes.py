"""The first five minutes: a dry run that checks the real set-up, init that writes nothing misleading, clear errors."""

from __future__ import annotations

import json

from tests.conftest import FIX, GATE, no_loope_runs, one_error_line


def test_dry_run_checks_the_real_agents_before_running_stubs(project, cli, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # neither claude nor codex is installed
    result = cli("run", "add a changelog", "--dry-run", cwd=project.path)
    assert result.exit_code == 2
    line = one_error_line(result.err)
    assert "claude: claude is not installed" in line
    assert "codex: codex is not installed" in line
    assert no_loope_runs(project.path)


def test_dry_run_runs_one_stub_per_reviewer_and_leaves_no_lesson(project, cli):
    args = ("--implementer", "exec:true", "--reviewer", "exec:true", "--reviewer", "exec:echo")
    result = cli("run", "add a changelog", "--dry-run", *args, "--plain", cwd=project.path)
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert [s["role"] for s in run["steps"]].count("reviewer") == 2
    assert cli("lessons", cwd=project.path).out.startswith("no lessons yet")


def test_init_never_writes_a_placeholder_as_the_goal(project, cli):
    assert cli("init", cwd=project.path).exit_code == 0
    config = project.read("loope.toml")
    assert "\ngoal = " not in config
    assert "# goal = " in config
    result = cli("run", cwd=project.path)
    assert result.exit_code == 2
    assert "no goal" in one_error_line(result.err)


def test_init_hooks_carry_a_command_that_works_on_any_machine(project, cli):
    assert cli("init", "--goal", "fix add", "--hooks", "claude", cwd=project.path).exit_code == 0
    settings = json.loads(project.read(".claude/settings.json"))
    (command,) = [h["command"] for group in settings["hooks"]["Stop"] for h in group["hooks"]]
    assert command == "loope verify --hook claude"  # from PATH, not this machine's absolute path


def test_init_and_run_accept_the_same_names(project, agent_script, cli):
    assert cli("init", "--goal", "g", "--max-iters", "4", "--metric-cmd", "echo 1", "--direction", "lower",
               cwd=project.path).exit_code == 0  # fmt: skip
    config = project.read("loope.toml")
    assert "max_attempts = 4" in config
    assert 'metric_cmd = "echo 1"' in config
    project.path.joinpath("loope.toml").unlink()
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE,
        "--max-attempts", "1", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    assert project.run_json()["max_iters"] == 1


def test_an_unknown_adapter_gets_did_you_mean(project, cli):
    result = cli("run", "fix add", "--implementer", "claud", cwd=project.path)
    assert result.exit_code == 2
    assert "did you mean 'claude'?" in one_error_line(result.err)


def test_a_blank_agent_bin_variable_is_ignored(project, cli, monkeypatch):
    monkeypatch.setenv("LOOPE_CLAUDE_BIN", "  ")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    result = cli("run", "fix add", "--no-review", cwd=project.path)
    assert result.exit_code == 2
    assert "claude is not installed (claude not found on PATH)" in one_error_line(result.err)


def test_recalled_memories_come_before_the_state_file_and_the_critique():
    from loope.engine.prompts import PromptContext

    prompt = PromptContext(
        run_id="0001-x", goal="g", iteration=2, max_iters=3, state_path="/s", state_text="STATE-TEXT",
        memories="MEMORY-TEXT", critique="CRITIQUE-TEXT",
    ).implementer()  # fmt: skip
    assert prompt.index("MEMORY-TEXT") < prompt.index("STATE-TEXT") < prompt.index("CRITIQUE-TEXT")


def test_doctor_prints_each_hint_once(project, cli, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    result = cli("doctor", cwd=project.path)
    text = result.out + result.err
    assert text.count("npm install -g @anthropic-ai/claude-code") == 1
    assert text.count("npm install -g @openai/codex") == 1


def test_a_notification_that_failed_is_mentioned_at_the_end(project, agent_script, cli):
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE,
        "--notify", "webhook:http://127.0.0.1:9/hook", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err  # a notifier never fails the run
    assert "notifications: " in result.err
    assert "notify.log" in result.err


def test_a_closed_stdout_never_kills_the_run(project, agent_script):
    import subprocess
    import sys

    argv = [sys.executable, "-m", "loope", "run", "fix add", "--implementer", agent_script(FIX), "--no-review",
            "--verify-cmd", GATE, "--plain"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=project.path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()  # `| head -1`: one line, then the reader goes away
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    run = json.loads(next((project.path / ".loope" / "runs").iterdir()).joinpath("run.json").read_text())
    assert run["stop_reason"] == "converged"
