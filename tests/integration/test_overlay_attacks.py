"""Attacks on an overlay workspace's snapshot: the read-only lower layer every run from a state shares.

Each attack is an agent's shell script in a real run (its own ``loope`` process, real mounts,
real pytest as the gate). Afterwards the snapshot's layers, the user's tree and their ``.git`` are
compared entry by entry with how they were before the run.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from loope.workspace.loopedir import ensure_loope_dir
from loope.workspace.snapshots import Store
from tests.helpers.attacks import shell_implementer
from tests.helpers.overlay import kept_answers_hold, layers, loope, our_mounts, run_args
from tests.helpers.tree_snapshot import repo_changes, snapshot
from tests.integration.test_workspaces import make_dirty as dirty

__all__ = ["loope"]  # the fixture, shared with test_overlay.py

FIX = "printf 'def add(a, b):\\n    return a + b\\n' > calc.py\n"
# Every way to the lower layer the agent may try: its path, the paths of its files, a link to it.
AT_THE_LOWER_LAYER = """
store="$LOOPE_RUN_DIR/../../snapshots"
for f in "$store"/layers/*/tree/calc.py "$store"/layers/*/tree/README.md; do echo pwned > "$f"; done
echo pwned > "$store/layers/planted.txt"
mkdir "$store/layers/planted-dir"
ln -s "$store/layers" lower
for f in lower/*/tree/calc.py; do echo pwned > "$f"; done
ln -s "$store/layers" "$LOOPE_WORKSPACE/.loope/lower"
echo pwned > "$LOOPE_WORKSPACE/.loope/lower/planted.txt"
rm -f lower
echo "seen: $(ls -A "$store/layers" | wc -l)"
"""
# Leaving the namespace loope made: the PID 1 mount namespace, the root of another process.
OUT_OF_THE_NAMESPACE = """
store="$(cd "$LOOPE_RUN_DIR/../../snapshots" && pwd)"
nsenter -t 1 -m -- sh -c "for f in $store/layers/*/tree/calc.py; do echo pwned > \\$f; done"
for f in /proc/1/root"$store"/layers/*/tree/calc.py; do echo pwned > "$f"; done
for p in /proc/[0-9]*; do for f in "$p/root$store"/layers/*/tree/calc.py; do echo pwned > "$f"; done; done
umount "$store/layers"
for f in "$store"/layers/*/tree/calc.py; do echo pwned > "$f"; done
unshare -m -- sh -c "umount $store/layers; for f in $store/layers/*/tree/calc.py; do echo pwned > \\$f; done"
"""
# The git metadata in reach: the workspace's .git file, the run's git dir, the user's .git.
AT_GIT = """
echo "gitdir: $LOOPE_RUN_DIR/../../../.git" > .git
git config core.hooksPath /tmp/hooks
printf '#!/bin/sh\\necho pwned > /tmp/pwned\\n' > "$LOOPE_RUN_DIR/shadow.git/hooks/post-commit"
echo pwned >> "$LOOPE_RUN_DIR/../../../.git/config"
git --git-dir="$LOOPE_RUN_DIR/../../../.git" update-ref refs/heads/main HEAD~0
git add -A; git commit -qm "agent commit"
"""


def picture(root: Path) -> dict[str, str]:
    """Every entry of the layers under ``root`` (whiteouts included, which cannot be opened), by kind, mode
    and content; what loope keeps beside a layer is checked by ``kept_answers_hold`` instead."""
    found = {}
    for current, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(current) / name
            if path.parent.parent == root and path.name not in ("tree", "index"):
                continue
            info = os.lstat(path)
            rel = str(path.relative_to(root))
            if stat.S_ISREG(info.st_mode):
                found[rel] = f"file {info.st_mode:o} {hashlib.sha256(path.read_bytes()).hexdigest()}"
            elif stat.S_ISLNK(info.st_mode):
                found[rel] = f"link {os.readlink(path)}"
            else:
                found[rel] = f"{info.st_mode:o} {info.st_rdev}"
    return found


def attack(project, tmp_path, loope, script: str, sandbox: str) -> None:  # type: ignore[no-untyped-def]
    """Run ``script`` then the fix as the implementer; the snapshot, tree and .git must not move.

    Without the sandbox an agent is the user, and may add objects to their store (as in every
    mode); nothing that was there changes, and no ref or config moves.
    """
    dirty(project)
    store = Store(ensure_loope_dir(project.path) / "snapshots")
    store.snapshot(store.state(project.path))  # made before the run: the attack finds it in place
    lower = picture(layers(project))
    user = snapshot(project.path, skip=(".loope",))
    agent = shell_implementer(tmp_path / "a", script + FIX)
    done = loope(*run_args(agent, "--max-iters", "1", "--sandbox", sandbox), cwd=project.path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert picture(layers(project)) == lower
    kept_answers_hold(layers(project), tmp_path / "kept")
    after = snapshot(project.path, skip=(".loope",))
    assert (after == user) if sandbox == "on" else (repo_changes(user, after) == [])
    assert our_mounts(project.path) == []


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_the_lower_layer_cannot_be_reached_by_its_path_or_through_a_link(project, tmp_path, loope, sandbox):
    attack(project, tmp_path, loope, AT_THE_LOWER_LAYER, sandbox)
    message = (project.runs()[-1] / "agents" / "01-implementer-exec" / "result.md").read_text()
    assert "seen: 0" in message  # the store is an empty, read-only file system to the agent


def test_a_sandboxed_agent_cannot_leave_the_namespace_to_write_the_snapshot(project, tmp_path, loope):
    attack(project, tmp_path, loope, OUT_OF_THE_NAMESPACE, "on")


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_git_metadata_in_reach_leads_to_neither_the_users_repository_nor_the_snapshot(
    project, tmp_path, loope, sandbox
):
    attack(project, tmp_path, loope, AT_GIT, sandbox)
    record = project.run_json()
    assert {c["path"] for c in record["changes"]["files"]} == {"calc.py"}


PEEK = """
top="$(cd "$LOOPE_RUN_DIR/../../.." && pwd)"
echo "listing: $(ls -A "$top" | tr '\\n' ' ')"
echo "secret: $(test -e "$top/untracked.txt" && echo visible || echo hidden)"
echo "history: $(git log --oneline | wc -l)"
echo "status: [$(git status --short | tr '\\n' ' ')]"
"""


def test_a_sandboxed_step_sees_the_merged_view_and_nothing_else_of_the_users_tree(project, tmp_path, loope):
    dirty(project)
    done = loope(*run_args(shell_implementer(tmp_path / "a", PEEK + FIX), "--sandbox", "on"), cwd=project.path)
    assert done.returncode == 0, done.stdout + done.stderr
    message = (project.runs()[-1] / "agents" / "01-implementer-exec" / "result.md").read_text()
    assert "listing: .git .loope \n" in message  # only what the run's git borrows, and the run's own records
    assert "secret: hidden\n" in message
    assert "history: 3\n" in message  # the user's two commits, and the run's start
    assert "status: []" in message  # the agent's git sees the start as clean
