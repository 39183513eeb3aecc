"""``loope branch RUN``: a run's commits on ``loope/<run>`` in the user's repository, and nothing else.

The overlay runs are real ``loope`` processes (they mount); ``loope branch`` needs no mount and
runs in-process. Each test compares the user's refs, config, index and files with how they were.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers.attacks import shell_implementer
from tests.helpers.overlay import loope, run_args
from tests.helpers.tree_snapshot import snapshot
from tests.integration.test_workspaces import make_dirty

__all__ = ["loope"]  # a fixture

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

FIX = "printf 'def add(a, b):\\n    return a + b\\n' > calc.py\n"
# The fix, a new file, the deletion of a file only the user had (untracked), and a note per iteration.
WORK = FIX + 'mkdir -p pkg && echo new > pkg/new.txt\nrm -f untracked.txt\necho "$LOOPE_ITERATION" >> notes.txt\n'


def rev(project: Project, ref: str) -> str:
    return project.git("rev-parse", ref).strip()


def refs(project: Project) -> dict[str, str]:
    listing = project.git("for-each-ref", "--format=%(refname) %(objectname)")
    return dict(line.split(" ", 1) for line in listing.splitlines())


def git_dir_picture(project: Project) -> dict[str, str]:
    """The user's ``.git`` but its objects (``branch`` adds some), reflogs and loose refs (``refs`` compares them)."""
    picture = snapshot(project.path / ".git")
    return {k: v for k, v in picture.items() if not k.startswith(("objects", "logs", "refs"))}


def branch_of(project: Project, run: Path) -> str:
    return f"loope/{run.name}"


def missing_objects(project: Project, ref: str) -> list[str]:
    listing = project.git("rev-list", "--objects", "--missing=print", ref)
    return [line for line in listing.splitlines() if line.startswith("?")]


def in_mode(args: list[str], mode: str) -> list[str]:
    """``run_args`` with another workspace mode."""
    at = args.index("--workspace") + 1
    return [*args[:at], mode, *args[at + 1 :]]


def overlay_run(project: Project, loope, tmp_path: Path, script: str, *extra: str) -> Path:  # type: ignore[no-untyped-def]
    done = loope(*run_args(shell_implementer(tmp_path / "agents", script), *extra), cwd=project.path)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    run = project.runs()[-1]
    assert json.loads((run / "run.json").read_text())["workspace"]["mode"] == "overlay"
    return run


def test_an_overlay_runs_branch_holds_only_its_changes_on_the_users_head_and_nothing_else_changes(
    project, tmp_path, loope, cli
):
    make_dirty(project)
    head = rev(project, "HEAD")
    run = overlay_run(project, loope, tmp_path, WORK)
    before_refs, before_git = refs(project), git_dir_picture(project)
    before_tree = snapshot(project.path, skip=(".git", ".loope"))
    assert branch_of(project, run) not in {r.removeprefix("refs/heads/") for r in before_refs}

    done = cli("branch", run.name[:4], cwd=project.path)

    assert done.exit_code == 0, done.err
    branch = branch_of(project, run)
    tip = rev(project, branch)
    assert f"branch {branch} at {tip[:10]}: 1 commit(s) of {run.name}" in done.out
    assert refs(project) == {**before_refs, f"refs/heads/{branch}": tip}  # that one ref, nothing else
    assert git_dir_picture(project) == before_git  # config, HEAD, index, worktrees: byte-identical
    assert snapshot(project.path, skip=(".git", ".loope")) == before_tree
    assert rev(project, f"{branch}^") == head  # on the commit the user had checked out
    changed = project.git("diff", "--name-status", head, branch).splitlines()
    assert sorted(changed) == ["A\tnotes.txt", "A\tpkg/new.txt", "M\tcalc.py"]  # no uncommitted file of theirs
    assert project.git("show", f"{branch}:calc.py") == "def add(a, b):\n    return a + b\n"
    assert missing_objects(project, branch) == []  # every object it needs was copied in

    again = cli("branch", run.name, cwd=project.path)
    assert again.exit_code == 0, again.err
    assert f"branch {branch} is up to date" in again.out
    assert refs(project) == {**before_refs, f"refs/heads/{branch}": tip}


def test_a_checked_out_branch_moves_with_its_files_only_when_clean_and_never_over_foreign_commits(
    project, tmp_path, loope, cli
):
    run = overlay_run(project, loope, tmp_path, WORK)
    branch = branch_of(project, run)
    assert cli("branch", run.name, cwd=project.path).exit_code == 0
    first = rev(project, branch)
    project.git("checkout", "-q", branch)
    more = loope("continue", run.name, "--max-iters", "1", "--goal", "one more note", cwd=project.path)
    assert more.returncode == 0, more.stdout + more.stderr

    project.write("calc.py", "# the user's own edit, not committed\n")
    dirty = cli("branch", run.name, cwd=project.path)
    assert dirty.exit_code == 1
    assert f"branch {branch} is checked out in {project.path} with uncommitted changes" in dirty.err
    assert len(dirty.err.strip().splitlines()) == 1
    assert rev(project, branch) == first
    assert project.read("calc.py") == "# the user's own edit, not committed\n"

    project.git("checkout", "-q", "--", "calc.py")
    moved = cli("branch", run.name, cwd=project.path)
    assert moved.exit_code == 0, moved.err
    assert f"(was {first[:10]}): 2 commit(s)" in moved.out
    assert rev(project, "HEAD") == rev(project, branch) != first
    assert project.read("notes.txt") == "1\n2\n"  # the checkout has the second commit's files
    assert project.git("status", "--porcelain") == ""

    project.write("mine.txt", "the user's commit on the run branch\n")
    project.commit("mine")
    ours = rev(project, branch)
    refused = cli("branch", run.name, cwd=project.path)
    assert refused.exit_code == 1
    assert f"branch {branch} holds commits the run did not make: left as it was" in refused.err
    assert rev(project, branch) == ours


def test_a_worktree_runs_branch_is_already_there_and_stays_as_it_is(project, tmp_path, loope, cli):
    agent = shell_implementer(tmp_path / "agents", WORK)
    done = loope(*in_mode(run_args(agent), "worktree"), cwd=project.path)
    assert done.returncode == 0, done.stdout + done.stderr
    run = project.runs()[-1]
    branch = branch_of(project, run)
    tip, before = rev(project, branch), refs(project)
    again = cli("branch", run.name, cwd=project.path)
    assert again.exit_code == 0, again.err
    assert f"branch {branch} is up to date: 1 commit(s) of {run.name}, at {tip[:10]}" in again.out
    assert refs(project) == before


def test_what_cannot_be_branched_is_one_line_with_its_exit_code(project, tmp_path, loope, cli):
    unknown = cli("branch", "9999", cwd=project.path)
    assert unknown.exit_code == 2
    assert unknown.err.startswith("loope: error: no run")
    idle = overlay_run(project, loope, tmp_path, "echo nothing to do\n", "--max-iters", "1")
    before = refs(project)
    empty = cli("branch", idle.name, cwd=project.path)
    assert empty.exit_code == 1
    assert empty.err == f"loope: error: run {idle.name} made no commits; there is nothing to put on a branch\n"
    copy = loope(*in_mode(run_args(shell_implementer(tmp_path / "agents", FIX)), "copy"), cwd=project.path)
    assert copy.returncode == 0, copy.stdout + copy.stderr
    copied = project.runs()[-1]
    refused = cli("branch", copied.name, cwd=project.path)
    assert refused.exit_code == 2
    assert f"run {copied.name} is a copy run, which keeps no branch" in refused.err
    assert refs(project) == before


def test_loope_branch_is_in_the_help_and_the_readme(cli):
    helped = cli("branch", "--help")
    assert helped.exit_code == 0
    assert "loope/<run>" in helped.out
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "loope branch RUN" in readme
