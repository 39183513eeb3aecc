"""The keys of a CLI's own state file that are configuration are put back; the rest is the CLI's."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from loope.agents.config_seal import ConfigSeal, KeySeal

KEYS = ("mcpServers", "projects.*.allowedTools")


def test_a_state_file_made_during_the_step_keeps_its_state_and_loses_its_configuration(tmp_path: Path) -> None:
    path = tmp_path / ".claude.json"
    seal = KeySeal(path, KEYS, "claude")
    path.write_text(
        json.dumps({"firstStartTime": "now", "mcpServers": {"x": {}}, "projects": {"/p": {"allowedTools": ["Bash"]}}})
    )

    lines = seal.restore()

    assert json.loads(path.read_text()) == {"firstStartTime": "now", "projects": {"/p": {}}}
    said = "is claude's own configuration, not the step's to change; it was put back"
    assert lines == [f"{path} (mcpServers, projects./p.allowedTools) {said}"]


def test_an_unchanged_configuration_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / ".claude.json"
    path.write_text(json.dumps({"mcpServers": {"mine": {"command": "m"}}, "tips": 1}))
    seal = KeySeal(path, KEYS, "claude")
    path.write_text(json.dumps({"tips": 2, "mcpServers": {"mine": {"command": "m"}}}))

    assert seal.restore() == []
    assert json.loads(path.read_text()) == {"tips": 2, "mcpServers": {"mine": {"command": "m"}}}


def test_a_state_file_that_is_no_longer_json_is_said_and_left(tmp_path: Path) -> None:
    path = tmp_path / ".claude.json"
    path.write_text(json.dumps({"mcpServers": {}}))
    seal = KeySeal(path, KEYS, "claude")
    path.write_text("{ not json")

    assert seal.restore() == [f"{path} is no longer JSON; left as it is"]
    assert path.read_text() == "{ not json"


def test_a_users_directory_is_never_removed_only_its_mode_and_place_put_back(tmp_path: Path) -> None:
    state = tmp_path / ".claude"
    (state / "commands").mkdir(parents=True)
    (state / "commands" / "review.md").write_text("Review the diff.\n")
    (state / "agents").mkdir()
    seal = ConfigSeal([state / "commands", state / "agents", state / "skills"], "claude")
    (state / "commands").chmod(0o777)
    (state / "agents").rmdir()
    (state / "agents").write_text("not a directory\n")
    (state / "skills" / "setup").mkdir(parents=True)

    lines = seal.restore()

    assert (state / "commands" / "review.md").read_text() == "Review the diff.\n"
    assert stat.S_IMODE(os.stat(state / "commands").st_mode) == 0o755
    assert (state / "agents").is_dir()
    assert not (state / "skills").exists()
    assert len(lines) == 3


def test_what_could_not_be_read_is_left_alone(tmp_path: Path) -> None:
    fifo = tmp_path / "settings.json"
    os.mkfifo(fifo)
    seal = ConfigSeal([fifo], "claude")
    fifo.unlink()
    fifo.write_text("{}\n")

    assert seal.restore() == []
    assert fifo.read_text() == "{}\n"
