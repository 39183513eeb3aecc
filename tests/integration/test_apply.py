"""``loope apply RUN``: land a run's change safely (DESIGN.md, Safety: Apply)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import FIX, FIXED_CALC, Project, git, in_workspace, one_error_line


@pytest.fixture
def cli(cli, workspace_mode):  # type: ignore[no-untyped-def]
    """Each test runs in the default workspace and in an overlay."""
    return in_workspace(cli, workspace_mode)


# Fixes calc.py, adds a file in a new directory and an executable script, deletes old.txt.
CHANGE = (
    FIX
    + """
pathlib.Path("docs").mkdir(exist_ok=True)
pathlib.Path("docs/NOTES.md").write_text("add fixed\\n")
pathlib.Path("run.sh").write_text("#!/bin/sh\\necho hi\\n")
os.chmod("run.sh", 0o755)
if pathlib.Path("old.txt").exists():
    os.remove("old.txt")
"""
)


@pytest.fixture
def finished(project, converge):  # type: ignore[no-untyped-def]
    """A converged run (worktree mode) whose change is not applied yet; old.txt is deleted in it."""
    project.write("old.txt", "old\n")
    project.commit("old")
    converge(CHANGE, goal="fix add", cwd=project.path)
    return project


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts and ".loope" not in p.relative_to(root).parts
    }


def test_apply_lands_the_change_in_the_workdir(finished, cli):
    result = cli("apply", "0001", cwd=finished.path)
    assert result.exit_code == 0, result.err
    assert finished.read("calc.py") == FIXED_CALC
    assert finished.read("docs/NOTES.md") == "add fixed\n"
    assert os.access(finished.path / "run.sh", os.X_OK)
    assert finished.read("old.txt") == "old\n"  # deletions only with --delete
    assert "M calc.py" in result.out
    assert "A docs/NOTES.md" in result.out
    assert "- old.txt  (deleted in the run; pass --delete to delete it)" in result.out
    assert "applied 3 file(s)" in result.out
    # The user's git is theirs: nothing staged, nothing committed.
    assert finished.git("status", "--porcelain") == " M calc.py\n?? docs/\n?? run.sh\n"
    again = cli("apply", "0001", cwd=finished.path)
    assert again.exit_code == 0
    assert "= calc.py  (already as in the run)" in again.out


def test_delete_removes_what_the_run_deleted(finished, cli):
    result = cli("apply", "0001", "--delete", cwd=finished.path)
    assert result.exit_code == 0, result.err
    assert not (finished.path / "old.txt").exists()
    assert "D old.txt" in result.out


def test_delete_removes_the_directories_it_emptied_and_keeps_one_holding_a_users_file(project, converge, cli):
    project.write("old/a.txt", "a\n")
    project.write("old/deep/b.txt", "b\n")
    project.write("kept/c.txt", "c\n")
    project.commit("two directories")
    converge(FIX + 'import shutil\nshutil.rmtree("old")\nos.remove("kept/c.txt")\n', goal="fix add", cwd=project.path)
    project.write("kept/mine.txt", "the user's, untracked\n")

    result = cli("apply", "0001", "--delete", cwd=project.path)

    assert result.exit_code == 0, result.err
    assert not (project.path / "old").exists()
    assert sorted(p.name for p in (project.path / "kept").iterdir()) == ["mine.txt"]


def test_dry_run_writes_nothing(finished, cli):
    before = snapshot(finished.path)
    result = cli("apply", "0001", "--dry-run", "--delete", cwd=finished.path)
    assert result.exit_code == 0, result.err
    assert "dry run: nothing was written" in result.out
    assert "M calc.py" in result.out
    assert snapshot(finished.path) == before


def test_workdir_applies_into_another_clone(finished, cli, tmp_path):
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(finished.path), str(other))
    before = snapshot(finished.path)
    result = cli("apply", "0001", "--workdir", str(other), cwd=finished.path)
    assert result.exit_code == 0, result.err
    assert (other / "calc.py").read_text() == FIXED_CALC
    assert (other / "docs" / "NOTES.md").read_text() == "add fixed\n"
    assert snapshot(finished.path) == before  # the run's own workdir is untouched


def test_a_file_changed_since_the_base_is_a_conflict_unless_forced(finished, cli):
    finished.write("calc.py", "def add(a, b):\n    return b + a  # mine\n")
    before = snapshot(finished.path)
    result = cli("apply", "0001", cwd=finished.path)
    assert result.exit_code == 1
    line = one_error_line(result.err)
    assert "changed since the run started" in line
    assert "--force" in line
    assert "calc.py  (conflict: changed since the run started)" in result.out
    assert snapshot(finished.path) == before  # nothing written, not even the files without a conflict
    forced = cli("apply", "0001", "--force", cwd=finished.path)
    assert forced.exit_code == 0, forced.err
    assert finished.read("calc.py") == FIXED_CALC
    assert finished.read("docs/NOTES.md") == "add fixed\n"


def test_a_new_file_the_user_also_created_is_a_conflict(finished, cli):
    finished.write("docs/NOTES.md", "my own notes\n")
    result = cli("apply", "0001", cwd=finished.path)
    assert result.exit_code == 1
    assert "docs/NOTES.md  (conflict: already exists with other content)" in result.out
    assert finished.read("docs/NOTES.md") == "my own notes\n"
    assert finished.read("calc.py") != FIXED_CALC


def test_a_symlinked_directory_leading_outside_the_target_is_refused(project, cli, tmp_path, converge):
    project.write("pkg/mod.py", "VALUE = 1\n")
    project.commit("pkg")
    body = FIX + "pathlib.Path('pkg/mod.py').write_text('VALUE = 2\\n')\n"
    converge(body, goal="edit", cwd=project.path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "mod.py").write_text("VALUE = 1\n")
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(project.path), str(other))
    for path in (other / "pkg").iterdir():
        path.unlink()
    (other / "pkg").rmdir()
    (other / "pkg").symlink_to(outside, target_is_directory=True)
    before = snapshot(other)
    refused = cli("apply", "0001", "--workdir", str(other), "--force", cwd=project.path)
    assert refused.exit_code == 2
    assert "symlink" in one_error_line(refused.err)
    assert (outside / "mod.py").read_text() == "VALUE = 1\n"
    assert snapshot(other) == before


def test_a_symlink_the_run_made_to_outside_is_refused(project, cli, converge):
    body = FIX + "os.symlink('/etc/passwd', 'leak')\n"
    converge(body, goal="edit", cwd=project.path)
    refused = cli("apply", "0001", cwd=project.path)
    assert refused.exit_code == 2
    assert "outside the target" in one_error_line(refused.err)
    assert not os.path.lexists(project.path / "leak")
    assert project.read("calc.py") != FIXED_CALC


def test_apply_a_copy_run_of_a_directory_outside_git(tmp_path, cli, converge):
    plain = Project(tmp_path / "plain")
    plain.write("calc.py", "def add(a, b):\n    return a - b\n")
    converge(FIX, "--workspace", "copy", goal="fix add", cwd=plain.path)  # as it would be by default, outside git
    assert plain.run_json()["workspace"]["mode"] == "copy"
    applied = cli("apply", "0001", cwd=plain.path)
    assert applied.exit_code == 0, applied.err
    assert plain.read("calc.py") == FIXED_CALC


def test_apply_a_run_started_in_a_subdirectory_lands_in_that_subdirectory(project, cli, converge):
    project.write("pkg/mod.txt", "one\n")
    project.commit("pkg")
    sub = project.path / "pkg"
    body = "pathlib.Path('mod.txt').write_text('two\\n')"
    # without it, a run from a subdirectory works on the whole repository
    converge(body, "--workdir", str(sub), goal="edit", cwd=sub)
    applied = cli("apply", "0001", cwd=sub)
    assert applied.exit_code == 0, applied.out + applied.err
    assert (sub / "mod.txt").read_text() == "two\n"
    assert not (sub / "pkg").exists()


def test_a_run_that_changed_nothing_has_nothing_to_apply(project, agent_script, cli):
    cli(
        "run",
        "look",
        "--implementer",
        agent_script("print('nothing to do')"),
        "--no-review",
        "--max-iters",
        "1",
        cwd=project.path,
    )
    result = cli("apply", "0001", cwd=project.path)
    assert result.exit_code == 0, result.err
    assert "changed no files; nothing to apply" in result.out


def test_apply_an_unknown_run_is_one_clear_line(project, cli):
    result = cli("apply", "0042", cwd=project.path)
    assert result.exit_code == 2
    assert "no runs" in one_error_line(result.err)


def test_apply_after_a_run_from_a_dirty_tree_keeps_the_users_uncommitted_work(project, cli, converge):
    project.write("README.md", "committed\n")
    project.commit("readme")
    project.write("README.md", "committed\nmine, uncommitted\n")
    body = FIX + "readme = pathlib.Path('README.md')\nreadme.write_text(readme.read_text() + 'the agent\\'s line\\n')\n"
    converge(body, goal="fix", cwd=project.path)
    applied = cli("apply", "0001", cwd=project.path)
    assert applied.exit_code == 0, applied.out + applied.err  # the uncommitted line is the base: no conflict
    assert project.read("README.md") == "committed\nmine, uncommitted\nthe agent's line\n"
    assert project.read("calc.py") == FIXED_CALC


def test_apply_an_in_place_run_finds_everything_already_there(project, cli, converge):
    converge(FIX, "--workspace", "in-place", goal="fix", cwd=project.path)
    before = snapshot(project.path)
    applied = cli("apply", "0001", cwd=project.path)
    assert applied.exit_code == 0, applied.err
    assert "= calc.py  (already as in the run)" in applied.out
    assert snapshot(project.path) == before


def test_binary_files_and_odd_names_land_byte_for_byte(project, cli, converge):
    body = (
        "pathlib.Path('assets').mkdir()\n"
        "pathlib.Path('assets/logo.bin').write_bytes(bytes(range(256)) * 4)\n"
        "pathlib.Path('my notes ü.md').write_text('spaces and unicode\\n')\n"
    )
    converge(body, goal="add", cwd=project.path)
    files = {f["path"]: f for f in project.run_json()["changes"]["files"]}
    assert files["assets/logo.bin"] == {"path": "assets/logo.bin", "status": "added", "added": None, "removed": None}
    assert files["my notes ü.md"]["added"] == 1
    assert "assets/logo.bin binary" in (project.runs()[-1] / "report.md").read_text()
    applied = cli("apply", "0001", cwd=project.path)
    assert applied.exit_code == 0, applied.err
    assert (project.path / "assets" / "logo.bin").read_bytes() == bytes(range(256)) * 4
    assert project.read("my notes ü.md") == "spaces and unicode\n"


@pytest.mark.parametrize("force", [False, True])
def test_a_file_where_the_run_has_a_directory_and_the_reverse_are_refused(project, cli, force, converge):
    body = "pathlib.Path('docs').mkdir()\npathlib.Path('docs/x.md').write_text('x\\n')\n"
    converge(body, goal="add", cwd=project.path)
    project.write("docs", "a file of mine\n")
    refused = cli("apply", "0001", *(["--force"] if force else []), cwd=project.path)
    assert refused.exit_code == 1
    assert "docs is a file" in one_error_line(refused.err)
    assert project.read("docs") == "a file of mine\n"

    body = "pathlib.Path('notes').write_text('n\\n')\n"
    converge(body, goal="add", cwd=project.path)
    project.write("notes/mine.txt", "mine\n")
    refused = cli("apply", "0002", *(["--force"] if force else []), cwd=project.path)
    assert refused.exit_code == 1
    assert "it is a directory" in one_error_line(refused.err)
    assert project.read("notes/mine.txt") == "mine\n"
