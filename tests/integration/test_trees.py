"""A step's tree made from the changed files alone (workspace/trees.py) is the tree git writes from an index,
and every case it cannot be sure of is left to the index: each checked against real git."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from loope.workspace.git import Git, checked
from loope.workspace.trees import TreeWriter
from tests.conftest import Project, git


def base_repo(project: Project) -> Git:
    for i in range(30):
        project.write(f"pkg/sub{i % 3}/m{i}.py", f"value = {i}\n")
    project.write("docs/only.md", "the only file here\n")
    project.write("run.sh", "#!/bin/sh\necho hi\n")
    project.commit("tree")
    return Git(project.path)


def git_says(project: Project, paths: list[str]) -> str:
    """The tree git writes after staging ``paths`` from disk into a copy of the index."""
    index = project.path.parent / "scratch.index"
    shutil.copyfile(project.path / ".git" / "index", index)
    own = Git(project.path).with_env(GIT_INDEX_FILE=str(index))
    own.update_index(paths)
    return own.write_tree()


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)


SCENARIOS: dict[str, Callable[[Path], list[str]]] = {
    "a file changed": lambda r: (write(r, "pkg/sub0/m0.py", "value = -1\n"), ["pkg/sub0/m0.py"])[1],
    "files added in new directories": lambda r: (
        write(r, "new/deep/er/a.txt", "a\n"),
        write(r, "new/b.txt", "b\n"),
        write(r, "top.txt", "t\n"),
        ["new/deep/er/a.txt", "new/b.txt", "top.txt"],
    )[-1],
    "the last file of a directory deleted": lambda r: ((r / "docs/only.md").unlink(), ["docs/only.md"])[1],
    "a missing path that never was": lambda r: ["nowhere/at/all.txt", "pkg/never.py"],
    "an executable bit set and one cleared": lambda r: (
        os.chmod(r / "pkg/sub1/m1.py", 0o755),
        os.chmod(r / "run.sh", 0o644),
        ["pkg/sub1/m1.py", "run.sh"],
    )[-1],
    "names with spaces, unicode and a tab": lambda r: (
        write(r, "with space/é ü.txt", "x\n"),
        write(r, "tab\there.txt", "y\n"),
        ["with space/é ü.txt", "tab\there.txt"],
    )[-1],
    "more files than one batch of hashes": lambda r: [
        (write(r, f"bulk/{i % 7}/f{i}.txt", f"{i}\n"), f"bulk/{i % 7}/f{i}.txt")[1] for i in range(1300)
    ],
    "changes, additions and deletions in one directory": lambda r: (
        write(r, "pkg/sub2/m2.py", "changed\n"),
        (r / "pkg/sub2/m5.py").unlink(),
        write(r, "pkg/sub2/added.py", "new\n"),
        ["pkg/sub2/m2.py", "pkg/sub2/m5.py", "pkg/sub2/added.py"],
    )[-1],
    "everything deleted": lambda r: [
        (p.unlink(), str(p.relative_to(r)))[1] for p in sorted(r.rglob("*")) if p.is_file() and ".git" not in p.parts
    ],
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_tree_made_from_the_changed_files_is_the_one_git_writes_from_its_index(project, scenario):
    repo = base_repo(project)
    base = repo.tree_of("HEAD")
    paths = SCENARIOS[scenario](project.path)
    writer = TreeWriter(repo)
    assert writer.plain(repo.out("ls-files").splitlines())
    try:
        made = writer.tree_with(base, paths)
    finally:
        writer.close()
    assert made == git_says(project, paths)
    assert git(project.path, "cat-file", "-t", made).strip() == "tree"  # written to the object store


def test_trees_made_one_after_another_build_on_each_other(project):
    repo = base_repo(project)
    writer = TreeWriter(repo)
    assert writer.plain([])
    tree, everything = repo.tree_of("HEAD"), set[str]()
    try:
        for step in range(6):
            paths = [f"pkg/sub{step % 3}/m{step}.py", f"steps/{step}.txt"]
            write(project.path, paths[0], f"step {step}\n")
            write(project.path, paths[1], f"{step}\n")
            if step == 4:
                (project.path / "steps/1.txt").unlink()
                paths.append("steps/1.txt")
            everything.update(paths)
            made = writer.tree_with(tree, paths)
            assert made is not None
            tree = made
    finally:
        writer.close()
    assert tree == git_says(project, sorted(everything))


IndexOnly = Callable[[Project], list[str]]


def _link(project: Project) -> list[str]:
    (project.path / "link").symlink_to("run.sh")
    return ["link"]


def _file_for_a_directory(project: Project) -> list[str]:
    shutil.rmtree(project.path / "docs")
    write(project.path, "docs", "now a file\n")
    return ["docs/only.md", "docs"]


def _directory_for_a_file(project: Project) -> list[str]:
    (project.path / "run.sh").unlink()
    write(project.path, "run.sh/inside.txt", "now a directory\n")
    return ["run.sh", "run.sh/inside.txt"]


def _quoted_name(project: Project) -> list[str]:
    write(project.path, '"quoted".txt', "q\n")
    return ['"quoted".txt']


def _new_attributes(project: Project) -> list[str]:
    write(project.path, "pkg/.gitattributes", "*.py text eol=crlf\n")
    return ["pkg/.gitattributes"]


def _fifo(project: Project) -> list[str]:
    os.mkfifo(project.path / "pipe")
    return ["pipe"]


INDEX_ONLY: dict[str, IndexOnly] = {
    "a symlink": _link,
    "a file where a directory was": _file_for_a_directory,
    "a directory where a file was": _directory_for_a_file,
    "a name hash-object would unquote": _quoted_name,
    "a .gitattributes written": _new_attributes,
    "a fifo": _fifo,
}


@pytest.mark.parametrize("case", list(INDEX_ONLY))
def test_what_only_the_index_can_tell_is_left_to_it(project, case):
    repo = base_repo(project)
    writer = TreeWriter(repo)
    assert writer.plain([])
    try:
        assert writer.tree_with(repo.tree_of("HEAD"), INDEX_ONLY[case](project)) is None
        assert writer._failures == 0  # left to the index, not failed: the next step may use the batch commands
    finally:
        writer.close()


@pytest.mark.parametrize(
    "setting",
    [
        ("config", "core.autocrlf", "input"),
        ("config", "core.eol", "crlf"),
        ("config", "core.filemode", "false"),
        ("config", "core.ignorecase", "true"),
        ("config", "core.attributesFile", "/dev/null"),
        ("tracked", ".gitattributes", "* text=auto\n"),
        ("info", "attributes", "* text=auto\n"),
    ],
    ids=lambda s: "-".join(s[:2]),
)
def test_a_repository_that_converts_what_it_stores_stages_through_the_index(project, setting):
    where, name, value = setting
    if where == "config":
        project.git("config", name, value)
    elif where == "tracked":
        project.write(name, value)
        project.commit("attributes")
    else:
        (project.path / ".git" / "info").mkdir(exist_ok=True)
        (project.path / ".git" / "info" / name).write_text(value)
    repo = Git(project.path)
    writer = TreeWriter(repo)
    try:
        assert not writer.plain(repo.out("ls-files").splitlines())
        project.write("calc.py", "changed\r\n")
        assert writer.tree_with(repo.tree_of("HEAD"), ["calc.py"]) is None
    finally:
        writer.close()


def test_a_batch_command_that_dies_leaves_the_step_to_the_index_and_is_started_again(project):
    repo = base_repo(project)
    writer = TreeWriter(repo)
    assert writer.plain([])
    try:
        write(project.path, "a.txt", "a\n")
        first = writer.tree_with(repo.tree_of("HEAD"), ["a.txt"])
        assert first is not None
        for batch in writer._batches.values():  # as if killed from outside
            batch._proc.kill()
            batch._proc.wait()
        write(project.path, "b.txt", "b\n")
        assert writer.tree_with(first, ["b.txt"]) is None
        assert writer.tree_with(first, ["b.txt"]) == git_says(project, ["a.txt", "b.txt"])
    finally:
        writer.close()


def test_a_work_tree_moved_away_and_made_anew_is_hashed_where_loope_looks(project):
    repo = base_repo(project)
    writer = TreeWriter(repo)
    assert writer.plain([])
    try:
        write(project.path, "a.txt", "before the move\n")
        first = writer.tree_with(repo.tree_of("HEAD"), ["a.txt"])
        assert first is not None  # the batch commands run in the work tree's directory now
        moved = project.path.parent / "moved"
        project.path.rename(moved)
        shutil.copytree(moved, project.path, symlinks=True)  # the same path, another directory
        write(moved, "a.txt", "in the old directory\n")
        write(project.path, "a.txt", "in the new one\n")
        assert writer.tree_with(first, ["a.txt"]) == git_says(project, ["a.txt"])
    finally:
        writer.close()


def test_the_kept_diff_tree_says_what_a_diff_tree_of_its_own_says(project):
    repo = base_repo(project)
    trees = [repo.tree_of("HEAD")]
    binary = bytes(range(256)) * 4
    project.path.joinpath("blob.bin").write_bytes(binary)
    write(project.path, "no-newline.txt", "no newline at the end")
    write(project.path, "pkg/sub0/m0.py", "value = 'changed'\n")
    (project.path / "docs/only.md").unlink()
    os.chmod(project.path / "run.sh", 0o755)
    writer = TreeWriter(repo)
    assert writer.plain([])
    try:
        paths = ["blob.bin", "no-newline.txt", "pkg/sub0/m0.py", "docs/only.md", "run.sh"]
        made = writer.tree_with(trees[0], paths)
        assert made is not None
        trees.append(made)
        write(project.path, "pkg/sub0/m0.py", "value = 'again'\n#loope-not-the-end\n")
        made = writer.tree_with(made, ["pkg/sub0/m0.py"])
        assert made is not None
        trees.append(made)
        for old, new in [(trees[0], trees[1]), (trees[1], trees[2]), (trees[2], trees[0]), (trees[1], trees[1])]:
            kept, own = writer.compare(old, new), repo.compare(old, new)
            assert kept is not None
            assert (kept.changes, kept.patch) == (own.changes, own.patch)
        assert {c.path for c in repo.compare(trees[0], trees[1]).changes} == set(paths)
    finally:
        writer.close()


MESSAGES = ["one line", "subject\n\nbody\n\nLoope-Run: 0001\nLoope-Step: 3", "ends with a newline\n", "ünïcödé ✎"]


@pytest.mark.parametrize("message", MESSAGES, ids=range(len(MESSAGES)))
def test_a_commit_the_kept_hash_object_writes_is_the_one_commit_tree_writes(project, message):
    repo = Git(project.path)
    writer = TreeWriter(repo)
    tree, parent, env = repo.tree_of("HEAD"), repo.rev("HEAD") or "", repo.commit_env()
    try:
        for _ in range(5):  # both within one second, so that they carry the same time
            second = int(time.time())
            made = writer.commit(tree, parent, message, env)
            theirs = checked("commit-tree", repo.commit_object(tree, parent, message).finish()).text.strip()
            if int(time.time()) == second:
                break
        assert made == theirs
    finally:
        writer.close()


@pytest.mark.parametrize(
    "setting",
    [("env", "GIT_COMMITTER_DATE", "2001-01-01T00:00:00"), ("env", "GIT_AUTHOR_NAME", "trimmed. "),
     ("config", "i18n.commitEncoding", "ISO-8859-1")],
    ids=lambda s: s[1],
)  # fmt: skip
def test_a_commit_git_would_write_otherwise_is_left_to_commit_tree(project, setting):
    where, name, value = setting
    if where == "config":
        project.git("config", name, value)
    repo = Git(project.path)
    env = {**repo.commit_env(), **({name: value} if where == "env" else {})}
    writer = TreeWriter(repo)
    try:
        assert not writer.commits(env)
        assert writer.commit(repo.tree_of("HEAD"), repo.rev("HEAD") or "", "message", env) is None
    finally:
        writer.close()


def test_the_trees_kept_in_memory_stay_bounded_however_many_steps_change_a_large_directory(project):
    from loope.workspace import trees

    for i in range(400):
        project.write(f"wide/f{i}.txt", f"{i}\n")
    project.commit("a wide directory")
    repo = Git(project.path)
    writer = TreeWriter(repo)
    assert writer.plain([])
    tree = repo.tree_of("HEAD")
    try:
        for step in range(3 * trees._CACHED_ENTRIES // 400):
            write(project.path, "wide/f0.txt", f"step {step}\n")
            made = writer.tree_with(tree, ["wide/f0.txt"])
            assert made is not None
            tree = made
            assert writer._entries == sum(len(e) for e in writer._trees.values()) <= trees._CACHED_ENTRIES
        assert tree == git_says(project, ["wide/f0.txt"])
    finally:
        writer.close()
