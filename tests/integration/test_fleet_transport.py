"""A run's records on their way between machines: only the run's own regular files travel, step files capped."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from loope.errors import LoopeError
from loope.fleet import transport
from loope.workspace.git import Git


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def a_run(tmp_path: Path) -> tuple[Git, Path, Path]:
    """A repository with a workspace worktree inside a run dir (as a prepared run has), and a bare remote."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "calc.py").write_text("x = 1\n")
    git(repo, "add", "calc.py")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    rundir = repo / ".loope" / "runs" / "0001-x"
    rundir.mkdir(parents=True)
    git(repo, "worktree", "add", "-q", "-b", "loope/0001-x", str(rundir / "workspace"))
    record = {"run_id": "0001-x", "workspace": {"path": str(rundir / "workspace")}, "completed_head": None}
    (rundir / "run.json").write_text(json.dumps(record))
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    return Git(repo), rundir, remote


def test_links_in_a_run_dir_never_travel(tmp_path):
    repo, rundir, remote = a_run(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's key\n")
    step = rundir / "agents" / "01-implementer-exec"
    step.mkdir(parents=True)
    (step / "result.md").write_text("done\n")
    (step / "leak").symlink_to(secret)  # an agent's step dir pointing outside the run
    (step / "dir-leak").symlink_to(tmp_path)
    (rundir / "events.jsonl").symlink_to(secret)

    snapshot = transport.push(repo, rundir, str(remote), transport.records_ref("k", 1, 1), "k")

    listed = git(remote, "ls-tree", "-r", "--name-only", snapshot.commit).split()
    assert "agents/01-implementer-exec/result.md" in listed
    assert not [p for p in listed if "leak" in p or p == "events.jsonl"]
    assert "the user's key" not in git(remote, "log", "-p", "--all")
    assert git(remote, "rev-parse", "refs/loope/k").strip() == snapshot.head


def test_a_huge_transcript_is_cut_and_the_run_files_are_not(tmp_path):
    repo, rundir, remote = a_run(tmp_path)
    step = rundir / "agents" / "01-implementer-exec"
    step.mkdir(parents=True)
    (step / "transcript.jsonl").write_bytes(b"x" * (transport.STEP_FILE_CAP + 1000))
    (rundir / "ledger.jsonl").write_bytes(b"y" * (transport.STEP_FILE_CAP + 10))

    snapshot = transport.push(repo, rundir, str(remote), transport.records_ref("k", 1, 1), "k")

    home = tmp_path / "home"
    home.mkdir()
    transport.unpack(repo, snapshot.commit, home)
    cut = (home / "agents" / "01-implementer-exec" / "transcript.jsonl").read_bytes()
    assert cut.startswith(b"x" * transport.STEP_FILE_CAP)
    assert b"cut at" in cut[transport.STEP_FILE_CAP :]
    assert len((home / "ledger.jsonl").read_bytes()) == transport.STEP_FILE_CAP + 10
    assert not (home / "workspace").exists()


def test_a_push_the_remote_refuses_is_one_clear_error(tmp_path):
    repo, rundir, _ = a_run(tmp_path)
    with pytest.raises(LoopeError, match="cannot push the run to"):
        transport.push(repo, rundir, str(tmp_path / "nowhere.git"), transport.records_ref("k", 1, 1), "k")


def test_records_brought_home_replace_run_json_last_and_whole_still_marked_as_on_temporal(tmp_path):
    import threading

    from loope.fleet.temporal.submit import bring_home

    repo, rundir, remote = a_run(tmp_path)
    record = json.loads((rundir / "run.json").read_text())
    head = repo.out("rev-parse", "HEAD")
    workspace = {**record["workspace"], "mode": "worktree", "branch": "loope/0001-x", "base": head, "head": head}
    segment = {**record, "goal": "x", "workspace": workspace, "status": "max_iters", "iterations": 1}
    segment["workdir"] = str(repo.work_tree)
    (rundir / "run.json").write_text(json.dumps(segment))  # what a worker's segment says: it ended
    (rundir / "spec.json").write_text(json.dumps({"workdir": str(repo.work_tree)}))
    (rundir / "ledger.jsonl").write_text('{"iteration": 1}\n')
    transport.push(repo, rundir, str(remote), transport.records_ref("k", 1, 1), "k")
    here = {**segment, "status": "running", "temporal": {"workflow_id": "k"}}  # the coordinator's own record
    (rundir / "run.json").write_text(json.dumps(here))
    (rundir / "ledger.jsonl").unlink()

    seen: list[object] = []
    done = threading.Event()

    def look() -> None:  # every read of run.json while the records come home
        while not done.is_set():
            try:
                now = json.loads((rundir / "run.json").read_text())
                seen.append((now.get("status"), "temporal" in now))
            except (OSError, ValueError) as exc:
                seen.append(type(exc).__name__)

    watcher = threading.Thread(target=look)
    watcher.start()
    try:
        bring_home(rundir, str(remote), transport.records_ref("k", 1, 1))
    finally:
        done.set()
        watcher.join()
    assert seen
    assert set(seen) == {("running", True)}  # never missing, never the segment's own end, never unmarked
    assert (rundir / "ledger.jsonl").read_text() == '{"iteration": 1}\n'  # the other records did come home
    assert json.loads((rundir / "run.json").read_text())["iterations"] == 1
