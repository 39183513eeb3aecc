"""loope's own index stays small and true: split, folded back when it grows, never read to compare trees."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from loope.workspace.git import Git
from loope.workspace.split_index import SplitIndex
from tests.conftest import Project, in_workspace, reporting_to, run_file, run_git

BULK = 600


def bulky(project: Project) -> list[Path]:
    """``BULK`` small committed files in ``project`` (enough that their entries weigh on an index)."""
    for i in range(BULK):
        project.write(f"bulk/d{i // 100}/f{i}.txt", f"file {i}\n")
    project.commit("bulk")
    return sorted((project.path / "bulk").rglob("*.txt"))


def racy(files: list[Path]) -> int:
    """Give ``files`` a modification time in the next second: an index written before then holds them racily clean."""
    future = int(time.time()) + 1
    for path in files:
        os.utime(path, (future, future))
    return future


def test_a_split_index_swollen_by_racily_clean_entries_is_folded_back(project):
    files = bulky(project)
    index = project.path.parent / "own.index"
    shutil.copyfile(project.path / ".git" / "index", index)
    own = Git(project.path).with_env(GIT_INDEX_FILE=str(index))
    future = racy(files)
    own.run("update-index", "-q", "--really-refresh", check=False)  # written now: every entry is racy, smudged
    split = SplitIndex.make(own, BULK)
    entries = own.out("ls-files", "-s")
    assert index.stat().st_size > split.limit  # each smudged entry sits in the own part, read by every step
    split.compact(own, index)
    assert index.stat().st_size > split.limit  # within the second of the split: not yet (they are still racy)
    while time.time() < future + 1:
        time.sleep(0.05)
    split.compact(own, index)
    assert index.stat().st_size <= split.limit
    assert own.out("ls-files", "-s") == entries  # the same objects and modes: only stat data was refreshed
    assert own.out("diff-files", "--name-only") == ""  # and it is true: nothing on disk differs from it


def test_comparing_trees_reads_no_index(project):
    project.write("calc.py", "changed\n")
    project.commit("second")
    junk = project.path.parent / "junk.index"
    junk.write_bytes(b"not an index at all")
    repo = Git(project.path).with_env(GIT_INDEX_FILE=str(junk))
    comparison = repo.compare("HEAD~1", "HEAD")
    assert [c.path for c in comparison.changes] == ["calc.py"]
    assert b"+changed" in comparison.patch
    assert list(repo.tree_changes("HEAD~1", "HEAD")) == ["calc.py"]


# Iteration 1 makes every bulk file racily clean in loope's index; iteration 2 waits for that to end and
# commits (loope folds its index back then); iteration 3 reports what the agent's own git sees.
AGENT = """
import subprocess, time
n = int(os.environ["LOOPE_ITERATION"])
if n == 1:
    future = int(time.time()) + 1
    for path in pathlib.Path("bulk").rglob("*.txt"):
        os.utime(path, (future, future))
    pathlib.Path("wait.txt").write_text(str(future + 1))
elif n == 2:
    while time.time() < int(pathlib.Path("wait.txt").read_text()):
        time.sleep(0.05)
    pathlib.Path("bulk/d0/f0.txt").write_text("changed\\n")
else:
    status = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True).stdout
    pathlib.Path({out!r}).write_text(json.dumps(status))
    pathlib.Path("bulk/d0/f1.txt").unlink()
print("done")
"""


def test_the_agents_git_sees_a_clean_tree_after_loope_folds_its_index_back(
    project, agent_script, cli, tmp_path, workspace_mode
):
    bulky(project)
    out = tmp_path / "report" / "status.json"
    out.parent.mkdir()
    implementer = agent_script(AGENT.format(out=str(out)))
    done = reporting_to(in_workspace(cli, workspace_mode), out.parent)(
        "run", "touch the bulk", "--implementer", implementer, "--no-review", "--max-iters", "3",
        "--stall-after", "9", cwd=project.path,
    )  # fmt: skip
    assert done.exit_code == 1, done.out + done.err  # max_iters
    assert json.loads(out.read_text()) == ""  # loope's commits left the agent's view of the index clean
    run_dir = project.runs()[-1]
    run = json.loads((run_dir / "run.json").read_text())
    assert (run_dir / "workspace.index").stat().st_size <= 16 * 1024  # folded back: a few entries of its own
    assert run_file(run, "bulk/d0/f0.txt") == "changed\n"
    listed = run_git(run, "ls-tree", "-r", "--name-only", run["workspace"]["head"], "bulk").split()
    assert "bulk/d0/f1.txt" not in listed
    assert len(listed) == BULK - 1
