"""What the first overlay run over a snapshot keeps beside it (the tracked files, a split index), and
how later runs start from it without asking git: each run a real ``loope`` process, its git calls
logged by a shim in front of the real git."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from loope.workspace.loopedir import ensure_loope_dir
from loope.workspace.snapshots import Store
from tests.helpers.attacks import shell_implementer
from tests.helpers.overlay import logging_git, loope

__all__ = ["loope"]  # fixtures

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# What the agent's git sees before it edits, then an edit, a new file and a deletion.
EDITS = """echo "status: [$(git status --porcelain)]"
echo "# more" >> calc.py
echo new > new.txt
rm .gitignore
"""


def overlay_run(loope, project, tmp_path: Path, prefix: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    implementer = shell_implementer(tmp_path / "agents", EDITS)
    args = ["run", "edit", "--implementer", implementer, "--no-review", "--workspace", "overlay", "--max-iters", "1"]
    done = loope(*args, "--plain", cwd=project.path, prefix=prefix)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return project.runs()[-1]


def changes(run: Path) -> dict[str, str]:
    record = json.loads((run / "run.json").read_text())
    return {c["path"]: c["status"] for c in record["changes"]["files"]}


def started_as_the_first(run: Path) -> None:
    assert "status: []" in (run / "agents" / "01-implementer-exec" / "result.md").read_text()
    assert changes(run) == {"calc.py": "modified", "new.txt": "added", ".gitignore": "deleted"}


def made_earlier(project) -> Path:  # type: ignore[no-untyped-def]
    """The project's snapshot, made before the run (its index dated a minute back, as a snapshot made then is)."""
    store = Store(ensure_loope_dir(project.path) / "snapshots")
    index = store.snapshot(store.state(project.path))
    os.utime(index, (time.time() - 60, time.time() - 60))
    return index.parent


def test_a_later_run_over_the_same_snapshot_starts_from_what_the_first_kept(project, tmp_path, loope):
    layer = made_earlier(project)
    first = overlay_run(loope, project, tmp_path)
    started_as_the_first(first)
    kept = sorted(p.name for p in layer.iterdir() if p.name not in ("tree", "index"))
    assert kept[1:] == ["split-index", "tracked"]
    assert kept[0].startswith("sharedindex.")
    assert (layer / "tracked").read_bytes().split(b"\0")[:-1] == [b".gitignore", b"calc.py", b"tests/test_calc.py"]

    log = tmp_path / "git.log"
    later = overlay_run(loope, project, tmp_path, logging_git(tmp_path / "shim", log))
    started_as_the_first(later)
    calls = log.read_text().splitlines()
    assert not [c for c in calls if "ls-files" in c or "--split-index" in c], calls
    assert any("write-tree" in c for c in calls)  # the shim saw loope's git at work
    # The run's repository starts with its reflogs, so loope moves HEAD to its first commit itself, as git logs it.
    assert not [c for c in calls if "update-ref" in c], calls
    head = json.loads((later / "run.json").read_text())["workspace"]["head"]
    for log in ("HEAD", "refs/heads/main"):
        (line,) = (later / "shadow.git" / "logs" / log).read_text().splitlines()
        assert line.split()[1] == head


@pytest.mark.parametrize(
    "damage",
    [
        lambda layer: (layer / "split-index").write_bytes(b"sharedindex.0000\nDIRC and nothing else"),
        lambda layer: [p.unlink() for p in layer.glob("sharedindex.*")],
        lambda layer: (layer / "split-index").write_bytes(b"../../../../etc/passwd\nDIRC"),
        lambda layer: (layer / "tracked").write_bytes(b"calc.py\0"),
    ],
    ids=["shared part missing", "shared file gone", "a name outside", "a short list"],
)
def test_a_damaged_kept_answer_is_asked_of_git_again(project, tmp_path, loope, damage):
    layer = made_earlier(project)
    overlay_run(loope, project, tmp_path)
    damage(layer)
    log = tmp_path / "git.log"
    later = overlay_run(loope, project, tmp_path, logging_git(tmp_path / "shim", log))
    started_as_the_first(later)
    calls = log.read_text().splitlines()
    assert any("ls-files" in c or "--split-index" in c for c in calls), calls


def test_a_split_made_in_the_second_its_snapshot_was_is_not_kept(project, tmp_path, loope):
    store = Store(ensure_loope_dir(project.path) / "snapshots")
    index = store.snapshot(store.state(project.path))
    os.utime(index, (time.time() + 60, time.time() + 60))  # as late as any split this run makes
    started_as_the_first(overlay_run(loope, project, tmp_path))
    assert (index.parent / "tracked").exists()  # the list of files holds whenever it was made
    assert not (index.parent / "split-index").exists()
    log = tmp_path / "git.log"
    started_as_the_first(overlay_run(loope, project, tmp_path, logging_git(tmp_path / "shim", log)))
    calls = log.read_text().splitlines()
    assert [c for c in calls if "--split-index" in c], calls  # the next run splits its index again
    assert not [c for c in calls if "ls-files" in c], calls  # but takes the list of its files as kept
