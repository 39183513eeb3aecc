"""Running overlay workspaces in tests: each run a ``loope`` process of its own (it enters a mount
namespace, which the test process must not), with the probe's cache in the test's directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GATE, Project

LOOPE = [sys.executable, "-m", "loope"]


@pytest.fixture
def loope(tmp_path: Path):  # type: ignore[no-untyped-def]
    """``loope ARGS`` as a process of its own (``prefix``: a command to run it under)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "NO_COLOR": "1"}

    def invoke(*args: str, cwd: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*prefix, *LOOPE, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)

    return invoke


def logging_git(where: Path, log: Path, *, index: bool = False) -> tuple[str, ...]:
    """A ``PATH`` whose ``git`` logs its arguments (after the index it is given, with ``index``), then runs the
    real git: a prefix for the ``loope`` fixture."""
    where.mkdir(parents=True)
    shim = where / "git"
    said = "${GIT_INDEX_FILE:--} $*" if index else "$*"
    shim.write_text(f'#!/bin/sh\necho "{said}" >> {log}\nexec {shutil.which("git")} "$@"\n')
    shim.chmod(0o755)
    return ("env", f"PATH={where}:{os.environ['PATH']}")


def run_args(implementer: str, *extra: str) -> list[str]:
    return ["run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE,
            "--workspace", "overlay", "--plain", *extra]  # fmt: skip


def our_mounts(path: Path) -> list[str]:
    """Mounts under ``path`` that this (the user's) namespace sees."""
    with open("/proc/self/mountinfo", encoding="utf-8") as info:
        return [line for line in info if str(path) in line]


def layers(project: Project) -> Path:
    return project.path / ".loope" / "snapshots" / "layers"


def kept_answers_hold(root: Path, scratch: Path) -> None:
    """What loope keeps beside each layer under ``root`` (``workspace/kept.py``) says what the layer's index says."""
    subprocess.run(["git", "init", "-q", "--bare", str(scratch)], check=True)
    for layer in (p for p in root.iterdir() if (p / "index").is_file()):

        def listed(index: Path, git_dir: Path, *flags: str) -> bytes:
            env = {**os.environ, "GIT_DIR": str(git_dir), "GIT_INDEX_FILE": str(index)}
            return subprocess.run(["git", "ls-files", "-z", *flags], env=env, capture_output=True, check=True).stdout

        if (layer / "tracked").exists():
            assert (layer / "tracked").read_bytes() == listed(layer / "index", scratch)
        if (layer / "split-index").exists():
            name, _, own = (layer / "split-index").read_bytes().partition(b"\n")
            git_dir = scratch / layer.name
            subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
            (git_dir / name.decode()).write_bytes((layer / name.decode()).read_bytes())
            (git_dir / "own").write_bytes(own)
            # Modes, objects and paths: git may have smudged the stat data of racily clean entries as it split.
            assert listed(git_dir / "own", git_dir, "-s") == listed(layer / "index", scratch, "-s")
