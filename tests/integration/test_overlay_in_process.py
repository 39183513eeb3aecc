"""Overlay workspaces made inside a long-lived process (a library caller, a test runner, a server).

The process enters its mount namespace once and mounts one workspace per run. Each snapshot
store is hidden while a workspace of this process stands on it, and shown again with the last
one, whatever other stores' workspaces stay mounted; a process that already runs threads
mounts too (as root, where a mount namespace alone is enough).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loope.workspace import overlayfs
from tests.conftest import make_project

CHILD = textwrap.dedent(
    """
    import sys, threading, time
    from pathlib import Path
    from loope.workspace import overlay, overlayfs

    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()  # a process with threads
    one, two = Path(sys.argv[1]), Path(sys.argv[2])

    def run(name, proj):
        run_dir = proj / ".loope" / "runs" / name
        run_dir.mkdir(parents=True)
        overlay.create(proj, proj, run_dir)
        return run_dir

    def hidden(proj):
        return overlayfs.is_mounted(overlay.store_of(proj).root, fstype="tmpfs")

    a, c = run("a", one), run("c", two)
    print("both mounted", hidden(one), hidden(two))
    overlay.unmount(c)  # the last on the second store, while the first one's stays
    print("c gone", hidden(one), hidden(two))
    overlay.unmount(a)
    print("a gone", hidden(one), hidden(two))
    b = run("b", one)  # the store is written again: a later run from the same state
    print("b mounted", hidden(one), hidden(two))
    overlay.unmount(b)
    print("mounted", overlayfs.mounted_overlays())
    """
)


@pytest.mark.skipif(os.geteuid() != 0, reason="a process with threads mounts only as root")
def test_each_store_is_shown_again_with_its_last_workspace_in_a_process_with_threads(tmp_path: Path) -> None:
    if not overlayfs.probe(tmp_path).works:
        pytest.skip("overlay workspaces do not work on this machine")
    one, two = make_project(tmp_path / "one"), make_project(tmp_path / "two")

    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(one.path), str(two.path)], capture_output=True, text=True, check=False
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "both mounted True True",
        "c gone True False",
        "a gone False False",
        "b mounted True False",
        "mounted []",
    ]


# A server: each call on whichever of its threads is free, the first one entering the namespace.
SERVER = textwrap.dedent(
    """
    import os, sys
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path
    from loope.workspace import overlay, overlayfs

    proj = Path(sys.argv[1])
    pool = ThreadPoolExecutor(1)

    def create(name):
        run_dir = proj / ".loope" / "runs" / name
        run_dir.mkdir(parents=True)
        overlay.create(proj, proj, run_dir)
        return run_dir

    def host_mounts():  # what the process's main thread (and the user) see: never loope's mounts
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/mountinfo") as info:
            return sum(1 for line in info if str(proj) in line)

    first = pool.submit(create, "a").result()
    pool.shutdown()
    pool = ThreadPoolExecutor(1)  # a new thread, not in the namespace the first one entered
    second = pool.submit(create, "b").result()
    print("on the host", host_mounts())
    print("seen", pool.submit(lambda: (second / "workspace" / "calc.py").is_file()).result())  # where it mounted
    pool.submit(overlay.unmount, first).result()
    pool.submit(overlay.unmount, second).result()
    print("left", pool.submit(overlayfs.mounted_overlays).result(), host_mounts())
    """
)


@pytest.mark.skipif(os.geteuid() != 0, reason="a process with threads mounts only as root")
def test_a_thread_that_mounts_after_another_entered_joins_its_namespace_not_the_users(tmp_path: Path) -> None:
    if not overlayfs.probe(tmp_path).works:
        pytest.skip("overlay workspaces do not work on this machine")
    proj = make_project(tmp_path / "proj")

    done = subprocess.run([sys.executable, "-c", SERVER, str(proj.path)], capture_output=True, text=True, check=False)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["on the host 0", "seen True", "left [] 0"]
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(proj.path) not in mounts
