"""Landing a run like a colleague's change: commit messages from the summaries, the user's identity, apply --commit."""

from __future__ import annotations

from tests.conftest import FIX, GATE


def _identify(project) -> None:
    project.git("config", "user.name", "Ada Lovelace")
    project.git("config", "user.email", "ada@example.com")


def test_run_commits_carry_the_summary_the_users_identity_and_a_trailer(project, agent_script, cli):
    _identify(project)
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE, cwd=project.path
    )
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    branch = run["workspace"]["branch"]
    message = project.git("log", "-1", "--format=%B", branch)
    assert message.splitlines()[0] == "fixed add: it returns a + b now"
    assert f"Loope-Run: {run['run_id']}" in message
    assert project.git("log", "-1", "--format=%an <%ae>", branch).strip() == "Ada Lovelace <ada@example.com>"
    assert "land:   loope apply 0001" in result.out
    assert "--commit" in result.out
    assert "git merge" not in result.out


def test_apply_commit_lands_one_commit_of_only_the_runs_files(project, agent_script, cli):
    _identify(project)
    assert (
        cli(
            "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE, cwd=project.path
        ).exit_code
        == 0
    )
    run_id = project.run_json()["run_id"]
    project.write("notes.txt", "mine, staged, not part of the run\n")
    project.git("add", "notes.txt")
    before = project.git("rev-parse", "HEAD").strip()

    result = cli("apply", run_id[:4], "--commit", cwd=project.path)

    assert result.exit_code == 0, result.out + result.err
    assert project.git("rev-parse", "HEAD~1").strip() == before  # exactly one commit
    assert project.git("show", "--name-only", "--format=", "HEAD").split() == ["calc.py"]
    message = project.git("log", "-1", "--format=%B", "HEAD")
    assert message.splitlines()[0] == "fix add"
    assert "fixed add: it returns a + b now" in message
    assert f"Loope-Run: {run_id}" in message
    assert project.git("log", "-1", "--format=%an", "HEAD").strip() == "Ada Lovelace"
    assert project.git("diff", "--cached", "--name-only").split() == ["notes.txt"]  # still staged, not committed
    assert project.read("calc.py") == "def add(a, b):\n    return a + b\n"


def test_a_run_that_did_not_converge_says_so_where_it_suggests_landing(project, agent_script, cli):
    half = "pathlib.Path('calc.py').write_text('def add(a, b):\\n    return abs(a) + abs(b)\\n')\nprint('tried')\n"
    result = cli(
        "run", "fix add", "--implementer", agent_script(half), "--no-review", "--verify-cmd", GATE,
        "--max-iters", "1", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    assert "not converged (max_iters)" in result.out
    applied = cli("apply", project.run_json()["run_id"], cwd=project.path)
    assert "did not converge" in applied.out
