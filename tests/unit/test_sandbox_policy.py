"""The sandbox's policy and command line, and the nets that end a step's processes (real processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loope.sandbox import StepBox, bwrap, choose, reap, tmpdirs
from loope.sandbox.layout import Layout, named_paths


def mounts(argv: list[str]) -> list[tuple[str, str]]:
    """(flag, path) of every bind after the fixed base, in order."""
    found = []
    for i, arg in enumerate(argv):
        if arg in ("--bind", "--ro-bind") and argv[i + 1] != "/" and argv[i + 2] != "/tmp":
            found.append((arg, argv[i + 1]))
    return found


def layout(tmp_path: Path, *, in_place: bool = False, tracked=(), patterns=()) -> Layout:
    project = tmp_path / "proj"
    run_dir = project / ".loope" / "runs" / "0001-x"
    tree = project if in_place else run_dir / "workspace"
    (tree / ".loope").mkdir(parents=True, exist_ok=True)
    (tree / ".loope" / "state.md").write_text("---\n")
    (tree / ".git").write_text("gitdir: somewhere\n")
    run_dir.mkdir(parents=True, exist_ok=True)
    for rel in tracked:
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text("x\n")
    return Layout.of(
        work_tree=tree,
        workspace=tree,
        run_dir=run_dir,
        project=project,
        state_file=tree / ".loope" / "state.md",
        tracked=tracked,
        protected_patterns=patterns,
    )


def test_a_writer_gets_the_work_tree_but_not_its_git_file_loopes_files_or_protected_tests(tmp_path):
    lay = layout(tmp_path, tracked=["calc.py", "tests/test_calc.py"], patterns=["tests/**"])
    tree = lay.work_tree
    policy = lay.policy(tmp=tmp_path / "tmp", write=True)

    binds = mounts(bwrap.command("bwrap", policy, ["true"]))

    assert ("--bind", str(tree)) in binds
    for protected in (tree / ".git", tree / ".loope" / ".gitignore", tree / "tests" / "test_calc.py"):
        if protected.exists():
            assert binds.index(("--ro-bind", str(protected))) > binds.index(("--bind", str(tree)))
    assert ("--ro-bind", str(tree / "calc.py")) not in binds
    assert ("--ro-bind", str(lay.project)) in binds  # seen (even under /tmp), never written
    assert ("--bind", str(tree / ".loope" / "state.md")) not in binds  # its directory is writable already


def test_a_reader_sees_the_work_tree_read_only(tmp_path):
    lay = layout(tmp_path)
    binds = mounts(bwrap.command("bwrap", lay.policy(tmp=tmp_path, write=False), ["true"]))

    assert ("--ro-bind", str(lay.work_tree)) in binds
    assert all(flag == "--ro-bind" for flag, _ in binds)


def test_in_place_the_projects_records_stay_read_only_and_only_the_state_file_is_writable(tmp_path):
    lay = layout(tmp_path, in_place=True)
    (lay.workspace / ".loope" / "runs").mkdir(exist_ok=True)
    lay = Layout.of(
        work_tree=lay.work_tree,
        workspace=lay.workspace,
        run_dir=lay.run_dir,
        project=lay.project,
        state_file=lay.state_file,
        tracked=[],
        protected_patterns=[],
    )
    binds = mounts(bwrap.command("bwrap", lay.policy(tmp=tmp_path, write=True), ["true"]))

    loope_dir = lay.workspace / ".loope"
    assert binds.index(("--ro-bind", str(loope_dir))) > binds.index(("--bind", str(lay.work_tree)))
    assert binds.index(("--bind", str(lay.state_file))) > binds.index(("--ro-bind", str(loope_dir)))


def test_paths_through_a_symlink_or_missing_are_never_bound(tmp_path):
    target = tmp_path / "users-repo"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    policy = bwrap.Policy(
        cwd=tmp_path,
        tmp=tmp_path,
        writable=(tmp_path / "link", tmp_path / "link" / "x", tmp_path / "missing"),
    )

    assert mounts(bwrap.command("bwrap", policy, ["true"])) == []


def test_network_off_unshares_the_network(tmp_path):
    on = bwrap.command("bwrap", bwrap.Policy(cwd=tmp_path, tmp=tmp_path), ["true"])
    off = bwrap.command("bwrap", bwrap.Policy(cwd=tmp_path, tmp=tmp_path, network=False), ["true"])

    assert "--unshare-net" not in on
    assert "--unshare-net" in off
    assert {"--unshare-pid", "--die-with-parent"} <= set(on)
    assert on[on.index("--cap-drop") + 1] == "ALL"


def test_named_paths_are_the_existing_files_a_command_names(tmp_path):
    (tmp_path / "agent.py").write_text("")
    (tmp_path / "tools").mkdir()

    found = named_paths(f"python {tmp_path}/agent.py --out=./tools -q ./nothing", tmp_path)

    assert found == [tmp_path / "agent.py", tmp_path / "tools"]


def test_named_paths_include_those_of_a_script_given_to_a_shell(tmp_path):
    (tmp_path / "agent.py").write_text("")

    found = named_paths(f"sh -c 'echo hi > {tmp_path}/new; exec python {tmp_path}/agent.py'", tmp_path)

    assert found == [tmp_path / "agent.py"]


def test_sandbox_off_is_off_without_a_word():
    assert choose("off").enabled is False
    assert choose("off").warning is None


# -- the nets that end a step's processes ----------------------------------------------------------

SURVIVOR = "import os, time\nos.setsid()\ntime.sleep(300)\n"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_marker_finds_a_process_that_left_its_group_and_kills_it():
    token = reap.new_token()
    env = {**os.environ, reap.TOKEN_VAR: token}
    proc = subprocess.Popen([sys.executable, "-c", SURVIVOR], env=env)  # it leaves the group itself (setsid)
    try:
        assert reap.kill_marked(token) == 1
        proc.wait(timeout=10)
        assert not alive(proc.pid)
        assert reap.kill_marked(token) == 0
    finally:
        proc.kill()
        proc.wait()


def test_a_step_cgroup_ends_a_process_that_cleared_its_environment():
    base = reap.cgroup_base()
    if base is None:
        pytest.skip("no writable cgroup v2 here: the environment marker is the only net")
    cgroup = reap.StepCgroup(base, reap.new_token())
    code = f"import os, subprocess\nsubprocess.Popen(['env', '-i', {sys.executable!r}, '-c', {SURVIVOR!r}])\n"
    try:
        subprocess.run([*cgroup.prefix(), sys.executable, "-c", code], check=True)
        members = (cgroup.path / "cgroup.procs").read_text().split()
        assert len(members) == 1  # the grandchild, with no marker to find it by
        cgroup.remove()
        time.sleep(0.05)
        assert not any(alive(int(pid)) for pid in members)
        assert not cgroup.path.exists()
    finally:
        cgroup.remove()


def test_a_box_without_bubblewrap_gives_a_private_tmpdir_and_removes_it(tmp_path):
    box = StepBox(None, None, write=True)
    argv, env = box.enter(("true",), {"PATH": os.environ["PATH"]})
    tmp = Path(env["TMPDIR"])

    assert tmp.is_dir()
    assert tmp != Path("/tmp")
    assert env[reap.TOKEN_VAR] == box.token
    assert argv[-1] == "true"
    box.close()
    tmpdirs.wait()  # removed on the remover's thread (sandbox/tmpdirs.py)
    assert not tmp.exists()


def test_an_overlay_runs_steps_see_nothing_of_the_users_tree_but_the_objects_its_git_borrows(tmp_path, monkeypatch):
    base = layout(tmp_path)
    objects = base.project / ".git" / "objects"
    objects.mkdir(parents=True)
    lay = Layout.of(
        work_tree=base.work_tree, workspace=base.workspace, run_dir=base.run_dir, project=base.project,
        state_file=base.state_file, tracked=[], protected_patterns=[], hide_project_but=[objects],
    )  # fmt: skip
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    argv = bwrap.command("bwrap", lay.policy(tmp=tmp_path / "t", write=True), ["true"])
    hidden = argv.index("--tmpfs", argv.index("/tmp"))
    assert argv[hidden + 1] == str(base.project)
    shown = mounts(argv)
    assert ("--ro-bind", str(objects)) in shown
    assert ("--bind", str(base.work_tree)) in shown
    assert all(argv.index(path) > hidden for _flag, path in shown if path.startswith(str(base.project)))
    assert ("--ro-bind", str(base.project)) not in shown
    monkeypatch.setenv("HOME", str(base.project / "home"))  # a tree holding HOME cannot be hidden
    (base.project / "home").mkdir()
    argv = bwrap.command("bwrap", lay.policy(tmp=tmp_path / "t", write=True), ["true"])
    assert "--tmpfs" not in argv[argv.index("/tmp") :]


def test_protected_patterns_match_as_gitignore_does_whether_joined_or_one_at_a_time():
    import pathspec

    from loope.sandbox.layout import _matching

    tracked = ["loope.toml", "pkg/loope.toml", "tests/a.py", "tests/sub/b.py", "tests/c.txt", "src/x.py",
               "src", "docs/src/y.md", "check.sh", "a/check.sh", "x", "keep/x", ".loope/state.md", "srcx"]  # fmt: skip
    for patterns in (
        ["loope.toml", ".loope/**", "tests/*.py", "src/", "/check.sh"],
        ["tests/**", "!tests/c.txt"],
        ["*.py", "!src/*.py", "src/x.py"],
        [],
    ):
        spec = pathspec.GitIgnoreSpec.from_lines(patterns)
        assert _matching("", tracked, patterns) == [p for p in tracked if spec.match_file(p)], patterns
    assert _matching("pkg", ["pkg/loope.toml", "loope.toml"], ["loope.toml"]) == ["pkg/loope.toml"]
