"""Overlay workspaces: a shared read-only snapshot under each run's own upper layer, mounted by loope.

Every run here is a real ``loope`` process (it enters a mount namespace of its own, which a test
process must not), with real git, real mounts and real pytest as the gate. After each, the user's
tree and ``.git`` are compared byte for byte with how they were, and no mount is left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import make_project, run_git
from tests.helpers.attacks import shell_implementer
from tests.helpers.overlay import LOOPE, layers, loope, our_mounts, run_args
from tests.helpers.tree_snapshot import snapshot
from tests.integration.test_metric_mode import CHEAP_GATE, METRIC, scored, scoring_agent
from tests.integration.test_workspaces import make_dirty as dirty

__all__ = ["loope", "scored"]  # fixtures

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# Edits, deletes, renames, replaces a whole directory, adds one, and commits in the workspace.
RESHAPE = """
set -e
printf 'def add(a, b):\\n    return a + b\\n' > calc.py
rm untracked.txt
mkdir -p docs && mv README.md docs/README.md
rm -rf tests && mkdir tests
printf 'from calc import add\\n\\n\\ndef test_add():\\n    assert add(2, 3) == 5\\n' > tests/test_calc.py
mkdir -p pkg/sub && echo new > pkg/sub/new.txt
git add -A >/dev/null 2>&1 && git commit -qm "the agent's own commit" >/dev/null 2>&1 || true
echo "readme: $(cat docs/README.md | tr '\\n' '|')"
"""


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_a_run_that_edits_deletes_renames_and_commits_leaves_the_users_tree_and_git_byte_identical(
    project, tmp_path, loope, sandbox
):
    dirty(project)
    before = snapshot(project.path, skip=(".loope",))
    done = loope(*run_args(shell_implementer(tmp_path / "agents", RESHAPE), "--sandbox", sandbox), cwd=project.path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert snapshot(project.path, skip=(".loope",)) == before
    assert our_mounts(project.path) == []
    run = project.runs()[-1]
    record = json.loads((run / "run.json").read_text())
    assert record["workspace"]["mode"] == "overlay"
    changes = {c["path"]: c["status"] for c in record["changes"]["files"]}
    assert changes == {
        "calc.py": "modified",
        "untracked.txt": "deleted",
        "README.md": "deleted",
        "docs/README.md": "added",
        "tests/test_calc.py": "modified",
        "pkg/sub/new.txt": "added",
    }
    message = (run / "agents" / "01-implementer-exec" / "result.md").read_text()
    assert "readme: committed|and an uncommitted line|" in message  # what the user saw, uncommitted included
    assert (run / "upper" / "pkg" / "sub" / "new.txt").read_text() == "new\n"  # the run's own layer holds it
    assert "debug.log" not in (run / "changes.diff").read_text()
    shown = loope("show", run.name, "--diff", cwd=project.path)  # the mount is gone: the record still is
    assert shown.returncode == 0
    assert "+    return a + b" in shown.stdout


# Directories of the snapshot renamed with git mv and mv, then renamed again a step later.
RENAMES = """
set -e
if [ "$LOOPE_ITERATION" = 1 ]; then
  move pkg lib
  mv docs manual
  echo changed > lib/sub/b.py
  exit 0
fi
mkdir nest && move lib/sub nest/sub2
move lib lib2
printf 'def add(a, b):\\n    return a + b\\n' > calc.py
"""


# rename(2) itself, which fails with EXDEV where overlay cannot rename a lower directory (mv would copy);
# git mv where git may write its index (without the sandbox).
RENAME = f"{sys.executable} -c 'import os, sys; os.rename(*sys.argv[1:])' \"$@\""


@pytest.mark.parametrize(("sandbox", "move"), [("on", RENAME), ("off", 'git mv "$@"')])
def test_directories_of_the_snapshot_renamed_twice_are_the_runs_changes(project, tmp_path, loope, sandbox, move):
    project.write("pkg/a.py", "A = 1\n")
    project.write("pkg/sub/b.py", "B = 1\n")
    project.write("docs/README.md", "read me\n")
    project.commit("a package and docs")
    before = snapshot(project.path, skip=(".loope",))
    script = f"move() {{ {move}; }}\n{RENAMES}"
    args = run_args(shell_implementer(tmp_path / "agents", script), "--sandbox", sandbox, "--max-iters", "2")
    done = loope(*args, cwd=project.path)

    assert done.returncode == 0, done.stdout + done.stderr
    assert snapshot(project.path, skip=(".loope",)) == before
    run = project.runs()[-1]
    record = json.loads((run / "run.json").read_text())
    assert (record["iterations"], record["status"]) == (2, "converged")
    changes = {c["path"]: c["status"] for c in record["changes"]["files"]}
    assert changes == {
        "calc.py": "modified",
        "pkg/a.py": "deleted",
        "pkg/sub/b.py": "deleted",
        "docs/README.md": "deleted",
        "manual/README.md": "added",
        "lib2/a.py": "added",
        "nest/sub2/b.py": "added",
    }
    applied = loope("apply", run.name, "--delete", cwd=project.path)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert (project.read("lib2/a.py"), project.read("nest/sub2/b.py")) == ("A = 1\n", "changed\n")
    assert project.read("manual/README.md") == "read me\n"
    assert not (project.path / "pkg").exists()
    assert not (project.path / "docs").exists()


def test_runs_from_one_state_share_its_snapshot_which_no_run_alters_and_gc_removes_it_once_unused(
    project, tmp_path, loope
):
    dirty(project)
    agent = shell_implementer(tmp_path / "agents", RESHAPE)
    assert loope(*run_args(agent, "--max-iters", "1"), cwd=project.path).returncode == 0
    made = sorted(p.name for p in layers(project).iterdir())
    assert len(made) == 2  # the committed tree, and the thin layer of the user's uncommitted files

    def pictures() -> dict[str, tuple[dict[str, str], bytes]]:  # beside them, what runs keep (test_overlay_kept.py)
        return {n: (snapshot(layers(project) / n / "tree"), (layers(project) / n / "index").read_bytes()) for n in made}

    before = pictures()
    assert loope(*run_args(agent, "--max-iters", "1"), cwd=project.path).returncode == 0
    assert sorted(p.name for p in layers(project).iterdir()) == made
    assert pictures() == before
    project.write("untracked.txt", "changed by the user since\n")
    assert loope(*run_args(agent, "--max-iters", "1"), cwd=project.path).returncode == 0
    now = sorted(p.name for p in layers(project).iterdir())
    assert len(now) == 3  # a new thin layer over the same committed tree
    assert set(made) < set(now)
    first, second, third = (r.name for r in project.runs())
    removed = loope("rm", first, cwd=project.path)
    assert removed.returncode == 0
    assert "snapshot" not in removed.stdout  # the second run still stands on it
    removed = loope("rm", second, third, cwd=project.path)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.count("snapshot ") == 3
    assert not any(layers(project).iterdir())


def test_continue_mounts_the_run_again_over_its_upper_layer(project, tmp_path, loope):
    # First iteration: a file and no fix (the gate fails); then, seeing that file again, the fix.
    steps = "if test -f first.txt; then printf 'def add(a, b):\\n    return a + b\\n' > calc.py; "
    steps += "else printf 'x = 1\\n' > first.txt; fi\necho step\n"
    first = loope(*run_args(shell_implementer(tmp_path / "a", steps), "--max-iters", "1"), cwd=project.path)
    assert first.returncode == 1, first.stdout + first.stderr
    run = project.runs()[-1]
    more = loope("continue", run.name, "--max-iters", "1", cwd=project.path)
    assert more.returncode == 0, more.stdout + more.stderr
    record = json.loads((run / "run.json").read_text())
    assert (record["iterations"], record["status"]) == (2, "converged")
    assert {c["path"] for c in record["changes"]["files"]} == {"calc.py", "first.txt"}
    assert our_mounts(project.path) == []
    applied = loope("apply", run.name, cwd=project.path)
    assert applied.returncode == 0, applied.stderr
    assert (project.read("first.txt"), project.read("calc.py")) == ("x = 1\n", "def add(a, b):\n    return a + b\n")


def test_a_killed_runner_leaves_no_mount_and_resume_takes_over(project, tmp_path, loope):
    # The first runner's agent edits, then hangs; the resumed one's agent fixes.
    steps = 'if [ -n "$HANG" ]; then echo edited > edited.txt; sleep 300; fi\n'
    steps += "printf 'def add(a, b):\\n    return a + b\\n' > calc.py\n"
    agent = shell_implementer(tmp_path / "agents", steps)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "HANG": "1"}
    runner = subprocess.Popen(
        [*LOOPE, *run_args(agent, "--max-iters", "1", "--sandbox", "on")], cwd=project.path, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    edited = project.path / ".loope" / "runs" / "0001-fix-add" / "upper" / "edited.txt"
    for _ in range(1200):
        if edited.exists() or runner.poll() is not None:
            break
        time.sleep(0.05)
    assert edited.exists()
    status = json.loads(loope("status", "0001", "--json", cwd=project.path).stdout)
    assert status["state_problem"] is None  # read from the upper layer: the merged view is the runner's alone
    assert status["frontmatter"]["loop_id"] == "0001-fix-add"
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    assert our_mounts(project.path) == []
    run = project.runs()[-1]
    resumed = loope("resume", run.name, cwd=project.path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "converged"
    assert {c["path"] for c in record["changes"]["files"]} == {"calc.py"}  # the cut-short change was discarded
    assert our_mounts(project.path) == []


def test_where_the_overlay_cannot_work_the_run_says_so_in_one_line_and_leaves_nothing(project, tmp_path, loope):
    # A sandbox with no capabilities and no user namespaces: no mount namespace can be made in it.
    jail = ("bwrap", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-user", "--disable-userns",
            "--cap-drop", "ALL", "--")  # fmt: skip
    before = snapshot(project.path)
    done = loope(*run_args(shell_implementer(tmp_path / "a", "echo hi\n")), cwd=project.path, prefix=jail)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "--workspace overlay does not work here" in line
    assert "--workspace worktree" in line
    assert project.runs() == []
    assert {k: v for k, v in snapshot(project.path).items() if not k.startswith(".loope")} == {
        k: v for k, v in before.items() if not k.startswith(".loope")
    }
    cache = tmp_path / "cache" / "loope" / "overlay-probe.json"
    assert [entry["works"] for entry in json.loads(cache.read_text()).values()] == [False]
    # auto there: the usual worktree, and one line that says why.
    auto = [*run_args(shell_implementer(tmp_path / "b", "echo hi\n"), "--max-iters", "1"), "--workspace", "auto"]
    fallen = loope(*auto, cwd=project.path, prefix=jail)
    assert fallen.returncode == 1, fallen.stdout + fallen.stderr  # the gate fails: calc.py is not fixed
    assert project.run_json()["workspace"]["mode"] == "worktree"
    started = json.loads((project.runs()[-1] / "events.jsonl").read_text().splitlines()[0])
    (note,) = [w for w in started["warnings"] if "overlay" in w]
    assert note.startswith("no overlay workspace here (")
    assert note.endswith("); using a worktree")
    assert note in fallen.stdout
    # auto outside the jail (another probe, cached apart): an overlay.
    assert loope(*auto, cwd=project.path).returncode == 1
    assert project.run_json()["workspace"]["mode"] == "overlay"
    assert sorted(entry["works"] for entry in json.loads(cache.read_text()).values()) == [False, True]
    # doctor says the same, from the cached answers (no third probe), and where they are.
    jailed, free = (loope("doctor", cwd=project.path, prefix=p).stdout for p in (jail, ()))
    (said,) = [line for line in jailed.splitlines() if "overlay:" in line]
    reason = note.removeprefix("no overlay workspace here (").removesuffix("); using a worktree")
    expected = f"runs use a worktree here: no overlay ({reason}) (probe cached in {cache})"
    assert said == f"ok  overlay: {expected}"
    assert f"ok  overlay: runs use an overlay here (probe cached in {cache})" in free.splitlines()
    assert len(json.loads(cache.read_text())) == 2
    project.write("loope.toml", 'workspace = "overlay"\n')
    (fix,) = [line for line in loope("doctor", cwd=project.path, prefix=jail).stdout.splitlines() if "overlay:" in line]
    assert fix.startswith("FIX overlay: runs use a worktree here: no overlay (")


FORKS = """
import json, sys
from pathlib import Path
from loope.enums import WorkspaceMode
from loope.workspace import overlay
from loope.workspace.git import Git
from loope.workspace.workspace import Workspace

project, run_dir = Path(sys.argv[1]), Path(sys.argv[2])
ws = Workspace.create(project, run_dir, "0001-forks", WorkspaceMode.OVERLAY, None)
ws.start_watching()
(ws.path / "calc.py").write_text("kept\\n")
(ws.path / "tests" / "test_calc.py").unlink()
assert {c.path for c in ws.commit("kept state")} == {"calc.py", "tests/test_calc.py"}
admin = Git(ws.git.work_tree, ws.git_dir)
seen = {}
for i in (1, 2, 3, 4):
    tree, _ = overlay.fork(run_dir, run_dir / "candidates" / f"c{i}", admin, ws.head)
    (tree / "calc.py").write_text(f"candidate {i}\\n")
    status = Git(tree).run("status", "--porcelain").text
    seen[i] = {"status": status, "gone": (tree / "tests" / "test_calc.py").exists()}
seen["run"] = (ws.path / "calc.py").read_text()
for i in (1, 2, 3, 4):
    overlay.unmount(run_dir / "candidates" / f"c{i}")
ws.stop_watching()
print(json.dumps(seen))
"""


def test_four_candidates_fork_the_kept_state_over_one_snapshot(project, tmp_path):
    run_dir = project.path / ".loope" / "runs" / "0001-forks"
    run_dir.mkdir(parents=True)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    argv = [sys.executable, "-c", FORKS, str(project.path), str(run_dir)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    for i in ("1", "2", "3", "4"):
        assert seen[i] == {"status": " M calc.py\n", "gone": False}  # the kept state, and its own change on top
    assert seen["run"] == "kept\n"
    assert len(list(layers(project).iterdir())) == 1
    assert (run_dir / "candidates" / "c3" / "upper" / "calc.py").read_text() == "candidate 3\n"
    assert our_mounts(project.path) == []


def test_metric_mode_keeps_improvements_and_reverts_the_rest_in_the_merged_view(scored, agent_script, loope):
    agent = scoring_agent(agent_script, {1: 5, 2: 3, 3: 9})
    args = ["run", "lower the score", "--implementer", agent, "--no-review", "--verify-cmd", CHEAP_GATE,
            "--metric-cmd", METRIC, "--direction", "lower", "--editable", "solution.py", "--max-iters", "3",
            "--workspace", "overlay", "--plain"]  # fmt: skip
    done = loope(*args, cwd=scored.path)
    assert done.returncode == 0, done.stdout + done.stderr
    record = scored.run_json()
    assert (record["best"]["score"], record["best"]["iteration"]) == (3, 2)
    run = scored.runs()[-1]
    assert (run / "upper" / "solution.py").read_text() == "SCORE = 3\n"  # the reverted attempt left the layer
    shown = loope("show", run.name, "--diff", cwd=scored.path)
    assert "+SCORE = 3" in shown.stdout
    assert our_mounts(scored.path) == []


def test_a_run_in_a_subdirectory_continues_and_applies_only_its_part(tmp_path, loope):
    repo = make_project(tmp_path / "repo")
    repo.write("pkg/calc.py", "def add(a, b):\n    return a - b\n")
    repo.write("pkg/tests/test_pkg_calc.py", "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    repo.commit("pkg")
    steps = "if test -f first.txt; then printf 'def add(a, b):\\n    return a + b\\n' > calc.py; echo j > again.pyc; "
    steps += "else echo once > first.txt; echo junk > ignored.pyc; fi\necho step\n"
    repo.write(".gitignore", "__pycache__/\n.pytest_cache/\n*.pyc\n")
    repo.commit("ignore pyc")
    args = [*run_args(shell_implementer(tmp_path / "a", steps), "--max-iters", "1"), "--workdir", "pkg"]
    assert loope(*args, cwd=repo.path).returncode == 1  # the first pass leaves the gate failing
    more = loope("continue", "0001", "--max-iters", "1", "--workdir", "pkg", cwd=repo.path)
    assert more.returncode == 0, more.stdout + more.stderr
    record = json.loads((repo.path / "pkg" / ".loope" / "runs" / "0001-fix-add" / "run.json").read_text())
    assert {c["path"] for c in record["changes"]["files"]} == {"pkg/calc.py", "pkg/first.txt"}  # no ignored file
    assert loope("apply", "0001", "--workdir", "pkg", cwd=repo.path).returncode == 0
    assert repo.read("pkg/calc.py") == "def add(a, b):\n    return a + b\n"
    assert repo.read("calc.py") == "def add(a, b):\n    return a - b\n"  # the top's calc.py is not the run's


def test_the_runs_commits_carry_the_identity_of_the_users_repository_however_it_is_spelled(project, tmp_path, loope):
    name, email = 'Ada "the" Lovelace; # \\ first', "ada@example.com"
    project.git("config", "user.name", name)  # the repository's own config, which the run's git does not read
    project.git("config", "user.email", email)
    fix = "printf 'def add(a, b):\\n    return a + b\\n' > calc.py\n"
    done = loope(*run_args(shell_implementer(tmp_path / "agents", fix)), cwd=project.path)

    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((project.runs()[-1] / "run.json").read_text())
    shown = run_git(record, "log", "-1", "--format=%an|%ae|%cn", record["workspace"]["head"])
    assert shown.strip() == f"{name}|{email}|{name}"
