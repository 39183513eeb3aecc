"""kill_tree: what an agent started outside its process group dies with it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from loope.proctree import descendants, kill_tree
from tests.conftest import gone

# A parent in its own group, whose child makes a session of its own (as a shell tool does) and sleeps.
ESCAPER = """
import os, subprocess, sys, time
child = subprocess.Popen(["setsid", sys.executable, "-c", "import time; time.sleep(300)"])
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(300)
"""


def test_kill_tree_kills_a_descendant_that_left_the_group(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", ESCAPER, str(marker)], start_new_session=True)
    deadline = time.monotonic() + 30
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)
    child = int(marker.read_text())
    # setsid forks when it is a group leader; the sleeper is then the grandchild: find it below the parent.
    below = descendants(parent.pid)
    assert below, "the parent's descendants were not found"

    kill_tree(parent.pid)

    parent.wait(timeout=30)
    assert all(gone(pid) for pid in [child, *below])


def test_descendants_of_a_process_without_children_is_empty() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert descendants(proc.pid) == []
    finally:
        proc.kill()
        proc.wait()
