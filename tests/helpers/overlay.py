"""Running overlay workspaces in tests: each run a ``loope`` process of its own (it enters a mount
namespace, which the test process must not), with the probe's cache in the test's directory."""

from __future__ import annotations

import os
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


def run_args(implementer: str, *extra: str) -> list[str]:
    return ["run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE,
            "--workspace", "overlay", "--plain", *extra]  # fmt: skip


def our_mounts(path: Path) -> list[str]:
    """Mounts under ``path`` that this (the user's) namespace sees."""
    with open("/proc/self/mountinfo", encoding="utf-8") as info:
        return [line for line in info if str(path) in line]


def layers(project: Project) -> Path:
    return project.path / ".loope" / "snapshots" / "layers"
