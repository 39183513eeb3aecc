"""The ACP adapter against a stand-in agent replaying a gemini-acp session (tests/helpers/acp_replay.py).

The session (tests/fixtures/agents/gemini-acp-session.json) reads and writes through loope's fs
methods and runs a command through loope's terminal, as gemini-cli's ACP mode does; it also tries
a protected file, a path above the workspace and a symlink out of it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from loope.agents import registry
from loope.agents.base import AgentEvent
from loope.agents.pricing import estimate
from tests.unit.adapter_fakes import FIXTURES, fake_binary, make_request

REPLAY = Path(__file__).resolve().parents[1] / "helpers" / "acp_replay.py"


@pytest.fixture
def gemini(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The gemini-acp preset, its binary the replay of the recorded-shape session; returns the answers file."""
    answers = tmp_path / "answers.jsonl"
    script = FIXTURES / "gemini-acp-session.json"
    body = f'exec {sys.executable} {REPLAY} {script} {answers} "$@"'
    monkeypatch.setenv("LOOPE_GEMINI_ACP_BIN", fake_binary(tmp_path, body, name="gemini"))
    return answers


def workspace_with_an_escape(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "hello.txt").write_text("hello\n")
    (workspace / "tests").mkdir()
    (workspace / "tests" / "test_hello.py").write_text("def test_hello():\n    assert True\n")
    (workspace / "link").symlink_to(outside)
    return workspace


def answers_to(path: Path) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        found.setdefault(entry["method"], []).append(entry["answer"])
    return found


def protected(rel: str) -> str | None:
    return f"{rel} is protected" if rel.startswith("tests/") else None


def test_a_writer_edits_through_loope_and_is_refused_the_protected_file_and_every_escape(tmp_path, gemini) -> None:
    workspace = workspace_with_an_escape(tmp_path)
    seen: list[AgentEvent] = []
    request = make_request(tmp_path, workspace=workspace, on_event=seen.append, may_write=protected)
    agent = registry.create(registry.parse("gemini-acp:gemini-2.5-pro"))

    result = agent.run(request)

    assert result.ok, result.error
    assert result.message == "Understood: I left the tests alone."
    assert (workspace / "hello.txt").read_text() == "goodbye\n"
    assert (workspace / "tests" / "test_hello.py").read_text() == "def test_hello():\n    assert True\n"
    assert not (tmp_path / "outside.txt").exists()
    assert not (tmp_path / "outside" / "escaped.txt").exists()
    answers = answers_to(gemini)
    allowed, refused = answers["session/request_permission"]
    assert allowed["result"]["outcome"] == {"outcome": "selected", "optionId": "proceed_once"}
    assert refused["result"]["outcome"] == {"outcome": "selected", "optionId": "cancel"}
    assert (
        refused["result"]["_meta"]["loope"]["reason"]
        == "loope refuses: tests/test_hello.py is protected; leave it as it is"
    )
    wrote, protected_write, above, through_link = answers["fs/write_text_file"]
    assert wrote["result"] == {}
    assert "tests/test_hello.py is protected" in protected_write["error"]["data"]["reason"]
    assert "is outside the workspace" in above["error"]["data"]["reason"]
    assert "is outside the workspace" in through_link["error"]["data"]["reason"]
    read, secret = answers["fs/read_text_file"]
    assert read["result"]["content"] == "hello\n"
    assert "workspace only" in secret["error"]["data"]["reason"]
    # The command ran through loope's subprocess helper, its output (stderr included) and exit status served back.
    (output,) = answers["terminal/output"]
    assert output["result"]["output"] == "out\nerr\n"
    (exited,) = answers["terminal/wait_for_exit"]
    assert exited["result"]["exitCode"] == 3
    # Events: the plan, actions with their targets (one a later update named), the agent's messages.
    actions = [(e.action, e.target) for e in seen if e.kind == "action"]
    assert actions[:3] == [("read", "hello.txt"), ("read", "hello.txt"), ("edit", "hello.txt")]
    assert ("write", "hello.txt") in actions
    assert ("command", "ls") in actions
    assert ("command", "sh -c echo out; echo err >&2; exit 3") in actions
    said = [e.text for e in seen if e.kind == "message"]
    assert said[0] == "plan:\n[in_progress] Read hello.txt\n[pending] Replace hello with goodbye"
    assert "I will edit hello.txt." in said
    # Tokens as the agent reported them; gemini reports no USD, so the cost is loope's estimate, flagged.
    assert (result.input_tokens, result.output_tokens) == (1200, 80)
    assert (result.cost_usd, result.cost_estimated) == (estimate("gemini-2.5-pro", 1200, 80), True)
    assert json.loads((request.step_dir / "argv.json").read_text())[1:] == [
        "--experimental-acp",
        "--model",
        "gemini-2.5-pro",
    ]


def test_a_reviewer_is_refused_every_write_and_every_command(tmp_path, gemini) -> None:
    workspace = workspace_with_an_escape(tmp_path)
    request = make_request(tmp_path, role="reviewer", workspace=workspace)

    result = registry.create(registry.parse("gemini-acp")).run(request)

    assert result.ok, result.error
    assert (workspace / "hello.txt").read_text() == "hello\n"
    answers = answers_to(gemini)
    assert [a["result"]["outcome"]["optionId"] for a in answers["session/request_permission"]] == ["cancel", "cancel"]
    assert all("error" in a for a in answers["fs/write_text_file"])
    (created,) = answers["terminal/create"]
    assert "read-only and may not run commands" in created["error"]["data"]["reason"]
    assert answers["fs/read_text_file"][0]["result"]["content"] == "hello\n"  # reading is what reviewers do


def test_a_hung_agent_is_cancelled_then_killed_at_the_timeout(tmp_path, gemini, monkeypatch) -> None:
    monkeypatch.setenv("ACP_REPLAY_HANG", "1")
    pids: list[int] = []
    request = make_request(tmp_path, timeout_s=1.0, on_spawn=pids.append)

    result = registry.create(registry.parse("gemini-acp")).run(request)

    assert (result.ok, result.timed_out) == (False, True)
    assert result.error == "timed out after 1s"
    transcript = (request.step_dir / "transcript.jsonl").read_text()
    assert '"method": "session/cancel"' in transcript
    from tests.conftest import gone

    assert gone(pids[0])


def test_an_agent_that_is_not_installed_says_how_to_install_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LOOPE_CLAUDE_ACP_BIN", "no-such-claude-agent-acp")
    result = registry.create(registry.parse("claude-acp")).run(make_request(tmp_path))
    assert not result.ok
    assert result.error == (
        "claude-acp is not installed (no-such-claude-agent-acp not found on PATH);"
        " install it with: npm install -g @zed-industries/claude-agent-acp"
    )
