"""The success command, mid-loop critique, and lessons recalled by later runs."""

from __future__ import annotations

import json
import shlex
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import FIX, GATE, gone, one_error_line, reporting_to, run_has

# A different wrong answer every iteration: progress each time (no stall), the gate never passes.
WRONG = "pathlib.Path('calc.py').write_text('def add(a, b):\\n    return ' + os.environ['LOOPE_ITERATION'] + '\\n')\n"
# Variables /bin/sh (dash) sets itself in every shell it starts.
SHELL_OWN = {"PWD", "OLDPWD", "SHLVL", "_"}


def prompts(project) -> dict[int, str]:  # type: ignore[no-untyped-def]
    """The implementer prompts of the last run, by iteration."""
    run = project.run_json()
    rundir = project.runs()[-1]
    return {
        s["iteration"]: (rundir / s["dir"] / "prompt.md").read_text()
        for s in run["steps"]
        if s["role"] == "implementer"
    }


def section_of(prompt: str, title: str) -> str:
    """The body of the prompt's ``# title`` section ('' when there is none)."""
    head = f"\n# {title}\n"
    if head not in prompt:
        return ""
    return prompt.split(head, 1)[1].split("\n# ", 1)[0]


# -- the success command ------------------------------------------------------------------------


@pytest.fixture
def cli(cli, tmp_path):  # type: ignore[no-untyped-def]
    """These agents and checks report through files beside the project, which the sandbox lets them write."""
    return reporting_to(cli, tmp_path)


@pytest.mark.parametrize("term", ["xterm-256color", None])
def test_the_success_command_runs_in_the_workspace_with_a_sanitized_environment(
    project, agent_script, cli, monkeypatch, term
):
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("LOOPE_RUN_ID", "must-not-leak")
    if term:
        monkeypatch.setenv("TERM", term)
    else:
        monkeypatch.delenv("TERM", raising=False)
    out = project.path.parent / "success-out"  # outside the workspace and the project
    out.mkdir()
    success = f"env > {shlex.quote(str(out / 'env.txt'))}; pwd > {shlex.quote(str(out / 'pwd.txt'))}"
    result = cli(
        "run", "write notes", "--implementer", agent_script("pathlib.Path('notes.txt').write_text('hi\\n')"),
        "--no-review", "--success-cmd", success, cwd=project.path,
    )  # fmt: skip
    # Exit 0 from the success command is the verdict: no gate, no reviewer, converged.
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 1)
    workspace = Path(run["workspace"]["path"])
    assert Path((out / "pwd.txt").read_text().strip()) == workspace
    env = dict(line.split("=", 1) for line in (out / "env.txt").read_text().splitlines())
    # Plus what every step's process gets: its private TMPDIR and the marker that lets none outlive it.
    expected = {"PATH", "HOME", "LANG", "TOOL_INPUT", "TMPDIR", "LOOPE_STEP_TOKEN"} | ({"TERM"} if term else set())
    assert set(env) - SHELL_OWN == expected
    assert env["LANG"] == "C.UTF-8"
    if term:
        assert env["TERM"] == term
    assert json.loads(env["TOOL_INPUT"]) == {"loop_id": run["run_id"], "workspace": str(workspace)}
    assert [(s["iteration"], s["role"], s["adapter"], s["gate_passed"]) for s in run["steps"]] == [
        (1, "implementer", "exec", None),
        (1, "verifier", "success", True),
    ]


def test_the_success_command_runs_after_each_iteration_until_it_passes(project, agent_script, cli):
    implementer = agent_script(
        "n = os.environ['LOOPE_ITERATION']\n"
        "pathlib.Path('progress.txt').write_text('step ' + n + '\\n')\n"
        "if n == '3':\n    pathlib.Path('release.txt').write_text('ready\\n')\n"
    )
    success = "test -f release.txt || { echo 'RELEASE-NOTES-MISSING-77: no release.txt yet' >&2; exit 3; }"
    result = cli(
        "run", "prepare the release", "--implementer", implementer, "--no-review", "--success-cmd", success,
        "--max-iters", "5", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 3)
    checks = [(s["iteration"], s["gate_passed"]) for s in run["steps"] if s["adapter"] == "success"]
    assert checks == [(1, False), (2, False), (3, True)]
    by_iteration = prompts(project)
    assert "RELEASE-NOTES-MISSING-77" not in by_iteration[1]
    for n in (2, 3):
        feedback = section_of(by_iteration[n], "Feedback from the last iteration")
        assert f"### The success command failed (exit code 3): `{success}`" in feedback
        assert "RELEASE-NOTES-MISSING-77: no release.txt yet" in feedback


def test_a_passing_success_command_does_not_override_a_failing_gate(project, agent_script, cli):
    result = cli(
        "run", "fix add", "--implementer", agent_script(WRONG), "--no-review", "--verify-cmd", GATE,
        "--success-cmd", "true", "--max-iters", "2", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    run = project.run_json()
    assert (run["stop_reason"], run["converged"]) == ("max_iters", False)
    assert [s["adapter"] for s in run["steps"] if s["role"] == "verifier"] == ["gate", "success", "gate", "success"]


def test_a_hanging_success_command_is_killed_at_its_timeout(project, agent_script, cli, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    first, shell_pid, sleep_pid = (shlex.quote(str(marks / n)) for n in ("first", "shell.pid", "sleep.pid"))
    # Hangs the first time only (with a child of its own); passes the second time.
    success = (
        f"if [ -f {first} ]; then exit 0; fi; touch {first};"
        f" echo $$ > {shell_pid}; sleep 300 & echo $! > {sleep_pid}; wait"
    )
    project.write("loope.toml", "success_timeout = 2\n")
    implementer = agent_script(
        "pathlib.Path('progress.txt').write_text('step ' + os.environ['LOOPE_ITERATION'] + '\\n')"
    )
    result = cli(
        "run", "prepare the release", "--implementer", implementer, "--no-review", "--success-cmd", success,
        "--max-iters", "3", "--sandbox", "off", cwd=project.path,  # its pids are the test's: no PID namespace
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 2)
    spec = json.loads((project.runs()[-1] / "spec.json").read_text())
    assert spec["success_timeout"] == 2
    assert [(s["iteration"], s["gate_passed"]) for s in run["steps"] if s["adapter"] == "success"] == [
        (1, False),
        (2, True),
    ]
    assert gone(int((marks / "shell.pid").read_text()))
    assert gone(int((marks / "sleep.pid").read_text()))
    assert "### The success command failed (timed out)" in prompts(project)[2]


# -- critique -----------------------------------------------------------------------------------


def test_the_critic_runs_every_n_iterations_read_only_and_feeds_the_next_prompt_only(
    project, agent_script, cli, tmp_path
):
    seen = tmp_path / "critic-env"
    seen.mkdir()
    critic = agent_script(
        f"""
        n = os.environ["LOOPE_ITERATION"]
        keep = {{k: os.environ[k] for k in ("LOOPE_ROLE", "LOOPE_MODE", "LOOPE_ITERATION")}}
        pathlib.Path({str(seen)!r}, n + ".json").write_text(json.dumps(keep))
        try:  # refused inside the sandbox; without it the guard undoes it
            pathlib.Path("critic-was-here.txt").write_text("a critic only reads\\n")
        except OSError as exc:
            print("refused:", exc.strerror, file=sys.stderr)
        print("Progress is slow.")
        print("CRITIQUE-AFTER-" + n + ": stop guessing constants; read the failing assertion.")
        """
    )
    result = cli(
        "run", "fix add", "--implementer", agent_script(WRONG), "--no-review", "--verify-cmd", GATE,
        "--critic", critic, "--checkpoint-every", "2", "--max-iters", "5", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("max_iters", 5)
    critics = [s for s in run["steps"] if s["role"] == "critic"]
    # After iterations 2 and 4, never after the final one.
    assert [s["iteration"] for s in critics] == [2, 4]
    assert [s["adapter"] for s in critics] == ["exec", "exec"]
    assert [s["ok"] for s in critics] == [True, True]
    order = [(s["iteration"], s["role"]) for s in run["steps"]]
    assert order.index((2, "critic")) == order.index((2, "verifier")) + 1
    assert sorted(p.name for p in seen.iterdir()) == ["2.json", "4.json"]
    for n in (2, 4):
        env = json.loads((seen / f"{n}.json").read_text())
        assert env == {"LOOPE_ROLE": "critic", "LOOPE_MODE": "read", "LOOPE_ITERATION": str(n)}
    # Read-only: what it wrote is undone and never part of the run's changes.
    assert not run_has(run, "critic-was-here.txt")
    assert [f["path"] for f in run["changes"]["files"]] == ["calc.py"]
    # Its message reaches the next implementer prompt, under REVIEWER FEEDBACK, and only that one.
    by_iteration = prompts(project)
    for n in (1, 2, 4):
        assert "REVIEWER FEEDBACK" not in by_iteration[n]
    assert "CRITIQUE-AFTER-2: stop guessing constants" in section_of(by_iteration[3], "REVIEWER FEEDBACK")
    assert by_iteration[3].count("CRITIQUE-AFTER-2") == 1
    assert "CRITIQUE-AFTER-2" not in by_iteration[4]
    assert "CRITIQUE-AFTER-4: stop guessing constants" in section_of(by_iteration[5], "REVIEWER FEEDBACK")
    assert "CRITIQUE-AFTER-2" not in by_iteration[5]
    rundir = project.runs()[-1]
    critic_prompt = (rundir / critics[0]["dir"] / "prompt.md").read_text()
    assert "after iteration 2 of 5" in critic_prompt
    assert "do not change any file" in critic_prompt
    events = [json.loads(line) for line in (rundir / "events.jsonl").read_text().splitlines()]
    critiques = [e for e in events if e["type"] == "critique"]
    assert [(e["iteration"], e["step"]) for e in critiques] == [(2, critics[0]["id"]), (4, critics[1]["id"])]
    assert critiques[0]["text"].startswith("Progress is slow.\nCRITIQUE-AFTER-2")


def test_a_failing_critic_is_noted_and_skipped_like_a_notifier(project, agent_script, cli):
    critic = agent_script("print('no model configured', file=sys.stderr)\nsys.exit(4)")
    result = cli(
        "run", "fix add", "--implementer", agent_script(WRONG), "--no-review", "--verify-cmd", GATE,
        "--critic", critic, "--checkpoint-every", "1", "--max-iters", "3", "--stall-after", "5", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    run = project.run_json()
    assert run["stop_reason"] == "max_iters"  # the critic is advisory: it never ends a run
    critics = [s for s in run["steps"] if s["role"] == "critic"]
    assert [s["ok"] for s in critics] == [False, False]  # after iterations 1 and 2 (none after the last)
    log = (project.runs()[-1] / "observer-errors.log").read_text()
    assert log.count("critic skipped") == 2


# -- memory -------------------------------------------------------------------------------------


def test_a_later_run_recalls_the_lessons_of_an_earlier_one(project, agent_script, cli):
    first = cli(
        "run", "fix the add function in calc.py", "--implementer", agent_script(WRONG), "--no-review",
        "--verify-cmd", GATE, "--max-iters", "2", cwd=project.path,
    )  # fmt: skip
    assert first.exit_code == 1
    first_run = project.run_json()
    assert first_run["stop_reason"] == "max_iters"
    assert "RECALLED MEMORIES" not in prompts(project)[1]  # nothing to recall yet

    second = cli(
        "run", "make the calc add function handle negative numbers", "--implementer", agent_script(FIX),
        "--no-review", "--verify-cmd", GATE, cwd=project.path,
    )  # fmt: skip
    assert second.exit_code == 0, second.out + second.err
    second_run = project.run_json()
    memories = section_of(prompts(project)[1], "RECALLED MEMORIES (lessons from earlier runs in this project)")
    assert memories.startswith(
        f"- Run {first_run['run_id']} (not converged (max_iters) after 2 iteration(s)): fix the add function in calc.py"
    )
    assert "What failed: iteration 1: gate failed (tests/test_calc.py::test_add" in memories
    assert "stopped: reached --max-iters 2" in memories
    assert "Changed: calc.py +1 −1" in memories

    listed = cli("lessons", cwd=project.path)
    assert listed.exit_code == 0, listed.err
    assert f"{first_run['run_id']} · not converged (max_iters) after 2 iteration(s)" in listed.out
    assert f"{second_run['run_id']} · converged after 1 iteration(s)" in listed.out
    assert "goal: fix the add function in calc.py" in listed.out
    rows = json.loads(cli("lessons", "--json", cwd=project.path).out)
    by_run = {r["run_id"]: r for r in rows}
    assert set(by_run) == {first_run["run_id"], second_run["run_id"]}
    assert (by_run[first_run["run_id"]]["stop_reason"], by_run[first_run["run_id"]]["iterations"]) == ("max_iters", 2)
    assert by_run[second_run["run_id"]]["outcome"] == "converged"
    assert "iteration 1: fixed add: it returns a + b now" in by_run[second_run["run_id"]]["worked"]

    unrelated = agent_script("pathlib.Path('d.md').write_text('x')")
    third = cli(
        "run", "document the deployment pipeline", "--implementer", unrelated, "--no-review", "--max-iters", "1",
        cwd=project.path,
    )  # fmt: skip
    assert third.exit_code == 1
    assert "RECALLED MEMORIES" not in prompts(project)[1]  # nothing related: nothing recalled


def test_no_lessons_yet(project, cli):
    result = cli("lessons", cwd=project.path)
    assert (result.exit_code, result.out) == (0, "no lessons yet: each finished run leaves one\n")
    assert json.loads(cli("lessons", "--json", cwd=project.path).out) == []


def test_a_lesson_that_cannot_be_stored_never_changes_the_runs_status(project, agent_script, cli):
    assert cli("lessons", cwd=project.path).exit_code == 0  # creates the store
    conn = sqlite3.connect(project.path / ".loope" / "loope.db")
    conn.execute("DROP TABLE lessons")
    conn.commit()
    conn.close()
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE, cwd=project.path
    )
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["status"], run["stop_reason"], run["converged"]) == ("converged", "converged", True)
    errors = (project.runs()[-1] / "observer-errors.log").read_text()
    assert "recall failed" in errors
    assert "remember failed" in errors
    assert "no such table: lessons" in errors
    status = json.loads(cli("status", run["run_id"], "--json", cwd=project.path).out)
    assert status["loop"]["status"] == "converged"
    listed = cli("lessons", cwd=project.path)
    assert listed.exit_code == 2
    assert "no such table: lessons" in one_error_line(listed.err)


# -- a stop request and the success command -----------------------------------------------------

# An implementer that asks loope, through the real CLI, to stop its own run, then finishes its step.
STOPS_ITS_OWN_RUN = """
import subprocess
workdir = pathlib.Path(os.environ["LOOPE_RUN_DIR"]).parent.parent.parent
pathlib.Path("notes.txt").write_text("x\\n")
done = subprocess.run(
    [sys.executable, "-m", "loope", "stop", os.environ["LOOPE_RUN_ID"], "--workdir", str(workdir)],
    capture_output=True, text=True,
)
assert done.returncode == 0, done.stderr
print(done.stdout.strip())
"""


@pytest.mark.parametrize("check", ["--verify-cmd", "--success-cmd"])
def test_a_stop_requested_during_the_implementer_comes_before_the_check(project, agent_script, cli, tmp_path, check):
    ran = tmp_path / "check-ran"
    # Unsandboxed: the agent asks for the stop through the project's store, which the sandbox keeps read-only.
    result = cli(
        "run", "write notes", "--implementer", agent_script(STOPS_ITS_OWN_RUN), "--no-review",
        check, f"touch {shlex.quote(str(ran))}", "--max-iters", "3", "--no-baseline", "--sandbox", "off",
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    run = project.run_json()
    assert (run["status"], run["stop_detail"]) == ("stopped", "stop requested")
    assert [s["role"] for s in run["steps"]] == ["implementer"]
    assert not ran.exists()
