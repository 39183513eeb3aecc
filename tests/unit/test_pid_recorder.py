"""The step's process group is noted in its step directory, unless the step already took that away."""

from __future__ import annotations

from pathlib import Path

from loope.proc import run_process
from loope.verify.gate import pid_recorder


def test_the_group_is_noted_in_the_step_directory(tmp_path: Path) -> None:
    result = run_process(["/bin/sh", "-c", "exit 0"], cwd=tmp_path, on_spawn=pid_recorder(tmp_path))

    assert result.exit_code == 0
    assert (tmp_path / "process.pid").read_text().strip().isdigit()


def test_a_step_directory_moved_away_before_the_note_ends_nothing(tmp_path: Path) -> None:
    """A step that moves its run directory at once: the note has nowhere to go, and goes nowhere."""
    gone = tmp_path / "runs" / "0001" / "agents" / "01-implementer-exec"
    (tmp_path / "runs").mkdir()  # the step's replacement: no agents/ inside, so nothing is written into it

    result = run_process(["/bin/sh", "-c", "exit 0"], cwd=tmp_path, on_spawn=pid_recorder(gone))

    assert result.exit_code == 0
    assert not gone.exists()
    assert [p.name for p in (tmp_path / "runs").iterdir()] == []
    blocked = tmp_path / "file"
    blocked.write_text("x")
    assert run_process(["/bin/true"], cwd=tmp_path, on_spawn=pid_recorder(blocked / "step")).exit_code == 0
    assert blocked.read_text() == "x"
