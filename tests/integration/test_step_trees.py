"""Runs whose steps' trees are made from the changed files (workspace/trees.py): no step reads the whole index,
the agent's own git still sees each step's commit, and what would make git convert a file is left to git.

Each run is a real ``loope`` process with its git calls logged by a shim in front of the real git.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from loope.workspace.loopedir import workspace_tree
from tests.helpers.attacks import shell_implementer
from tests.helpers.overlay import logging_git, loope

__all__ = ["loope"]  # fixtures

# Each iteration: what the agent's git sees first, then an edit, a new file in a new directory, and (third) a
# deletion of a tracked file and of the last file of a directory.
STEPS = """echo "status: [$(git status --porcelain)] staged: [$(git diff --cached --name-only)]"
echo "# iteration $LOOPE_ITERATION" >> calc.py
mkdir -p "made/$LOOPE_ITERATION" && echo "$LOOPE_ITERATION" > "made/$LOOPE_ITERATION/new.txt"
if [ "$LOOPE_ITERATION" = 3 ]; then rm .gitignore made/1/new.txt; fi
echo done
"""


def run(loope, project, tmp_path: Path, script: str, mode: str, *, iterations: int):  # type: ignore[no-untyped-def]
    log = tmp_path / f"git-{mode}.log"
    implementer = shell_implementer(tmp_path / "agents", script)
    args = ["run", "edit", "--implementer", implementer, "--no-review", "--workspace", mode, "--keep-workspace"]
    args += ["--max-iters", str(iterations), "--stall-after", str(iterations + 1), "--plain"]
    done = loope(*args, cwd=project.path, prefix=logging_git(tmp_path / f"shim-{mode}", log, index=True))
    assert done.returncode in (0, 1), done.stdout + done.stderr
    calls = [line.split() for line in log.read_text().splitlines()]
    # The git commands given loope's own index, and its comparisons of two trees (given none).
    own = [c[1:] for c in calls if c and c[0].endswith(("/workspace.index", "/proc/self/loope-no-index"))]
    named = [" ".join(a for a in c if "=" not in a and a != "-c") for c in own]  # the command and its own flags
    return project.runs()[-1], named


def git_of(run_dir: Path, *args: str) -> str:
    record = json.loads((run_dir / "run.json").read_text())
    ws = record["workspace"]
    env = {**os.environ, "GIT_DIR": ws["git_dir"] or "", "GIT_INDEX_FILE": str(run_dir / "workspace.index")}
    if not ws["git_dir"]:
        top = workspace_tree(Path(ws["path"]))
        assert top is not None
        env["GIT_DIR"] = subprocess.run(
            ["git", "rev-parse", "--absolute-git-dir"], cwd=top, capture_output=True, text=True, check=True
        ).stdout.strip()
    return subprocess.run(["git", *args], env=env, capture_output=True, text=True, check=True).stdout.strip()


def step_lines(run_dir: Path) -> list[str]:
    return [
        next(line for line in (step / "result.md").read_text().splitlines() if line.startswith("status:"))
        for step in sorted((run_dir / "agents").iterdir())
    ]


def test_steps_make_their_trees_without_reading_the_index_and_the_agent_sees_each_commit(
    loope, project, tmp_path, workspace_mode
):
    run_dir, commands = run(loope, project, tmp_path, STEPS, workspace_mode, iterations=4)
    # The first step stages through loope's index (the tree it holds is not known yet); no later one writes a
    # tree from it: their trees come from the batch commands, started once for the run.
    assert commands.count("write-tree") <= 1, commands
    compare = "diff-tree -r --no-ext-diff --no-textconv --no-renames -z --raw --numstat -p --binary --full-index"
    # nor compares it with the last commit in a process of its own (the first step's and the run's whole diff do)
    assert sum(c.startswith(compare) for c in commands) <= 2, commands
    # Each step's commit is written by a batch command too (a worktree run's end replays them onto its branch).
    assert not [c for c in commands if c.startswith("commit-tree") and not c.endswith(" -F -")], commands
    batches = ("hash-object -w --stdin-paths", "cat-file --batch", "mktree -z --missing --batch", "diff-tree --stdin")
    batches += ("hash-object -t commit -w --no-filters --stdin-paths",)
    for batch in batches:
        assert sum(c.startswith(batch) for c in commands) == 1, commands
    # Each step began with the agent's git seeing the last commit: nothing changed, nothing staged.
    assert step_lines(run_dir) == ["status: [] staged: []"] * 4
    record = json.loads((run_dir / "run.json").read_text())
    head = record["workspace"]["head"]
    # loope's own index holds exactly the last commit (what the next step would start from).
    assert git_of(run_dir, "write-tree") == git_of(run_dir, "rev-parse", f"{head}^{{tree}}")
    files = git_of(run_dir, "ls-tree", "-r", "--name-only", head).splitlines()
    assert files == ["calc.py", "made/2/new.txt", "made/3/new.txt", "made/4/new.txt", "tests/test_calc.py"]
    assert git_of(run_dir, "show", f"{head}:calc.py").endswith("# iteration 3\n# iteration 4")


# The project holds a file committed with CRLF line endings. The agent makes git normalise line endings
# (``* text=auto``), then edits that file: git keeps a file's CRLF as long as the index has it so (its
# "safer autocrlf"), which only the index can tell. Later steps write no attributes, yet still stage as git does.
ATTRIBUTES = """if [ "$LOOPE_ITERATION" = 1 ]; then printf '* text=auto\\n' > .gitattributes; fi
printf 'line one\\r\\nline %s\\r\\n' "$LOOPE_ITERATION" > dos.txt
printf 'plain %s\\r\\n' "$LOOPE_ITERATION" > fresh.txt
echo done
"""


def test_line_endings_an_agent_asks_git_for_are_stored_as_git_stores_them(loope, project, tmp_path, workspace_mode):
    (project.path / "dos.txt").write_bytes(b"line one\r\nline zero\r\n")
    project.commit("a file with CRLF")
    run_dir, _ = run(loope, project, tmp_path, ATTRIBUTES, workspace_mode, iterations=3)
    head = json.loads((run_dir / "run.json").read_text())["workspace"]["head"]
    assert git_of(run_dir, "cat-file", "blob", f"{head}:.gitattributes") == "* text=auto"
    git_dir = git_of(run_dir, "rev-parse", "--absolute-git-dir")

    def stored(path: str) -> bytes:
        blob = ["git", "--git-dir", git_dir, "cat-file", "blob", f"{head}:{path}"]
        return subprocess.run(blob, capture_output=True, check=True).stdout

    assert stored("dos.txt") == b"line one\r\nline 3\r\n"  # CRLF in the index before: kept, as git keeps it
    assert stored("fresh.txt") == b"plain 3\n"  # a new file: normalised, as git normalises it
    assert git_of(run_dir, "write-tree") == git_of(run_dir, "rev-parse", f"{head}^{{tree}}")
