"""A step that moves the run directory away, or puts something in its place: the run ends, nothing lost.

Run in place, the run directory lies in the agent's own workspace (``.loope/runs/<id>``); in a
worktree, the workspace lies in the run directory. The attacker is an ``exec:`` implementer whose
shell moves, replaces or deletes it; real pytest is the gate. loope must end the run with a reason
that says what happened, keep every record written so far where it was, and write nothing into
what the step left in its place.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loope.sandbox import bwrap
from tests.conftest import Project
from tests.helpers.attacks import run_attack, shell_implementer

# The step's shell: what it does to the directory, and what the run's stop_detail then says.
ATTACKS = {
    "moved within the workspace": ("mv .loope .loope-moved\n", "moved .loope away"),
    "moved out of the workspace": ('mv .loope "$OUTSIDE/taken"\n', "moved .loope away"),
    "replaced by a link to where it went": ("mv .loope .loope-moved && ln -s .loope-moved .loope\n", "put it back"),
    "replaced by a directory of the step's": (
        'mv .loope "$OUTSIDE/taken" && mkdir -p ".loope/runs/$LOOPE_RUN_ID"\n'
        'echo mine > ".loope/runs/$LOOPE_RUN_ID/x"\n',
        "in its place is now at",
    ),
    "only the run directory moved": ('mv "$LOOPE_RUN_DIR" "$OUTSIDE/taken"\n', "moved .loope/runs/"),
}


def _attack(project: Project, tmp_path: Path, cli, script: str, *flags: str):  # type: ignore[no-untyped-def]
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    body = f'OUTSIDE={outside}\n{script}echo "the step is done"\n'
    return run_attack(cli, project, shell_implementer(tmp_path / "agents", body), "--sandbox", "off", *flags)


def _records_kept(rundir: Path) -> None:
    """Every record of the run where loope keeps it, whole: the events numbered 1..N and finished."""
    assert (rundir / "spec.json").is_file()
    assert (rundir / "report.md").is_file()
    assert list((rundir / "agents").glob("01-implementer-*/transcript.log"))
    events = [json.loads(line) for line in (rundir / "events.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "run_started"
    assert events[-1]["type"] == "run_finished"


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_run_directory_moved_away_ends_the_run_and_is_put_back(project, cli, tmp_path, attack):
    script, said = ATTACKS[attack]
    mode = ("--workspace", "worktree") if attack == "only the run directory moved" else ("--workspace", "in-place")
    result = _attack(project, tmp_path, cli, script, *mode)

    assert result.exit_code == 1, result.out + result.err
    assert "Traceback" not in result.out + result.err
    (rundir,) = project.runs()
    record = json.loads((rundir / "run.json").read_text())
    assert record["stop_reason"] == "step_failed", record["stop_detail"]
    assert said in record["stop_detail"]
    assert "stopped the run" in record["stop_detail"]
    _records_kept(rundir)
    assert not (project.path / ".loope-moved").exists()
    assert not list((tmp_path / "outside").iterdir())
    for aside in project.path.glob(".loope.replaced-*"):
        # What the step left in the run directory's place was moved aside, never written into.
        if aside.is_symlink():
            assert aside.readlink() == Path(".loope-moved")
        else:
            assert sorted(p.relative_to(aside).as_posix() for p in aside.rglob("*")) == [
                "runs",
                f"runs/{record['run_id']}",
                f"runs/{record['run_id']}/x",
            ]


def test_a_deleted_run_directory_ends_the_run_saying_so(project, cli, tmp_path):
    # (.loope/runs: deleting .loope itself deletes the run database too, which no run can outlive)
    result = _attack(project, tmp_path, cli, "rm -rf .loope/runs\n", "--workspace", "in-place")

    assert result.exit_code == 1, result.out + result.err
    assert "Traceback" not in result.out + result.err
    (rundir,) = project.runs()
    record = json.loads((rundir / "run.json").read_text())
    assert record["stop_reason"] == "step_failed"
    assert "deleted .loope/runs and the run's records in it" in record["stop_detail"]
    events = [json.loads(line) for line in (rundir / "events.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))  # the runner's copy, put back
    assert events[-1]["type"] == "run_finished"


@pytest.mark.skipif(not bwrap.support().works, reason="needs bubblewrap")
def test_with_the_sandbox_the_move_itself_fails_and_the_run_goes_on(project, cli, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    script = "mv .loope .loope-moved || echo 'the move was refused'\n"
    body = f"OUTSIDE={outside}\n{script}echo done\n"
    result = run_attack(
        cli, project, shell_implementer(tmp_path / "agents", body), "--sandbox", "on", "--workspace", "in-place"
    )

    assert result.exit_code == 1, result.out + result.err
    (rundir,) = project.runs()
    record = json.loads((rundir / "run.json").read_text())
    assert record["stop_reason"] == "max_iters", record["stop_detail"]
    assert not (project.path / ".loope-moved").exists()
    _records_kept(rundir)
