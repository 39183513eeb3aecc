"""``loope init``: the gate for each toolchain, loope.toml, the program, hook files, and `loope run` afterwards."""

from __future__ import annotations

import json
import os
import stat
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import FIX, GATE, Project, no_loope_runs, one_error_line

FAKE_TOOL = """\
#!/bin/sh
# A stand-in for a toolchain command: logs how it was called, then exits as configured.
echo "$(basename "$0") $*" >> "$FAKE_LOG"
name="$(basename "$0")_$1"
code=$(cat "$FAKE_CODES/$name" 2>/dev/null || echo 0)
exit "$code"
"""


class FakeTools:
    """Fake toolchain commands first on PATH; each call is logged, each ``tool sub`` exits as told."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bin = root / "bin"
        self.codes = root / "codes"
        self.log = root / "calls.log"
        self.bin.mkdir(parents=True)
        self.codes.mkdir(parents=True)
        monkeypatch.setenv("PATH", f"{self.bin}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("FAKE_LOG", str(self.log))
        monkeypatch.setenv("FAKE_CODES", str(self.codes))

    def add(self, name: str, **exit_codes: int) -> None:
        path = self.bin / name
        path.write_text(FAKE_TOOL)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        for sub, code in exit_codes.items():
            (self.codes / f"{name}_{sub}").write_text(str(code))

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeTools:
    return FakeTools(tmp_path / "fake", monkeypatch)


@pytest.fixture
def bare(tmp_path: Path) -> Project:
    """An empty project directory (a git repository without commits)."""
    proj = Project(tmp_path / "bare")
    proj.path.mkdir()
    proj.git("init", "-q", "-b", "main")
    return proj


def config(proj: Project) -> dict:
    return tomllib.loads(proj.read("loope.toml"))


# -- toolchain detection ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("marker", "toolchain", "gate"),
    [
        ("go.mod", "go", "go build ./... && go test ./..."),
        ("Cargo.toml", "cargo", "cargo test"),
        ("pyproject.toml", "python", "python -m pytest -q"),
        ("setup.py", "python", "python -m pytest -q"),
        ("package.json", "node", "npm test --silent"),
        ("Makefile", "make", "make test"),
    ],
)
def test_init_detects_the_gate_from_the_toolchain_marker(bare, cli, marker, toolchain, gate):
    bare.write(marker, "")
    result = cli("init", "--goal", "make it work", cwd=bare.path)
    assert result.exit_code == 0, result.out + result.err
    assert config(bare)["verify_cmd"] == gate
    assert f"gate ({toolchain}): {gate}" in result.out
    assert "wrote  loope.toml" in result.out
    assert "wrote  .loope/program.md" in result.out
    assert "next: loope run" in result.out


def test_the_first_marker_wins(bare, cli):
    bare.write("Makefile", "test:\n\ttrue\n")
    bare.write("go.mod", "module example.com/x\n")
    bare.write("package.json", "{}")
    assert cli("init", cwd=bare.path).exit_code == 0
    assert config(bare)["verify_cmd"] == "go build ./... && go test ./..."


def test_a_go_gate_fails_when_the_tests_fail_even_though_the_build_passes(bare, cli, tools):
    bare.write("go.mod", "module example.com/x\n")
    tools.add("go", build=0, test=1)
    assert cli("init", cwd=bare.path).exit_code == 0
    result = cli("verify", cwd=bare.path)
    assert result.exit_code == 1, result.out + result.err
    assert result.out.startswith("FAIL: go build ./... && go test ./... (exit 1)")
    assert tools.calls() == ["go build ./...", "go test ./..."]


def test_a_go_gate_fails_when_the_build_fails_and_skips_the_tests(bare, cli, tools):
    bare.write("go.mod", "module example.com/x\n")
    tools.add("go", build=2, test=0)
    assert cli("init", cwd=bare.path).exit_code == 0
    result = cli("verify", cwd=bare.path)
    assert result.exit_code == 1, result.out + result.err
    assert "(exit 2)" in result.out
    assert tools.calls() == ["go build ./..."]


def test_a_go_gate_passes_when_both_pass(bare, cli, tools):
    bare.write("go.mod", "module example.com/x\n")
    tools.add("go")
    assert cli("init", cwd=bare.path).exit_code == 0
    result = cli("verify", cwd=bare.path)
    assert result.exit_code == 0, result.out + result.err
    assert result.out.startswith("PASS: go build ./... && go test ./... (exit 0)")


@pytest.mark.parametrize(
    "case",
    [
        ("Cargo.toml", "cargo", "test", "cargo test"),
        ("package.json", "npm", "test", "npm test --silent"),
        ("Makefile", "make", "test", "make test"),
        ("setup.py", "python", "-m", "python -m pytest -q"),
    ],
    ids=["cargo", "npm", "make", "python"],
)
def test_each_detected_gate_runs_its_toolchain_and_follows_its_exit_code(bare, cli, tools, case):
    marker, tool, sub, call = case
    bare.write(marker, "")
    tools.add(tool, **{sub: 0})
    assert cli("init", cwd=bare.path).exit_code == 0
    passing = cli("verify", cwd=bare.path)
    assert passing.exit_code == 0, passing.out + passing.err
    (tools.codes / f"{tool}_{sub}").write_text("1")
    failing = cli("verify", cwd=bare.path)
    assert failing.exit_code == 1, failing.out + failing.err
    assert tools.calls() == [call, call]


def test_a_python_project_is_gated_by_its_real_tests(project, cli, tmp_path, monkeypatch):
    bin_dir = tmp_path / "pybin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    project.write("pyproject.toml", '[project]\nname = "calc"\nversion = "0"\n')
    assert cli("init", "--goal", "fix add", cwd=project.path).exit_code == 0
    failing = cli("verify", cwd=project.path)
    assert failing.exit_code == 1, failing.out + failing.err
    assert "tests/test_calc.py::test_add" in failing.out
    project.write("calc.py", "def add(a, b):\n    return a + b\n")
    passing = cli("verify", cwd=project.path)
    assert passing.exit_code == 0, passing.out + passing.err
    assert passing.out.startswith("PASS: python -m pytest -q (exit 0)")


def test_without_a_marker_the_gate_fails_closed_and_says_to_set_verify_cmd(bare, cli):
    result = cli("init", "--goal", "anything", cwd=bare.path)
    assert result.exit_code == 0, result.out + result.err
    assert "gate (none):" in result.out
    assert "no toolchain found" in result.err
    assert "--verify-cmd" in result.err
    verify = cli("verify", cwd=bare.path)
    assert verify.exit_code == 1, verify.out + verify.err
    assert verify.out.startswith("FAIL:")
    assert "no verify command is set" in verify.out
    assert "loope init --force --verify-cmd CMD" in verify.out


def test_verify_cmd_overrides_detection(bare, cli):
    bare.write("go.mod", "")
    result = cli("init", "--verify-cmd", "./check.sh --all", cwd=bare.path)
    assert result.exit_code == 0, result.out + result.err
    assert config(bare)["verify_cmd"] == "./check.sh --all"
    assert "gate (given): ./check.sh --all" in result.out


# -- loope.toml and the program -----------------------------------------------------------------------


def test_loope_toml_is_valid_toml_with_every_setting(bare, cli):
    goal = 'make "fast" path quicker — without \\ breaking'
    result = cli(
        "init", "--goal", goal, "--editable", "src/**", "--editable", "lib/*.py", "--protect", "tests/**",
        "--max-attempts", "7", "--metric", "python bench.py --quick", "--direction", "lower",
        "--verify-cmd", "make test", cwd=bare.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    assert config(bare) == {
        "goal": goal,
        "max_attempts": 7,
        "verify_cmd": "make test",
        "metric_cmd": "python bench.py --quick",
        "direction": "lower",
        "editable": ["src/**", "lib/*.py"],
        "protect": ["tests/**"],
    }


def test_loope_toml_without_a_metric_has_no_metric_settings(bare, cli):
    assert cli("init", "--goal", "fix it", cwd=bare.path).exit_code == 0
    data = config(bare)
    assert "metric_cmd" not in data
    assert "direction" not in data
    assert (data["max_attempts"], data["editable"], data["protect"]) == (10, [], [])


def test_the_program_states_goal_constraints_protocol_scoring_and_why(bare, cli):
    result = cli(
        "init", "--goal", "cut the p95 latency", "--editable", "src/**", "--protect", "bench/**",
        "--max-attempts", "4", "--metric", "./bench.sh", "--direction", "lower", "--verify-cmd", "make test",
        cwd=bare.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    program = bare.read(".loope/program.md")
    sections = [line for line in program.splitlines() if line.startswith("## ")]
    assert sections == ["## Goal", "## Constraints", "## Protocol", "## Scoring", "## Why the verifier is off-limits"]
    goal = program.split("## Goal\n", 1)[1].split("\n## ", 1)[0]
    assert goal.strip() == "cut the p95 latency"
    constraints = program.split("## Constraints\n", 1)[1].split("\n## ", 1)[0]
    assert "Change only: src/**." in constraints
    # The state file is the agent's memory in `loope run`: the program must not forbid what the prompt asks.
    assert "Never change: loope.toml, .loope/ (except the state file .loope/state.md), bench/**." in constraints
    assert "At most 4 attempts." in constraints
    scoring = program.split("## Scoring\n", 1)[1].split("\n## ", 1)[0]
    assert "`make test`" in scoring
    assert "`./bench.sh`" in scoring
    assert "lower is better" in scoring
    assert "kept" in scoring
    assert "reverted" in scoring
    assert "gate, not a search" not in program
    why = program.split("## Why the verifier is off-limits\n", 1)[1]
    assert "saved settings" in why
    assert "undone" in why


def test_without_a_metric_the_program_says_it_is_a_gate_not_a_search(bare, cli):
    assert cli("init", "--goal", "fix the parser", "--verify-cmd", "make test", cwd=bare.path).exit_code == 0
    program = bare.read(".loope/program.md")
    scoring = program.split("## Scoring\n", 1)[1].split("\n## ", 1)[0]
    assert "This is a gate, not a search" in scoring
    assert "`make test`" in scoring
    assert "Change only: any file that is not protected." in program


def test_existing_files_are_kept_and_named_unless_forced(bare, cli):
    bare.write("loope.toml", 'goal = "mine"\n')
    bare.write(".loope/program.md", "my own program\n")
    result = cli("init", "--goal", "theirs", cwd=bare.path)
    assert result.exit_code == 0, result.out + result.err
    assert "kept   loope.toml (it exists; --force overwrites it)" in result.out
    assert "kept   .loope/program.md (it exists; --force overwrites it)" in result.out
    assert "wrote" not in result.out
    assert bare.read("loope.toml") == 'goal = "mine"\n'
    assert bare.read(".loope/program.md") == "my own program\n"
    forced = cli("init", "--goal", "theirs", "--force", cwd=bare.path)
    assert forced.exit_code == 0, forced.out + forced.err
    assert "kept" not in forced.out
    assert config(bare)["goal"] == "theirs"
    assert "theirs" in bare.read(".loope/program.md")


def test_only_the_missing_file_is_written(bare, cli):
    bare.write("loope.toml", 'goal = "mine"\n')
    result = cli("init", "--goal", "theirs", cwd=bare.path)
    assert "kept   loope.toml" in result.out
    assert "wrote  .loope/program.md" in result.out
    assert bare.read("loope.toml") == 'goal = "mine"\n'


def test_loope_run_with_no_arguments_runs_the_program(project, agent_script, cli):
    result = cli(
        "init", "--goal", "fix add so it returns the sum", "--editable", "calc.py", "--protect", "tests/**",
        "--max-attempts", "2", "--verify-cmd", GATE, cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    implementer = agent_script(FIX)
    with (project.path / "loope.toml").open("a") as toml:
        toml.write(f"implementer = {json.dumps(implementer)}\nreviewers = []\n")
    ran = cli("run", "--plain", cwd=project.path)
    assert ran.exit_code == 0, ran.out + ran.err
    run = project.run_json()
    assert run["goal"] == "fix add so it returns the sum"
    assert (run["stop_reason"], run["iterations"], run["verify_cmd"]) == ("converged", 1, GATE)
    assert [s["adapter"] for s in run["steps"]] == ["exec", "gate"]
    spec = json.loads((project.runs()[-1] / "spec.json").read_text())
    assert (spec["max_iters"], spec["editable"], spec["protect"]) == (2, ["calc.py"], ["tests/**"])
    prompt = (project.runs()[-1] / run["steps"][0]["dir"] / "prompt.md").read_text()
    assert "# Program" in prompt
    assert "## Why the verifier is off-limits" in prompt
    assert "fix add so it returns the sum" in prompt


# -- hooks ----------------------------------------------------------------------------------------------


def stop_commands(settings: dict) -> list[str]:
    return [h["command"] for group in settings["hooks"]["Stop"] for h in group["hooks"]]


def is_loope(command: str, args: str) -> bool:
    program, _, rest = command.partition(" ")
    return rest == args and Path(program).name == "loope"


def test_hooks_claude_writes_a_stop_hook_and_deny_rules(bare, cli):
    result = cli("init", "--hooks", "claude", "--protect", "tests/**", cwd=bare.path)
    assert result.exit_code == 0, result.out + result.err
    assert "wrote  .claude/settings.json" in result.out
    settings = json.loads(bare.read(".claude/settings.json"))
    [command] = stop_commands(settings)
    assert is_loope(command, "verify --hook claude"), command
    deny = settings["permissions"]["deny"]
    for pattern in ("loope.toml", ".loope/**", "tests/**"):
        assert f"Edit({pattern})" in deny
        assert f"Write({pattern})" in deny
    assert (bare.path / "loope.toml").exists()


def test_hooks_claude_merges_into_existing_settings_without_duplicates(bare, cli):
    mine = {
        "model": "opus",
        "env": {"FOO": "1"},
        "hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}],
        },
        "permissions": {"allow": ["Bash(ls)"], "deny": ["Read(.env)", "Edit(loope.toml)"]},
    }
    bare.write(".claude/settings.json", json.dumps(mine))
    first = cli("init", "--hooks", "claude", "--protect", "tests/**", cwd=bare.path)
    assert first.exit_code == 0, first.out + first.err
    assert "merged .claude/settings.json" in first.out
    again = cli("init", "--hooks", "claude", "--protect", "tests/**", cwd=bare.path)
    assert again.exit_code == 0, again.out + again.err
    settings = json.loads(bare.read(".claude/settings.json"))
    assert settings["model"] == "opus"
    assert settings["env"] == {"FOO": "1"}
    assert settings["hooks"]["PreToolUse"] == mine["hooks"]["PreToolUse"]
    commands = stop_commands(settings)
    assert commands[0] == "say done"
    assert len(commands) == 2
    assert is_loope(commands[1], "verify --hook claude")
    deny = settings["permissions"]["deny"]
    assert deny[:2] == ["Read(.env)", "Edit(loope.toml)"]
    assert len(deny) == len(set(deny))
    assert {"Write(loope.toml)", "Edit(.loope/**)", "Write(tests/**)"} <= set(deny)
    assert settings["permissions"]["allow"] == ["Bash(ls)"]


def test_hooks_kiro_writes_an_agent_with_a_stop_hook_and_denied_paths(bare, cli):
    result = cli("init", "--hooks", "kiro", "--protect", "tests/**", cwd=bare.path)
    assert result.exit_code == 0, result.out + result.err
    assert "wrote  .kiro/agents/loop.json" in result.out
    agent = json.loads(bare.read(".kiro/agents/loop.json"))
    [hook] = agent["hooks"]["stop"]
    assert is_loope(hook["command"], "verify"), hook
    assert agent["toolsSettings"]["write"]["deniedPaths"] == ["loope.toml", ".loope/**", "tests/**"]
    assert agent["prompt"] == "file://../../.loope/program.md"
    program = (bare.path / ".kiro" / "agents" / "../../.loope/program.md").resolve()
    assert program == (bare.path / ".loope" / "program.md").resolve()
    assert program.exists()


def test_hooks_kiro_with_editable_writes_the_allowed_paths_too(bare, cli):
    result = cli("init", "--hooks", "kiro", "--editable", "src/**", "--editable", "README.md", cwd=bare.path)
    assert result.exit_code == 0, result.out + result.err
    write = json.loads(bare.read(".kiro/agents/loop.json"))["toolsSettings"]["write"]
    assert write["allowedPaths"] == ["src/**", "README.md"]
    assert write["deniedPaths"] == ["loope.toml", ".loope/**"]
    again = cli("init", "--hooks", "kiro", "--editable", "src/**", cwd=bare.path)
    assert again.exit_code == 0, again.out + again.err
    assert json.loads(bare.read(".kiro/agents/loop.json"))["toolsSettings"]["write"]["allowedPaths"] == [
        "src/**",
        "README.md",
    ]


def test_hooks_kiro_merges_into_an_existing_agent(bare, cli):
    mine = {
        "name": "my-loop",
        "tools": ["read", "write"],
        "hooks": {"stop": [{"command": "notify-send done"}], "agentSpawn": [{"command": "git status"}]},
        "toolsSettings": {"write": {"deniedPaths": ["secrets/**"]}, "shell": {"allowedCommands": ["ls"]}},
    }
    bare.write(".kiro/agents/loop.json", json.dumps(mine))
    for _ in range(2):
        result = cli("init", "--hooks", "kiro", cwd=bare.path)
        assert result.exit_code == 0, result.out + result.err
        assert "merged .kiro/agents/loop.json" in result.out
    agent = json.loads(bare.read(".kiro/agents/loop.json"))
    assert (agent["name"], agent["tools"]) == ("my-loop", ["read", "write"])
    assert agent["hooks"]["agentSpawn"] == [{"command": "git status"}]
    stops = [h["command"] for h in agent["hooks"]["stop"]]
    assert stops[0] == "notify-send done"
    assert len(stops) == 2
    assert is_loope(stops[1], "verify")
    assert agent["toolsSettings"]["write"]["deniedPaths"] == ["secrets/**", "loope.toml", ".loope/**"]
    assert agent["toolsSettings"]["shell"] == {"allowedCommands": ["ls"]}


@pytest.mark.parametrize(
    ("hooks", "rel", "text"),
    [
        ("claude", ".claude/settings.json", '{"model": "opus",'),
        ("kiro", ".kiro/agents/loop.json", "name: loop\n"),
        ("claude", ".claude/settings.json", "[1, 2]"),
    ],
)
def test_a_hook_file_that_is_not_a_json_object_is_refused_and_nothing_is_written(bare, cli, hooks, rel, text):
    path = bare.write(rel, text)
    before = path.read_bytes()
    result = cli("init", "--goal", "x", "--hooks", hooks, cwd=bare.path)
    assert result.exit_code == 2, result.out + result.err
    line = one_error_line(result.err)
    assert rel in line
    assert "JSON" in line
    assert path.read_bytes() == before
    assert not (bare.path / "loope.toml").exists()
    assert not (bare.path / ".loope" / "program.md").exists()


HOOK_FILES = {"claude": ".claude/settings.json", "kiro": ".kiro/agents/loop.json"}


@pytest.mark.parametrize(
    ("hooks", "data", "where"),
    [
        ("claude", {"hooks": []}, "hooks should be a JSON object"),
        ("claude", {"hooks": {"Stop": {}}}, "hooks.Stop should be a JSON array"),
        ("claude", {"permissions": {"deny": "x"}}, "permissions.deny should be a JSON array"),
        ("kiro", {"hooks": {"stop": "loope"}}, "hooks.stop should be a JSON array"),
        ("kiro", {"toolsSettings": {"write": []}}, "toolsSettings.write should be a JSON object"),
    ],
)
def test_a_hook_file_of_another_shape_is_refused_in_one_line(bare, cli, hooks, data, where):
    rel = HOOK_FILES[hooks]
    path = bare.write(rel, json.dumps(data))
    before = path.read_bytes()
    result = cli("init", "--hooks", hooks, cwd=bare.path)
    assert result.exit_code == 2, result.out + result.err
    line = one_error_line(result.err)
    assert rel in line
    assert where in line
    assert path.read_bytes() == before
    assert not (bare.path / "loope.toml").exists()


def test_odd_entries_in_a_hook_list_are_kept_and_the_hook_is_added(bare, cli):
    bare.write(".claude/settings.json", json.dumps({"hooks": {"Stop": ["legacy", {"hooks": "x"}]}}))
    result = cli("init", "--hooks", "claude", cwd=bare.path)
    assert result.exit_code == 0, result.out + result.err
    stop = json.loads(bare.read(".claude/settings.json"))["hooks"]["Stop"]
    assert stop[:2] == ["legacy", {"hooks": "x"}]
    assert is_loope(stop[2]["hooks"][0]["command"], "verify --hook claude")


# -- bad input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--direction", "sideways"), "sideways"),
        (("--metric", "./bench.sh", "--direction", "sideways"), "sideways"),
        (("--metric", "./bench.sh"), "--direction"),
        (("--hooks", "vim"), "vim"),
        (("--max-attempts", "0"), "--max-attempts"),
    ],
)
def test_bad_init_flags_are_one_line_exit_2_and_write_nothing(bare, cli, args, fragment):
    result = cli("init", *args, cwd=bare.path)
    assert result.exit_code == 2, result.out + result.err
    assert fragment in one_error_line(result.err)
    assert not (bare.path / "loope.toml").exists()
    assert not (bare.path / ".loope").exists()
    assert no_loope_runs(bare.path)
