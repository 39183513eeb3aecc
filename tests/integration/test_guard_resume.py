"""What the guard protects is settled when the run starts: ``loope continue`` (and every resume) keeps it.

Each scenario runs twice: straight through two iterations, and one iteration then ``continue`` for
the second. Both must end the same way: a file the agent created is not protected by a resume, and a
file protected at the start stays protected whatever the agent did to the code that named it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import PYTHON, Project, unsandboxed
from tests.helpers.attacks import violations


@pytest.fixture
def cli(cli):  # type: ignore[no-untyped-def]
    """The agents count their calls in a file outside the workspace, and the guard is the only line."""
    return unsandboxed(cli)


def by_call(agent_script, counter: Path, first: str, second: str) -> str:  # type: ignore[no-untyped-def]
    """An implementer that runs ``first`` on its first call and ``second`` on every later one."""
    return agent_script(
        f"log = pathlib.Path({str(counter)!r})\n"
        "n = int(log.read_text()) + 1 if log.exists() else 1\n"
        "log.write_text(str(n))\n"
        f"exec({first!r} if n == 1 else {second!r})\n"
    )


def two_iterations(cli, proj: Project, resumed: bool, *args: str) -> dict:  # type: ignore[no-untyped-def]
    """``run ARGS`` for two iterations, or for one then ``continue`` for one more; the final run.json."""
    first = cli("run", *args, "--max-iters", "1" if resumed else "2", "--plain", cwd=proj.path)
    assert first.exit_code in (0, 1), first.out + first.err
    if resumed:
        run_id = proj.run_json()["run_id"]
        more = cli("continue", run_id, "--max-iters", "1", "--plain", cwd=proj.path)
        assert more.exit_code in (0, 1), more.out + more.err
        assert len(proj.runs()) == 1
    return proj.run_json()


@pytest.mark.parametrize("resumed", [False, True], ids=["straight", "continued"])
def test_a_file_the_gate_names_that_the_agent_created_stays_writable(project, agent_script, cli, tmp_path, resumed):
    impl = by_call(
        agent_script,
        tmp_path / "calls",
        "pathlib.Path('out.txt').write_text('draft\\n')",
        "pathlib.Path('out.txt').write_text('fixed\\n')",
    )
    gate = "grep -q fixed out.txt"

    run = two_iterations(
        cli, project, resumed, "write out.txt", "--implementer", impl, "--no-review", "--verify-cmd", gate,
        "--stall-after", "5",
    )  # fmt: skip

    assert violations(project) == []
    assert (run["stop_reason"], run["completed"]) == ("converged", 2)
    assert project.git("show", run["workspace"]["branch"] + ":out.txt") == "fixed\n"
    assert run["protected_scripts"] == []


@pytest.mark.parametrize("resumed", [False, True], ids=["straight", "continued"])
def test_a_gate_script_protected_at_the_start_stays_protected(project, agent_script, cli, tmp_path, resumed):
    project.write("check.sh", "grep -q fixed out.txt\n")
    project.commit("a gate script")
    impl = by_call(
        agent_script,
        tmp_path / "calls",
        "pathlib.Path('out.txt').write_text('draft\\n')",
        "pathlib.Path('check.sh').write_text('exit 0\\n')",
    )

    run = two_iterations(
        cli, project, resumed, "write out.txt", "--implementer", impl, "--no-review", "--verify-cmd", "sh check.sh",
        "--stall-after", "5",
    )  # fmt: skip

    assert violations(project) == ["check.sh is protected; your change to it was undone"]
    assert (run["stop_reason"], run["completed"], run["converged"]) == ("max_iters", 2, False)
    assert project.git("show", run["workspace"]["branch"] + ":check.sh") == "grep -q fixed out.txt\n"


@pytest.mark.parametrize("resumed", [False, True], ids=["straight", "continued"])
def test_hiding_an_import_from_the_metric_before_a_resume_does_not_unprotect_it(agent_script, cli, tmp_path, resumed):
    proj = Project(tmp_path / "scored")
    proj.path.mkdir()
    proj.git("init", "-q", "-b", "main")
    proj.write("helper.py", "BONUS = 0\n")
    proj.write("solution.py", "from helper import BONUS\n\nSCORE = 10 - BONUS\n")
    proj.write("score.py", "import solution\n\nprint('SCORE', solution.SCORE)\n")
    proj.commit("initial")
    # Iteration 1 improves the score and imports helper in a way no reader of the code can follow;
    # iteration 2 then forges the score through helper, which the metric imported when the run started.
    impl = by_call(
        agent_script,
        tmp_path / "calls",
        "pathlib.Path('solution.py').write_text(\"import importlib\\n\\n"
        "SCORE = 9 - importlib.import_module('hel' + 'per').BONUS\\n\")",
        "pathlib.Path('helper.py').write_text('BONUS = 100\\n')",
    )

    run = two_iterations(
        cli, proj, resumed, "lower the score", "--implementer", impl, "--no-review",
        "--metric-cmd", f"{PYTHON} score.py", "--direction", "lower",
        "--editable", "solution.py", "--editable", "**/*.py", "--patience", "5",
    )  # fmt: skip

    assert violations(proj) == ["helper.py is protected; your change to it was undone"]
    assert (run["best"]["score"], run["best"]["iteration"]) == (9.0, 1)
    assert "helper.py" in run["protected_scripts"]
    assert proj.git("show", run["workspace"]["branch"] + ":helper.py") == "BONUS = 0\n"


def test_a_run_recorded_before_the_protected_set_was_resolves_it_when_continued(project, agent_script, cli, tmp_path):
    impl = by_call(
        agent_script, tmp_path / "calls", "pathlib.Path('out.txt').write_text('draft\\n')", "print('looked')"
    )
    args = ("write out.txt", "--implementer", impl, "--no-review", "--verify-cmd", "grep -q fixed out.txt")
    assert cli("run", *args, "--max-iters", "1", "--plain", cwd=project.path).exit_code == 1
    path = project.runs()[-1] / "run.json"
    old = json.loads(path.read_text())
    del old["protected_scripts"]
    path.write_text(json.dumps(old))

    result = cli("continue", old["run_id"], "--max-iters", "1", "--plain", cwd=project.path)

    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["completed"]) == ("max_iters", 2)
    # As resolved when it went on, and kept from then on.
    assert run["protected_scripts"] == ["out.txt"]
