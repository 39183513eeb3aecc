"""How an overlay run starts: the user's state is captured while the runner loads, and only for an overlay.

Each run is a real ``loope`` process (it enters a mount namespace of its own) over a real repository
with uncommitted, staged, untracked and ignored files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.helpers.attacks import shell_implementer
from tests.helpers.overlay import layers, loope, run_args
from tests.helpers.tree_snapshot import snapshot
from tests.integration.test_workspaces import make_dirty

__all__ = ["loope"]  # fixtures

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

SEES = 'echo "readme: $(tr "\\n" "|" < README.md) untracked: $(cat untracked.txt)"\n'


def test_the_run_stands_on_the_state_captured_as_it_started_uncommitted_and_untracked_files_included(
    project, tmp_path, loope
):
    make_dirty(project)
    before = snapshot(project.path, skip=(".loope",))
    done = loope(*run_args(shell_implementer(tmp_path / "agents", SEES), "--max-iters", "1"), cwd=project.path)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    run = project.runs()[-1]
    message = (run / "agents" / "01-implementer-exec" / "result.md").read_text()
    assert "readme: committed|and an uncommitted line| untracked: new" in message
    layout = json.loads((run / "overlay.json").read_text())
    assert layout["tree"] != layout["head_tree"]  # the uncommitted layer, not the bare commit
    store = {**os.environ, "GIT_DIR": str(project.path / ".loope" / "snapshots" / "git")}
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", layout["tree"]], env=store, capture_output=True, check=True
    )
    assert sorted(listed.stdout.decode().split()) == [
        ".gitignore",
        "README.md",
        "calc.py",
        "staged.txt",
        "tests/test_calc.py",
        "untracked.txt",
    ]  # loope's own directory (where the capture writes) is not part of it
    assert snapshot(project.path, skip=(".loope",)) == before
    assert not list(layers(project).glob(".state-index-*"))  # the capture's copy of the index is gone


def test_a_run_refused_after_its_state_was_captured_leaves_no_copy_of_the_index_and_the_tree_as_it_was(project, loope):
    make_dirty(project)
    before = snapshot(project.path, skip=(".loope",))
    done = loope("run", "goal", "--dry-run", "--implementer", "exec:./missing.sh", "--no-review", cwd=project.path)
    assert done.returncode == 2
    assert "missing.sh" in done.stderr
    assert snapshot(project.path, skip=(".loope",)) == before
    assert not list(layers(project).glob(".state-index-*"))
    assert project.runs() == []


def test_a_worktree_run_captures_no_state_for_an_overlay(project, tmp_path, loope):
    make_dirty(project)
    agent = shell_implementer(tmp_path / "agents", "echo done\n")
    done = loope("run", "goal", "--implementer", agent, "--no-review", "--workspace", "worktree", cwd=project.path)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert not (project.path / ".loope" / "snapshots").exists()
