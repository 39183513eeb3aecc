"""The keys of a CLI's own state file that are configuration are put back; the rest is the CLI's."""

from __future__ import annotations

import json
from pathlib import Path

from loope.agents.config_seal import KeySeal

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
