"""Workspaces: worktree (default in git), copy (non-git or --workspace copy), in-place (shadow git dir).

Whatever the mode, a run starts from exactly what the user sees (uncommitted and untracked, non-ignored
files included) and leaves the user's index, branch and .git alone.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import FIX, FIXED_CALC, GATE, Project, overlay_works, run_file

# Records the files the agent sees (and two of them), then fixes calc.py.
SEES = """
seen = sorted(
    str(p) for p in pathlib.Path(".").rglob("*") if p.is_file() and ".git" not in p.parts and ".loope" not in p.parts
)
record = {{"files": seen, "readme": pathlib.Path("README.md").read_text()}}
pathlib.Path({out!r}).write_text(json.dumps(record))
"""


def seeing_agent(agent_script, out: Path) -> str:  # type: ignore[no-untyped-def]
    return agent_script(SEES.format(out=str(out)) + FIX)


def make_dirty(project: Project) -> None:
    """An uncommitted change, a staged one, an untracked file and ignored files, as users have."""
    project.write("README.md", "committed\n")
    project.write(".gitignore", "__pycache__/\n.pytest_cache/\n*.log\n")
    project.commit("readme")
    project.write("README.md", "committed\nand an uncommitted line\n")
    project.write("staged.txt", "staged\n")
    project.git("add", "staged.txt")
    project.write("untracked.txt", "new\n")
    project.write("debug.log", "ignored\n")
    project.write("build/out.log", "ignored too\n")


def user_state(project: Project) -> dict[str, object]:
    """Everything a run must leave as it was in the user's repository."""
    git_dir = project.path / ".git"
    return {
        "head": project.git("rev-parse", "HEAD"),
        "branch": project.git("branch", "--show-current"),
        "status": project.git("status", "--porcelain", "--untracked-files=all"),
        "index": (git_dir / "index").read_bytes(),
        "stash": project.git("stash", "list"),
        "files": {p: project.read(p) for p in ("README.md", "staged.txt", "untracked.txt", "debug.log", "calc.py")},
    }


@pytest.mark.parametrize("flags", [(), ("--workspace", "worktree")], ids=["default", "worktree"])
def test_the_run_branch_gets_a_commit_per_changing_step_and_the_users_checkout_stays(project, agent_script, cli, flags):
    implementer = agent_script(
        "if os.environ['LOOPE_ITERATION'] == '1':\n"
        "    pathlib.Path('calc.py').write_text('def add(a, b):\\n    return a * b\\n')\n"
        "else:\n" + "".join(f"    {line}\n" for line in FIX.splitlines())
    )
    head = project.git("rev-parse", "HEAD").strip()
    result = cli(
        "run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE, *flags, cwd=project.path
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    ws = run["workspace"]
    branch = f"loope/{run['run_id']}"
    mode = "overlay" if overlay_works() and not flags else "worktree"  # the default: an overlay where one works
    assert (ws["mode"], ws["branch"]) == (mode, branch)
    assert Path(ws["path"]) == project.runs()[-1] / "workspace"
    runs_of = project.git("log", "--format=%(trailers:key=Loope-Run,valueonly,separator=)", f"{head}..{branch}")
    commits = runs_of.splitlines()
    assert len(commits) == 2  # two implementer steps changed files; gates and the like commit nothing
    assert all(c.strip() == run["run_id"] for c in commits)  # each carries the run in its Loope-Run trailer
    assert project.git("show", f"{branch}:calc.py") == FIXED_CALC
    assert project.git("branch", "--show-current").strip() == "main"
    assert project.git("rev-parse", "HEAD").strip() == head
    assert project.read("calc.py") != FIXED_CALC
    assert str(Path(ws["path"])) not in project.git("worktree", "list")
    if mode == "worktree":
        assert ws["base"] == head  # a clean tree: the base is HEAD
        assert ws["removed"] is True  # the run is over: its result is on the branch, its worktree gone


def test_worktree_starts_from_what_the_user_sees_without_touching_their_index(project, agent_script, cli, tmp_path):
    make_dirty(project)
    before = user_state(project)
    seen_file = tmp_path / "seen.json"
    result = cli(
        "run", "fix add", "--implementer", seeing_agent(agent_script, seen_file), "--no-review", "--verify-cmd", GATE,
        "--sandbox-writable", str(tmp_path), "--workspace", "worktree", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    seen = json.loads(seen_file.read_text())
    assert seen["readme"] == "committed\nand an uncommitted line\n"
    assert {"staged.txt", "untracked.txt", "calc.py", "tests/test_calc.py"} <= set(seen["files"])
    assert "debug.log" not in seen["files"]
    assert "build/out.log" not in seen["files"]
    assert user_state(project) == before
    run = project.run_json()
    base = run["workspace"]["base"]
    assert base != before["head"]  # a snapshot of the dirty tree, on top of HEAD
    assert project.git("show", f"{base}:untracked.txt") == "new\n"
    # Only the agent's change is the run's change, not the user's uncommitted work.
    assert [f["path"] for f in run["changes"]["files"]] == ["calc.py"]


@pytest.mark.parametrize("dirty", [False, True])
def test_copy_workspace_in_a_git_repository(project, agent_script, cli, tmp_path, dirty):
    if dirty:
        make_dirty(project)
    else:
        project.write("README.md", "committed\n")
        project.commit("readme")
    before = user_state(project) if dirty else project.git("status", "--porcelain")
    seen_file = tmp_path / "seen.json"
    result = cli(
        "run", "fix add", "--workspace", "copy", "--implementer", seeing_agent(agent_script, seen_file), "--no-review",
        "--verify-cmd", GATE, "--sandbox-writable", str(tmp_path), cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    rundir = project.runs()[-1]
    assert run["workspace"]["mode"] == "copy"
    assert run["workspace"]["branch"] is None
    assert Path(run["workspace"]["path"]) == rundir / "workspace"
    assert (rundir / "shadow.git").is_dir()  # the copy is tracked by a shadow git dir in the run dir
    assert project.git("branch", "--list", "loope/*") == ""
    assert (rundir / "workspace" / "calc.py").read_text() == FIXED_CALC
    assert [f["path"] for f in run["changes"]["files"]] == ["calc.py"]
    seen = json.loads(seen_file.read_text())
    if dirty:
        assert user_state(project) == before
        assert seen["readme"] == "committed\nand an uncommitted line\n"
        assert {"staged.txt", "untracked.txt"} <= set(seen["files"])
        assert "debug.log" not in seen["files"]
        assert "build/out.log" not in seen["files"]
    else:
        assert project.git("status", "--porcelain") == before == ""


def test_a_directory_outside_git_defaults_to_a_copy(tmp_path, agent_script, cli):
    plain = Project(tmp_path / "plain")
    plain.write("calc.py", "def add(a, b):\n    return a - b\n")
    plain.write("tests/test_calc.py", "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    plain.write("README.md", "notes\n")
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE, cwd=plain.path
    )
    assert result.exit_code == 0, result.out + result.err
    run = plain.run_json()
    assert run["workspace"]["mode"] == "copy"
    assert run_file(run, "calc.py") == FIXED_CALC
    assert plain.read("calc.py") == "def add(a, b):\n    return a - b\n"
    assert not (plain.path / ".git").exists()
    assert sorted(p.name for p in plain.path.iterdir()) == [".loope", "README.md", "calc.py", "tests"]


def test_in_place_edits_the_users_tree_and_leaves_their_git_alone(project, agent_script, cli):
    project.write("staged.txt", "staged\n")
    project.git("add", "staged.txt")
    index_before = (project.path / ".git" / "index").read_bytes()
    head = project.git("rev-parse", "HEAD")
    refs = project.git("for-each-ref")
    status_before = project.git("status", "--porcelain")
    result = cli(
        "run", "fix add", "--workspace", "in-place", "--implementer", agent_script(FIX), "--no-review",
        "--verify-cmd", GATE, cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["workspace"]["mode"], Path(run["workspace"]["path"])) == ("in-place", project.path)
    assert project.read("calc.py") == FIXED_CALC  # the change is in the user's own files
    assert (project.path / ".git" / "index").read_bytes() == index_before
    assert project.git("rev-parse", "HEAD") == head
    assert project.git("for-each-ref") == refs
    assert status_before == "A  staged.txt\n"
    # The agent's edit is an unstaged change; the user's staged file is still staged; .loope is invisible.
    assert project.git("status", "--porcelain") == " M calc.py\nA  staged.txt\n"
    assert (project.runs()[-1] / "shadow.git").is_dir()
    assert [f["path"] for f in run["changes"]["files"]] == ["calc.py"]


def test_in_place_in_a_directory_outside_git(tmp_path, converge):
    plain = Project(tmp_path / "plain")
    plain.write("calc.py", "def add(a, b):\n    return a - b\n")
    converge(FIX, "--workspace", "in-place", goal="fix add", cwd=plain.path)
    assert plain.read("calc.py") == FIXED_CALC
    assert not (plain.path / ".git").exists()
    assert plain.run_json()["changes"]["files"] == [{"path": "calc.py", "status": "modified", "added": 1, "removed": 1}]


def test_a_run_in_a_repository_without_commits(tmp_path, converge):
    fresh = Project(tmp_path / "fresh")
    fresh.path.mkdir()
    fresh.git("init", "-q", "-b", "main")
    fresh.write("calc.py", "def add(a, b):\n    return a - b\n")
    converge(FIX, goal="fix add", cwd=fresh.path)
    run = fresh.run_json()
    assert run["workspace"]["mode"] == ("overlay" if overlay_works() else "worktree")
    assert run_file(run, "calc.py") == FIXED_CALC
    assert fresh.git("status", "--porcelain") == "?? calc.py\n"
    no_head = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=fresh.path, capture_output=True, check=False
    )
    assert no_head.returncode != 0  # still no commit on the user's branch


def test_the_guard_undoes_changes_to_protected_files(project, agent_script, cli):
    body = FIX + "pathlib.Path('tests/test_calc.py').write_text('def test_nothing():\\n    pass\\n')\n"
    # The guard as the only line: inside the sandbox the protected file is read-only, the write refused.
    result = cli(
        "run", "fix add", "--implementer", agent_script(body), "--no-review", "--verify-cmd", GATE,
        "--protect", "tests/**", "--max-iters", "1", "--sandbox", "off", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert [f["path"] for f in run["changes"]["files"]] == ["calc.py"]
    assert any("tests/test_calc.py is protected" in v for v in run["steps"][0]["violations"])
    assert "test_add_negative" in run_file(run, "tests/test_calc.py")


@pytest.mark.parametrize("mode", ["worktree", "copy"])
def test_an_agent_that_deletes_the_workspace_git_cannot_reach_the_users_repository(project, mode, converge):
    """The workspace sits inside the user's project: without its .git, git must not find theirs.

    loope names the workspace's git dir itself, so the agent's deletion changes nothing for it.
    """
    make_dirty(project)
    before = user_state(project)
    refs = project.git("for-each-ref", "refs/heads")
    body = "import shutil\nshutil.rmtree('.git') if os.path.isdir('.git') else os.remove('.git')\n" + FIX
    # Unsandboxed: inside the sandbox the workspace's .git is read-only and cannot be deleted at all.
    converge(body, "--workspace", mode, "--sandbox", "off", goal="fix add", cwd=project.path)
    run = project.run_json()
    assert (run["status"], run["converged"]) == ("converged", True)
    assert [f["path"] for f in run["changes"]["files"]] == ["calc.py"]
    assert user_state(project) == before
    heads = project.git("for-each-ref", "refs/heads").splitlines()
    assert [h for h in heads if "refs/heads/loope/" not in h] == refs.splitlines()  # main did not move
