"""The guard: what an agent's shell does to files it may not change is undone before the gate, recorded, fed back."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import CALC, CALC_TESTS, FIX, GATE, PYTHON, Project, in_workspace, run_file, run_has, unsandboxed

# The second attempt fixes calc.py only once it has been told its first one was undone.
FIX_WHEN_TOLD = (
    """
if os.environ["LOOPE_ITERATION"] == "2":
    assert "your change to it was undone" in prompt or "the file was removed" in prompt, prompt
"""
    + FIX
)


def cheat_then_fix(agent_script, cheat: str) -> str:  # type: ignore[no-untyped-def]
    """Iteration 1 runs ``cheat`` (and leaves add() broken); iteration 2 fixes add()."""
    return agent_script(
        f"""
if os.environ["LOOPE_ITERATION"] == "1":
{_indent(cheat)}
    print("made the tests pass")
else:
{_indent(FIX_WHEN_TOLD)}
"""
    )


def _indent(text: str) -> str:
    return textwrap.indent(textwrap.dedent(text).strip("\n"), "    ")


def run_fix(cli, proj: Project, implementer: str, *extra: str, gate: str = GATE):  # type: ignore[no-untyped-def]
    """Two iterations of ``fix add``; the workspace is kept, for the test to see what the guard left in it."""
    return cli(
        "run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", gate,
        "--max-iters", "2", "--keep-workspace", "--plain", *extra, cwd=proj.path,
    )  # fmt: skip


def step(run: dict, iteration: int, adapter: str) -> dict:
    [found] = [s for s in run["steps"] if s["iteration"] == iteration and s["adapter"] == adapter]
    return found


def ledger_of(proj: Project) -> list[dict]:
    return [json.loads(line) for line in (proj.runs()[-1] / "ledger.jsonl").read_text().splitlines()]


def prompt_of(proj: Project, iteration: int) -> str:
    return (proj.runs()[-1] / step(proj.run_json(), iteration, "exec")["dir"] / "prompt.md").read_text()


def feedback_of(proj: Project, iteration: int) -> str:
    return prompt_of(proj, iteration).split("# Feedback from the last iteration", 1)[1]


def workspace(proj: Project) -> Path:
    return Path(proj.run_json()["workspace"]["path"])


def assert_undone_recorded_and_fed_back(proj: Project, message: str) -> None:
    """The cheat in iteration 1 was undone before its gate ran, recorded, and told to iteration 2."""
    run = proj.run_json()
    assert step(run, 1, "gate")["gate_passed"] is False  # the cheat would have made it pass
    assert message in step(run, 1, "exec")["violations"]
    assert message in ledger_of(proj)[0]["violations"]
    assert ledger_of(proj)[1]["violations"] == []
    feedback = feedback_of(proj, 2)
    assert "### Changes that were undone" in feedback
    assert f"- {message}" in feedback
    assert message not in prompt_of(proj, 1)
    assert (run["stop_reason"], run["iterations"]) == ("converged", 2)
    events = [json.loads(line) for line in (proj.runs()[-1] / "events.jsonl").read_text().splitlines()]
    finished = [e for e in events if e["type"] == "step_finished" and e["step"] == step(run, 1, "exec")["id"]]
    assert message in finished[0]["violations"]


# -- protected paths ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["worktree", "copy", "in-place"])
def test_a_protected_test_file_rewritten_by_shell_is_undone(project, agent_script, cli, mode):
    cheat = """
    os.system("printf 'def test_add():\\\\n    pass\\\\n' > tests/test_calc.py")
    assert "def test_add():\\n    pass" in pathlib.Path("tests/test_calc.py").read_text()
    """
    implementer = cheat_then_fix(agent_script, cheat)
    result = run_fix(cli, project, implementer, "--protect", "tests/**", "--workspace", mode)
    assert result.exit_code == 0, result.out + result.err
    message = "tests/test_calc.py is protected; your change to it was undone"
    assert_undone_recorded_and_fed_back(project, message)
    assert (workspace(project) / "tests/test_calc.py").read_text() == CALC_TESTS
    assert message in result.out
    # The undone change is not part of the run's result.
    assert [f["path"] for f in project.run_json()["changes"]["files"]] == ["calc.py"]


@pytest.fixture
def cli(cli, workspace_mode):  # type: ignore[no-untyped-def]
    """The guard is tested as the only line: unsandboxed (the sandbox would refuse the writes first).

    Each test runs in the default workspace and in an overlay."""
    return in_workspace(unsandboxed(cli), workspace_mode)


def test_a_deleted_protected_file_is_restored_before_the_gate(project, agent_script, cli):
    cheat = 'os.system("rm tests/test_calc.py")'
    result = run_fix(cli, project, cheat_then_fix(agent_script, cheat), "--protect", "tests/")
    assert result.exit_code == 0, result.out + result.err
    assert_undone_recorded_and_fed_back(project, "tests/test_calc.py is protected; your change to it was undone")
    # The gate ran the restored tests: it names them as failing (a deleted file would collect nothing).
    assert ledger_of(project)[0]["gate"]["failures"] == [
        "tests/test_calc.py::test_add",
        "tests/test_calc.py::test_add_negative",
    ]


def test_a_file_created_outside_the_editable_globs_is_removed(project, agent_script, cli):
    # A conftest.py that patches add() would make the gate pass if it survived.
    cheat = """
    os.system("printf 'import calc\\\\ncalc.add = lambda a, b: a + b\\\\n' > conftest.py")
    """
    result = run_fix(cli, project, cheat_then_fix(agent_script, cheat), "--editable", "calc.py")
    assert result.exit_code == 0, result.out + result.err
    message = "conftest.py configures the test runner and is protected; your change to it was undone"
    assert_undone_recorded_and_fed_back(project, message)
    assert not run_has(project.run_json(), "conftest.py")
    assert project.run_json()["changes"]["files"][0]["path"] == "calc.py"
    assert len(project.run_json()["changes"]["files"]) == 1


def test_the_cheat_would_have_passed_the_gate_without_the_guard(project, agent_script, cli):
    """Control for the test above: the same conftest.py, allowed (--editable names it), does make the gate pass."""
    cheat = agent_script("os.system(\"printf 'import calc\\\\ncalc.add = lambda a, b: a + b\\\\n' > conftest.py\")")
    result = run_fix(cli, project, cheat, "--editable", "conftest.py")
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 1)
    assert step(run, 1, "exec")["violations"] == []


def test_editing_loope_toml_cannot_make_a_failing_gate_pass(project, agent_script, cli):
    """The gate comes from the run's saved spec: rewriting loope.toml or spec.json changes nothing."""
    project.write("loope.toml", f"verify_cmd = {json.dumps(GATE)}\nmax_iters = 2\n")
    project.commit("loope settings")
    cheat = """
    os.system("echo 'verify_cmd = \\"true\\"' > loope.toml")
    spec = pathlib.Path(os.environ["LOOPE_RUN_DIR"]) / "spec.json"
    data = json.loads(spec.read_text())
    data["verify_cmd"] = "true"
    spec.write_text(json.dumps(data))
    """
    result = cli("run", "fix add", "--implementer", cheat_then_fix(agent_script, cheat), "--no-review", "--plain",
                 cwd=project.path)  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    assert_undone_recorded_and_fed_back(project, "loope.toml is protected; your change to it was undone")
    run = project.run_json()
    assert "spec.json is written only by loope; the change to it was undone" in step(run, 1, "exec")["violations"]
    assert [s["adapter"] for s in run["steps"] if s["iteration"] == 1] == ["exec", "gate"]
    rundir = project.runs()[-1]
    assert json.loads((rundir / "spec.json").read_text())["verify_cmd"] == GATE
    assert (rundir / step(run, 1, "gate")["dir"] / "command.txt").read_text().strip() == GATE
    assert run_file(project.run_json(), "loope.toml") == f"verify_cmd = {json.dumps(GATE)}\nmax_iters = 2\n"


def test_an_unguarded_edit_to_loope_toml_would_not_change_the_gate_either(project, agent_script, cli):
    """Even when nothing restored loope.toml, the gate in force is the one in spec.json."""
    project.write("loope.toml", f"verify_cmd = {json.dumps(GATE)}\n")
    project.commit("loope settings")
    cheat = agent_script("pathlib.Path('loope.toml').write_text('verify_cmd = \"true\"\\n')")
    result = cli("run", "fix add", "--implementer", cheat, "--no-review", "--max-iters", "1", "--plain",
                 cwd=project.path)  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    assert step(run, 1, "gate")["gate_passed"] is False
    assert run["stop_reason"] == "max_iters"


def test_a_script_named_by_the_gate_is_protected(project, agent_script, cli):
    project.write(
        "check.py", "import subprocess, sys\nsys.exit(subprocess.call([sys.executable, '-m', 'pytest', '-q']))\n"
    )
    project.commit("a check script")
    cheat = 'pathlib.Path("check.py").write_text("print(\'all good\')\\n")'
    result = run_fix(cli, project, cheat_then_fix(agent_script, cheat), gate=f"{PYTHON} check.py")
    assert result.exit_code == 0, result.out + result.err
    assert_undone_recorded_and_fed_back(project, "check.py is protected; your change to it was undone")
    assert "subprocess.call" in run_file(project.run_json(), "check.py")


@pytest.mark.parametrize("mode", ["worktree", "in-place"])
def test_a_file_written_into_the_workspaces_loope_dir_is_removed(project, agent_script, cli, mode):
    """Only the state file in .loope/ is the agent's; anything else there is removed before the gate."""
    cheat = """
    os.system("echo yes > .loope/approved")
    os.system("echo '!*' >> .loope/.gitignore")
    state = pathlib.Path(os.environ["LOOPE_STATE_FILE"])
    state.write_text(state.read_text().replace("# Notes", "# Notes\\nthe state file is mine to write"))
    """
    gate = f"test -f .loope/approved || {GATE}"
    result = run_fix(cli, project, cheat_then_fix(agent_script, cheat), "--workspace", mode, gate=gate)
    assert result.exit_code == 0, result.out + result.err
    assert_undone_recorded_and_fed_back(
        project, ".loope/approved is inside loope's own directory; the file was removed"
    )
    violations = step(project.run_json(), 1, "exec")["violations"]
    assert ".loope/.gitignore belongs to loope; the change to it was undone" in violations
    assert len(violations) == 2  # the state file is not a violation
    ws = workspace(project)
    assert not (ws / ".loope/approved").exists()
    assert "!*" not in (ws / ".loope/.gitignore").read_text()
    assert "the state file is mine to write" in (ws / ".loope/state.md").read_text()


# -- runner-owned files in the run directory -----------------------------------------------------------


SCORED_AGENT = """
n = os.environ["LOOPE_ITERATION"]
rundir = pathlib.Path(os.environ["LOOPE_RUN_DIR"])
if n == "1":
    pathlib.Path("solution.py").write_text("SCORE = 12\\n")
    os.system(f"echo 0 > {rundir / 'best'}")
    print("SCORE is 12, and best says 0")
else:
    assert "best is written only by loope" in prompt, prompt
    pathlib.Path("solution.py").write_text("SCORE = 7\\n")
    with open(rundir / "ledger.jsonl", "a") as ledger:
        ledger.write(json.dumps({"iteration": 99, "summary": "fake", "verdict": "kept", "score": 0}) + "\\n")
    with open(rundir / "score.log", "a") as log:
        log.write("2024-01-01T00:00:00Z\\t99\\t0\\tkept\\n")
    print("SCORE is 7")
"""


@pytest.fixture
def scored(tmp_path: Path) -> Project:
    proj = Project(tmp_path / "scored")
    proj.path.mkdir()
    proj.git("init", "-q", "-b", "main")
    proj.write("solution.py", "SCORE = 10\n")
    proj.write("measure.py", "import solution\nprint('SCORE', solution.SCORE)\n")
    proj.commit("initial")
    return proj


def test_the_runner_owned_best_ledger_and_score_log_cannot_be_written(scored, agent_script, cli):
    # The gate fails while the best file says 0, so a passing gate proves the forgery was undone before it ran.
    best = scored.path / ".loope" / "runs" / "0001-lower-the-score" / "best"
    gate = f'{PYTHON} -c "import solution" && ! grep -qx 0 {best}'
    result = cli(
        "run", "lower the score", "--implementer", agent_script(SCORED_AGENT), "--no-review",
        "--verify-cmd", gate, "--metric-cmd", f"{PYTHON} measure.py", "--editable", "solution.py",
        "--direction", "lower", "--max-iters", "2", "--plain", cwd=scored.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    rundir = scored.runs()[-1]
    assert rundir / "best" == best
    run = scored.run_json()
    # Attempt 1 (12, worse) was reverted; the forged best of 0 was put back to the baseline of 10.
    message = "best is written only by loope; the change to it was undone"
    first = step(run, 1, "exec")["violations"]
    assert first == [message]
    assert step(run, 1, "gate")["gate_passed"] is True
    ledger = ledger_of(scored)
    assert ledger[0]["violations"] == first
    assert f"- {message}" in feedback_of(scored, 2)
    assert [(a["iteration"], a["score"], a["best"], a["verdict"]) for a in ledger] == [
        (1, 12, 10, "reverted"),
        (2, 7, 7, "kept"),
    ]
    # Attempt 2's appends to the ledger and the score log were undone too.
    second = step(run, 2, "exec")["violations"]
    assert sorted(second) == [
        "ledger.jsonl is written only by loope; the change to it was undone",
        "score.log is written only by loope; the change to it was undone",
    ]
    logged = [line.split("\t")[1:] for line in (rundir / "score.log").read_text().splitlines()]
    assert logged[0] == ["1", "12", "reverted"]
    assert "99" not in [line[0] for line in logged]  # the forged line is gone
    assert all(a["iteration"] != 99 for a in ledger)
    assert (rundir / "best").read_text() == "7\n"
    assert run["best"]["score"] == 7


def test_the_metric_script_is_protected(scored, agent_script, cli):
    agent = agent_script(
        """
        pathlib.Path("measure.py").write_text("print('SCORE', 0)\\n")
        pathlib.Path("solution.py").write_text("SCORE = 9\\n")
        """
    )
    result = cli(
        "run", "lower the score", "--implementer", agent, "--no-review", "--metric-cmd", f"{PYTHON} measure.py",
        "--editable", "solution.py",
        "--direction", "lower", "--max-iters", "1", "--plain", cwd=scored.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = scored.run_json()
    assert step(run, 1, "exec")["violations"] == ["measure.py is protected; your change to it was undone"]
    assert step(run, 1, "metric")["score"] == 9
    assert run["best"]["score"] == 9
    assert run_file(run, "measure.py").startswith("import solution")


def test_a_best_file_created_before_any_score_exists_is_removed(scored, agent_script, cli):
    scored.write("solution.py", "RESULT = 'not scored yet'\n")
    scored.commit("no score yet")
    agent = agent_script(
        """
        pathlib.Path(os.environ["LOOPE_RUN_DIR"], "best").write_text("0\\n")
        pathlib.Path("solution.py").write_text("broken = True\\n")
        """
    )
    result = cli(
        "run", "lower the score", "--implementer", agent, "--no-review", "--metric-cmd", f"{PYTHON} measure.py",
        "--editable", "solution.py",
        "--direction", "lower", "--max-iters", "1", "--plain", cwd=scored.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    assert not (scored.runs()[-1] / "best").exists()
    assert step(scored.run_json(), 1, "exec")["violations"] == [
        "best is written only by loope; the change to it was undone"
    ]


# -- globs ------------------------------------------------------------------------------------------------


def test_a_glob_that_matches_nothing_warns_and_the_run_proceeds(project, agent_script, cli):
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE,
        "--protect", "tset/**", "--editable", "calc.py", "--editable", "src/*.py", "--json", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    events = [json.loads(line) for line in result.out.splitlines()]
    [started] = [e for e in events if e["type"] == "run_started"]
    assert started["warnings"] == [
        "--editable/--protect 'src/*.py' matches no file",
        "--editable/--protect 'tset/**' matches no file",
    ]
    assert project.run_json()["stop_reason"] == "converged"


def test_the_warning_is_shown_in_plain_output(project, agent_script, cli):
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE,
        "--protect", "tset/**", "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    assert "warning: --editable/--protect 'tset/**' matches no file" in result.out + result.err


def test_allowed_changes_are_not_violations(project, agent_script, cli):
    agent = agent_script(
        FIX
        + "pathlib.Path('NOTES.md').write_text('notes\\n')\n"
        + "pathlib.Path(os.environ['LOOPE_STATE_FILE']).write_text("
        + "'---\\nloop_id: x\\nstatus: done\\niteration: 1\\n---\\n# Goal\\n')\n"
    )
    result = cli(
        "run", "fix add", "--implementer", agent, "--no-review", "--verify-cmd", GATE, "--protect", "tests/**",
        "--editable", "*.py", "--editable", "*.md", "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert step(run, 1, "exec")["violations"] == []
    assert sorted(f["path"] for f in run["changes"]["files"]) == ["NOTES.md", "calc.py"]
    assert run_file(project.run_json(), "calc.py") != CALC


def test_globs_are_relative_to_a_workdir_in_a_subdirectory_of_the_repository(tmp_path, agent_script, cli):
    mono = Project(tmp_path / "mono")
    mono.path.mkdir()
    mono.git("init", "-q", "-b", "main")
    mono.write("pkg/calc.py", CALC)
    mono.write("pkg/tests/test_calc.py", CALC_TESTS)
    mono.write("README.md", "the monorepo\n")
    mono.write(".gitignore", "__pycache__/\n")
    mono.commit("initial")
    cheat = agent_script(
        """
        pathlib.Path("tests/test_calc.py").write_text("def test_add():\\n    pass\\n")
        pathlib.Path("../README.md").write_text("changed from pkg\\n")
        pathlib.Path("notes.txt").write_text("not a python file\\n")
        """
    )
    result = cli(
        "run", "fix add", "--implementer", cheat, "--no-review", "--verify-cmd", GATE, "--protect", "tests/**",
        "--editable", "*.py", "--max-iters", "1", "--json", "--workdir", str(mono.path / "pkg"), cwd=mono.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    events = [json.loads(line) for line in result.out.splitlines()]
    [started] = [e for e in events if e["type"] == "run_started"]
    assert started["warnings"] == []  # tests/** and *.py do match files under pkg/
    rundir = sorted((mono.path / "pkg" / ".loope" / "runs").iterdir())[-1]
    run = json.loads((rundir / "run.json").read_text())
    assert step(run, 1, "gate")["gate_passed"] is False
    assert sorted(step(run, 1, "exec")["violations"]) == [
        "README.md is outside the editable paths (*.py); your change to it was undone",
        "pkg/notes.txt is outside the editable paths (*.py); your change to it was undone",
        "pkg/tests/test_calc.py is protected; your change to it was undone",
    ]
    assert run["changes"]["files"] == []
