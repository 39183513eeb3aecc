"""loope's git never runs a filter or diff program a repository's config names, whichever command it runs.

It reads the driver names only before a command that may run one; the attack is a repository whose
config names a clean filter for every file, and loope's own commands on it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from loope.workspace.git import Git


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Git, Path]:
    """A repository whose clean filter (for every file) would leave a mark, and one changed file."""
    repo, mark = tmp_path / "repo", tmp_path / "ran"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (repo / "a.txt").write_text("one\n")
    run("add", "a.txt")
    run("-c", "user.name=u", "-c", "user.email=u@u", "commit", "-qm", "a")
    run("config", "filter.evil.clean", f"sh -c 'touch {mark}; cat'")
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    (repo / "a.txt").write_text("two\n")
    return Git(repo), mark


@pytest.mark.parametrize(
    "args",
    [
        ("update-index", "-z", "--stdin"),  # paths from stdin are hashed again: through the clean filter
        ("update-index", "--add", "--remove", "--replace", "-z", "--stdin"),
        ("update-index", "-q", "--refresh"),
    ],
)
def test_a_command_that_hashes_files_runs_no_filter_of_the_repository(planted, args) -> None:
    git, mark = planted
    git.run(*args, stdin=b"a.txt\0", check=False)

    assert not mark.exists()


def test_index_only_commands_still_work_without_reading_the_drivers(planted) -> None:
    git, mark = planted
    git.run("update-index", "--force-remove", "-z", "--stdin", stdin=b"a.txt\0")

    assert git.out("ls-files") == ""
    assert not mark.exists()
