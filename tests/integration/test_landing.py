"""Landing a run like a colleague's change: commit messages from the summaries, the user's identity, apply --commit."""

from __future__ import annotations

from tests.conftest import FIX, GATE, git


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


# -- the run's branch: what `git merge loope/<run>` brings ----------------------------------------

TWO_STEPS = """
n = int(os.environ["LOOPE_ITERATION"])
if n == 1:
    pathlib.Path("docs").mkdir(exist_ok=True)
    pathlib.Path("docs/add.md").write_text("add() adds\\n")
    print("documented add")
else:
    pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a + b\\n")
    print("fixed add: it returns a + b now")
"""


def _users_own_changes(project) -> dict[str, str]:
    """What the user has not committed as the run starts: an edited tracked file and two untracked ones."""
    project.write("README.md", "calc\n")
    project.commit("readme")
    mine = {"README.md": "calc, being rewritten\n", "scratch.txt": "my notes\n", "todo/later.txt": "later\n"}
    for rel, text in mine.items():
        project.write(rel, text)
    return mine


def _run_two_steps(project, agent_script, cli, *extra: str) -> dict:  # type: ignore[no-untyped-def]
    result = cli(
        "run", "fix add", "--implementer", agent_script(TWO_STEPS), "--no-review", "--verify-cmd", GATE, *extra,
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    return project.run_json()


def test_git_merge_of_the_run_branch_brings_only_the_runs_own_commits(project, agent_script, cli):
    _identify(project)
    mine = _users_own_changes(project)
    head = project.git("rev-parse", "HEAD").strip()
    run = _run_two_steps(project, agent_script, cli)
    branch = run["workspace"]["branch"]
    run_id = run["run_id"]

    # On the user's HEAD: the run's two commits, nothing else (no snapshot of the user's files).
    assert project.git("rev-parse", f"{branch}~2").strip() == head
    assert project.git("log", "--format=%s", f"{head}..{branch}").splitlines() == [
        "fixed add: it returns a + b now",
        "documented add",
    ]
    for sha in project.git("rev-list", f"{head}..{branch}").split():
        assert f"Loope-Run: {run_id}" in project.git("log", "-1", "--format=%B", sha)
        assert project.git("log", "-1", "--format=%an <%ae>", sha).strip() == "Ada Lovelace <ada@example.com>"
    assert project.git("diff", "--name-only", head, branch).split() == ["calc.py", "docs/add.md"]
    assert "uncommitted changes as the run started" not in project.git("log", "--format=%B", branch)

    merged = project.git("merge", "--ff-only", "-q", branch)  # a user's own merge, their changes still there
    assert merged == ""
    assert project.read("calc.py") == "def add(a, b):\n    return a + b\n"
    assert project.read("docs/add.md") == "add() adds\n"
    for rel, text in mine.items():
        assert project.read(rel) == text
    assert project.git("status", "--porcelain", "--untracked-files=all").splitlines() == [
        " M README.md",
        "?? scratch.txt",
        "?? todo/later.txt",
    ]
    assert "uncommitted changes as the run started" not in project.git("log", "--format=%B")
    # The run's records still compare against what the user saw: the snapshot is the run's base.
    assert cli("show", run_id, "--diff", cwd=project.path).out.count("diff --git") == 2


def test_apply_still_lands_the_run_whose_branch_was_replayed(project, agent_script, cli):
    mine = _users_own_changes(project)
    run = _run_two_steps(project, agent_script, cli)
    applied = cli("apply", run["run_id"], cwd=project.path)
    assert applied.exit_code == 0, applied.out + applied.err
    assert project.read("calc.py") == "def add(a, b):\n    return a + b\n"
    assert project.read("docs/add.md") == "add() adds\n"
    for rel, text in mine.items():
        assert project.read(rel) == text


def test_from_a_clean_tree_the_branch_is_the_runs_own_history(project, agent_script, cli):
    run = _run_two_steps(project, agent_script, cli)
    ws = run["workspace"]
    assert project.git("rev-parse", ws["branch"]).strip() == ws["head"]  # replayed on itself: the same commits
    assert ws["base"] == project.git("rev-parse", "HEAD").strip()
    assert ws["start"] in (None, ws["base"])  # a worktree's start: an overlay's is in its overlay.json


def test_a_continued_run_extends_the_branch_a_user_may_already_have_merged(project, agent_script, cli):
    _users_own_changes(project)
    first = cli(
        "run", "fix add", "--implementer", agent_script(TWO_STEPS), "--no-review", "--verify-cmd", GATE,
        "--max-iters", "1", cwd=project.path,
    )  # fmt: skip
    assert first.exit_code == 1, first.out + first.err
    run = project.run_json()
    branch = run["workspace"]["branch"]
    before = project.git("rev-parse", branch).strip()
    assert project.git("log", "--format=%s", f"HEAD..{branch}").splitlines() == ["documented add"]
    again = cli("continue", run["run_id"], "--max-iters", "1", cwd=project.path)
    assert again.exit_code == 0, again.out + again.err
    assert project.git("rev-parse", f"{branch}~1").strip() == before  # the same commit, one more on top
    assert project.git("log", "--format=%s", f"HEAD..{branch}").splitlines() == [
        "fixed add: it returns a + b now",
        "documented add",
    ]


def test_a_branch_holding_the_users_own_commit_is_left_as_it_was(project, agent_script, cli, tmp_path):
    first = cli(
        "run", "fix add", "--implementer", agent_script(TWO_STEPS), "--no-review", "--verify-cmd", GATE,
        "--max-iters", "1", cwd=project.path,
    )  # fmt: skip
    assert first.exit_code == 1
    run = project.run_json()
    branch = run["workspace"]["branch"]
    elsewhere = tmp_path / "elsewhere"
    project.git("worktree", "add", "-q", str(elsewhere), branch)
    (elsewhere / "mine.txt").write_text("my own work\n")
    git(elsewhere, "add", "mine.txt")
    git(elsewhere, "commit", "-qm", "my own change")
    mine = git(elsewhere, "rev-parse", "HEAD").strip()

    again = cli("continue", run["run_id"], "--max-iters", "1", cwd=project.path)
    assert again.exit_code == 0, again.out + again.err
    assert project.git("rev-parse", branch).strip() == mine
    assert f"branch {branch} holds commits the run did not make: left as it was" in project.run_json()["stop_detail"]


def test_an_in_place_run_says_there_is_nothing_to_land(project, agent_script, cli):
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE,
        "--workspace", "in-place", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    assert "land:   nothing to do, the run changed the workdir in place" in result.out
    assert "loope apply" not in result.out
    assert project.read("calc.py") == "def add(a, b):\n    return a + b\n"


REPLACE_FIX = (
    "p = pathlib.Path('calc.py')\n"
    "p.write_text(p.read_text().replace('a - b', 'a + b'))\n"
    "print('fixed add: it returns a + b now')\n"
)


def test_a_file_the_user_had_changed_too_carries_only_the_runs_change(project, agent_script, cli):
    head = project.git("rev-parse", "HEAD").strip()
    project.write("calc.py", "# my note, not committed\n\n" + project.read("calc.py"))
    result = cli(
        "run", "fix add", "--implementer", agent_script(REPLACE_FIX), "--no-review", "--verify-cmd", GATE,
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    branch = project.run_json()["workspace"]["branch"]
    # The run's change, made on the committed calc.py: the user's note is theirs, not the branch's.
    assert project.git("show", f"{branch}:calc.py") == "def add(a, b):\n    return a + b\n"
    assert project.git("rev-parse", f"{branch}~1").strip() == head
    project.git("stash", "-q")
    project.git("merge", "--ff-only", "-q", branch)
    project.git("stash", "pop", "-q")
    assert project.read("calc.py") == "# my note, not committed\n\ndef add(a, b):\n    return a + b\n"


def test_a_file_whose_changes_do_not_merge_comes_as_the_run_left_it(project, agent_script, cli):
    project.write("calc.py", project.read("calc.py") + "# my note, next to the run's change\n")
    result = cli(
        "run", "fix add", "--implementer", agent_script(REPLACE_FIX), "--no-review", "--verify-cmd", GATE,
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    branch = project.run_json()["workspace"]["branch"]
    assert project.git("show", f"{branch}:calc.py") == (
        "def add(a, b):\n    return a + b\n# my note, next to the run's change\n"
    )
