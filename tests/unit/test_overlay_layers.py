"""The overlay's parts that need no mount: the snapshot store (real git) and the upper layer's change feed.

An upper layer is a plain directory whose entries say what changed: files, whiteouts (0/0
character devices) for deletions, and opaque directories (an xattr) for replaced ones. The feed
is tested on such a directory made by hand; mounting is tested in tests/integration/test_overlay.py.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from loope.workspace.changes import ChangeTracker
from loope.workspace.git import Git
from loope.workspace.loopedir import ensure_loope_dir
from loope.workspace.snapshots import EMPTY_TREE, Store
from loope.workspace.upper import UpperFeed
from tests.conftest import make_project
from tests.helpers.tree_snapshot import snapshot

PREFIX = "user.overlay."  # as in a user namespace; trusted.* would need root


def whiteout(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(path, stat.S_IFCHR, 0)


def test_the_feed_names_exactly_the_entries_that_appeared_changed_or_went(tmp_path):
    upper = tmp_path / "upper"
    (upper / "kept").mkdir(parents=True)
    (upper / "kept" / "old.txt").write_text("there before\n")
    (upper / ".git").write_text("gitdir: elsewhere\n")
    feed = UpperFeed(upper, PREFIX, tmp_path / "merged")
    assert feed.drain() == set()
    (upper / "kept" / "new.txt").write_text("new\n")
    (upper / "made" / "deep").mkdir(parents=True)
    (upper / "made" / "deep" / "f.txt").write_text("f\n")
    whiteout(upper / "gone.txt")
    (upper / "replaced").mkdir()
    os.setxattr(upper / "replaced", f"{PREFIX}opaque", b"y")
    (upper / "replaced" / "only.txt").write_text("only\n")
    assert feed.drain() == {"kept/new.txt", "made/deep/f.txt", "gone.txt", "replaced/", "replaced/only.txt"}
    assert feed.drain() == set()
    (upper / "kept" / "old.txt").write_text("changed, same size\n"[:13])
    os.utime(upper / "kept" / "old.txt", ns=(1, 1))
    (upper / "made" / "deep" / "f.txt").unlink()  # a file the run made, then deleted: gone from the layer
    (upper / ".git").write_text("gitdir: somewhere else\n")
    assert feed.drain() == {"kept/old.txt", "made/deep/f.txt"}


def test_a_renamed_directory_reports_every_file_it_holds_once(tmp_path):
    """Renamed, a lower directory is a redirect in the layer: its files are below, shown in the merged view."""
    upper, merged = tmp_path / "upper", tmp_path / "merged"
    upper.mkdir()
    feed = UpperFeed(upper, PREFIX, merged)
    (upper / "lib").mkdir()
    os.setxattr(upper / "lib", f"{PREFIX}redirect", b"pkg")
    whiteout(upper / "pkg")
    for rel in ("lib/a.py", "lib/sub/b.py"):  # what the overlay shows there, though the layer holds none of it
        (merged / rel).parent.mkdir(parents=True, exist_ok=True)
        (merged / rel).write_text("x\n")
    os.symlink("a.py", merged / "lib" / "link")
    assert feed.drain() == {"pkg", "lib/a.py", "lib/sub/b.py", "lib/link"}
    (upper / "lib" / "new.txt").write_text("new\n")  # a file made in it later: only that file, no second walk
    (merged / "lib" / "new.txt").write_text("new\n")
    assert feed.drain() == {"lib/new.txt"}


def test_an_opaque_directory_reports_the_tracked_files_it_hid(tmp_path):
    proj = make_project(tmp_path / "proj")
    proj.write("pkg/a.py", "a\n")
    proj.write("pkg/sub/b.py", "b\n")
    proj.commit("pkg")

    class Seen:
        def __init__(self, paths: set[str]) -> None:
            self.paths = paths

        def drain(self) -> set[str] | None:
            return self.paths

        def close(self) -> None:
            pass

    tracker = ChangeTracker(Git(proj.path), None)
    (proj.path / "pkg" / "a.py").unlink()
    (proj.path / "pkg" / "sub" / "b.py").unlink()
    (proj.path / "pkg" / "sub").rmdir()
    (proj.path / "pkg" / "c.py").write_text("c\n")
    tracker.feed = Seen({"pkg/", "pkg/c.py"})
    assert tracker.changed_paths() == (["pkg/a.py", "pkg/c.py", "pkg/sub/b.py"], [])


def test_the_state_is_read_without_writing_to_the_users_repository_and_layers_hold_it(tmp_path):
    proj = make_project(tmp_path / "proj")
    proj.write("bin/run.sh", "#!/bin/sh\necho hi\n").chmod(0o755)
    os.symlink("calc.py", proj.path / "link.py")
    proj.write("old/gone.txt", "to be deleted\n")
    proj.commit("more")
    proj.write("calc.py", "uncommitted\n")
    proj.write("untracked/new.txt", "untracked\n")
    (proj.path / "old" / "gone.txt").unlink()
    proj.write("ignored.log", "x\n")
    proj.write(".gitignore", "__pycache__/\n.pytest_cache/\n*.log\n.loope/\n")
    before = snapshot(proj.path, skip=(".loope",))
    store = Store(proj.path / ".loope" / "snapshots")
    state = store.state(proj.path)
    index = store.snapshot(state)
    assert snapshot(proj.path, skip=(".loope",)) == before
    thin, base = (store.layer(name) for name in state.layers)
    user = Git(proj.path)
    committed = set(user.out("ls-tree", "-r", "--name-only", "HEAD").splitlines())
    assert {k for k, v in snapshot(base).items() if not v.startswith("dir")} == committed
    assert os.access(base / "bin" / "run.sh", os.X_OK)
    assert os.readlink(base / "link.py") == "calc.py"
    assert (base / "calc.py").read_bytes() == user.run("show", "HEAD:calc.py").stdout
    listing = {os.path.relpath(os.path.join(d, n), thin) for d, dirs, files in os.walk(thin) for n in dirs + files}
    assert listing == {"calc.py", "untracked", "untracked/new.txt", "old", "old/gone.txt", ".gitignore"}
    assert (thin / "calc.py").read_text() == "uncommitted\n"
    assert stat.S_ISCHR(os.lstat(thin / "old" / "gone.txt").st_mode)
    staged = Git(proj.path, store.git_dir, env={"GIT_INDEX_FILE": str(index)}).out("write-tree")
    assert staged == state.tree
    again = store.state(proj.path)
    assert again == state
    assert store.snapshot(again) == index
    assert (state.head, state.head_tree) == (user.out("rev-parse", "HEAD"), user.out("rev-parse", "HEAD^{tree}"))


def test_a_repository_with_no_commit_yet_has_a_state_over_the_empty_tree(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    Git(proj).run("init", "-q")
    (proj / "first.txt").write_text("first\n")
    store = Store(ensure_loope_dir(proj) / "snapshots")
    state = store.state(proj)
    assert (state.head, state.head_tree) == (None, EMPTY_TREE)
    listed = Git(proj, store.git_dir).out("ls-tree", "--name-only", state.tree).splitlines()
    assert listed == ["first.txt"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to become another user")
def test_an_unprivileged_user_mounts_the_overlay_in_a_user_namespace_of_their_own():
    # The probe's own check (mount, copy-up, whiteout, opaque directory in user.* xattrs), run as nobody.
    root = Path(tempfile.mkdtemp(prefix="loope-userns-"))
    try:
        root.chmod(0o777)
        child = "import sys; from loope.workspace.overlayfs import selftest; selftest(sys.argv[1])"
        argv = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable, "-c", child]
        done = subprocess.run([*argv, str(root)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "overlay ok"
        assert os.stat(root / "upper" / "g").st_uid == 65534  # the user stays themself in their namespace
    finally:
        shutil.rmtree(root, ignore_errors=True)
