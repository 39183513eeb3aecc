"""A writing step's commit object, begun while its changes are compared, is taken only for that very commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from loope.workspace.early import EarlyCommit
from loope.workspace.git import Git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp_path)], check=True)
    (tmp_path / "a.txt").write_text("a\n")
    git = Git(tmp_path)
    git.add_all()
    git.commit_staged("first")
    return tmp_path


def staged_tree(repo: Path, name: str) -> str:
    (repo / name).write_text(f"{name}\n")
    git = Git(repo)
    git.add_all()
    return git.write_tree()


def test_the_commit_begun_early_is_the_one_made(repo: Path) -> None:
    git, parent = Git(repo), Git(repo).out("rev-parse", "HEAD")
    tree, early = staged_tree(repo, "b.txt"), EarlyCommit()
    with early.expecting("iteration 1"):
        early.start(git, tree, parent)
        early.start(git, tree, parent)  # the same tree staged again (the guard looked twice): begun once
    started = early.take(tree, parent, "iteration 1")
    assert started is not None
    commit = git.commit_tree(tree, parent, "iteration 1", started=started)
    assert git.out("rev-parse", "HEAD") == commit
    assert git.out("log", "-1", "--format=%T %P %s") == f"{tree} {parent} iteration 1"


def test_one_begun_for_another_tree_or_message_is_not_taken(repo: Path) -> None:
    git, parent = Git(repo), Git(repo).out("rev-parse", "HEAD")
    early = EarlyCommit()
    with early.expecting("iteration 1"):
        early.start(git, staged_tree(repo, "b.txt"), parent)  # then the guard undid a change: another tree
    assert early.take(staged_tree(repo, "c.txt"), parent, "iteration 1") is None
    tree = git.write_tree()
    with early.expecting("iteration 1"):
        early.start(git, tree, parent)
    assert early.take(tree, parent, "another message") is None
    assert git.out("rev-parse", "HEAD") == parent  # nothing moved: an early object is never a ref's


def test_nothing_is_begun_unless_a_commit_is_expected(repo: Path) -> None:
    git, parent = Git(repo), Git(repo).out("rev-parse", "HEAD")
    tree, early = staged_tree(repo, "b.txt"), EarlyCommit()
    early.start(git, tree, parent)  # a read-only step's changes, or a check's: compared, never committed
    assert early.take(tree, parent, "iteration 1") is None
