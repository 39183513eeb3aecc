"""loope moves HEAD after its commit as ``git update-ref HEAD`` would, or leaves it to git.

Real git in tmp_path: the ref and its reflogs end as git's own update leaves them (git reads them
back), and wherever the repository is not exactly as loope left it (a lock held, a packed ref, a link,
HEAD pointed elsewhere) nothing is touched and git does the move.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from loope.workspace.git import Git, safe_env
from loope.workspace.refmove import move_head

ENV = {**safe_env(), "GIT_COMMITTER_NAME": "loope", "GIT_COMMITTER_EMAIL": "loope@localhost"}
ENV |= {"GIT_AUTHOR_NAME": "loope", "GIT_AUTHOR_EMAIL": "loope@localhost"}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env=ENV, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit(repo: Path, message: str) -> str:
    return git(repo, "commit-tree", git(repo, "write-tree"), "-p", "HEAD", "-m", message)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository on branch main, its reflogs written by git (two commits made through it)."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("a\n")
    git(path, "add", "a.txt")
    git(path, "commit", "-qm", "one")
    git(path, "commit", "-q", "--allow-empty", "-m", "two")
    return path


def logs(repo: Path) -> list[str]:
    return [(repo / ".git" / "logs" / name).read_text() for name in ("HEAD", "refs/heads/main")]


def without_times(text: str) -> str:
    return re.sub(r"> \d+ [+-]\d{4}", "> T", text)


def test_the_branch_head_names_moves_with_the_reflog_lines_git_writes(repo: Path, tmp_path: Path) -> None:
    twin = tmp_path / "twin"
    subprocess.run(["cp", "-a", str(repo), str(twin)], check=True)
    old, new = git(repo, "rev-parse", "HEAD"), commit(repo, "three")
    git(twin, "update-ref", "HEAD", commit(twin, "three"))  # what git itself does

    assert move_head(repo / ".git", old, new, ENV)

    assert git(repo, "rev-parse", "refs/heads/main") == new
    assert git(repo, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert git(repo, "reflog", "--format=%H", "main").splitlines()[:2] == [new, old]
    assert git(repo, "reflog", "--format=%H", "HEAD").splitlines()[:2] == [new, old]
    twin_new = git(twin, "rev-parse", "HEAD")
    ours = [without_times(log).replace(new, "NEW") for log in logs(repo)]
    theirs = [without_times(log).replace(twin_new, "NEW") for log in logs(twin)]
    assert ours == theirs
    assert not (repo / ".git" / "refs" / "heads" / "main.lock").exists()
    git(repo, "fsck", "--no-progress")


def test_a_detached_head_moves_as_before(repo: Path) -> None:
    old = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "--detach")
    before = logs(repo)
    new = commit(repo, "three")

    assert move_head(repo / ".git", old, new, ENV)

    assert (repo / ".git" / "HEAD").read_text() == f"{new}\n"
    assert git(repo, "rev-parse", "main") == old
    assert logs(repo) == before


def _lock_held(repo: Path) -> None:
    (repo / ".git" / "refs" / "heads" / "main.lock").write_text("")


def _packed(repo: Path) -> None:
    git(repo, "pack-refs", "--all")


def _moved_by_someone_else(repo: Path) -> None:
    git(repo, "update-ref", "refs/heads/main", "HEAD~1")


def _head_elsewhere(repo: Path) -> None:
    git(repo, "branch", "other", "HEAD~1")
    git(repo, "symbolic-ref", "HEAD", "refs/heads/other")


def _reflog_a_link(repo: Path) -> None:
    log = repo / ".git" / "logs" / "HEAD"
    (repo / "users-file.txt").write_text(log.read_text())
    log.unlink()
    log.symlink_to(repo / "users-file.txt")


def _ref_a_link(repo: Path) -> None:
    ref = repo / ".git" / "refs" / "heads" / "main"
    (repo / ".git" / "refs" / "heads" / "real").write_text(ref.read_text())
    ref.unlink()
    ref.symlink_to("real")


def _no_reflog(repo: Path) -> None:
    (repo / ".git" / "logs" / "refs" / "heads" / "main").unlink()


@pytest.mark.parametrize(
    "change", [_lock_held, _packed, _moved_by_someone_else, _head_elsewhere, _reflog_a_link, _ref_a_link, _no_reflog]
)
def test_anything_not_as_loope_left_it_is_left_untouched(repo: Path, change) -> None:  # type: ignore[no-untyped-def]
    old, new = git(repo, "rev-parse", "HEAD"), commit(repo, "three")
    change(repo)
    before = files(repo)

    assert not move_head(repo / ".git", old, new, ENV)

    assert files(repo) == before


def files(repo: Path) -> dict[str, bytes | str]:
    """Every file of the repository but its objects (links by their target), the user's file included."""
    found: dict[str, bytes | str] = {}
    for path in repo.rglob("*"):
        if "objects" in path.relative_to(repo).parts:
            continue
        if path.is_symlink():
            found[str(path)] = str(path.readlink())
        elif path.is_file():
            found[str(path)] = path.read_bytes()
    return found


@pytest.mark.parametrize(
    "env",
    [
        {"GIT_COMMITTER_DATE": "@0 +0000"},  # git would write that date
        {"GIT_COMMITTER_NAME": " spaced "},  # git would trim it
        {"GIT_COMMITTER_EMAIL": "a<b>"},
        {"GIT_COMMITTER_NAME": ""},
    ],
)
def test_an_identity_git_would_write_otherwise_is_left_to_git(repo: Path, env: dict[str, str]) -> None:
    old, new = git(repo, "rev-parse", "HEAD"), commit(repo, "three")

    assert not move_head(repo / ".git", old, new, {**ENV, **env})

    assert git(repo, "rev-parse", "main") == old


def test_loopes_commit_moves_a_symbolic_head_without_a_process_and_falls_back_to_git(repo: Path) -> None:
    client = Git(repo, repo / ".git")
    client.run("add", "a.txt")
    old = git(repo, "rev-parse", "HEAD")
    new = client.commit_tree(client.write_tree(), old, "three")
    assert git(repo, "rev-parse", "main") == new
    _packed(repo)  # the loose ref is gone: git moves it
    newer = client.commit_tree(client.write_tree(), new, "four")
    assert git(repo, "rev-parse", "main") == newer
    assert git(repo, "reflog", "--format=%H", "main").splitlines()[:3] == [newer, new, old]
