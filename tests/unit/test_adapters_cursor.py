"""The cursor adapter on constructed cursor-agent stream-json (tests/fixtures/agents/cursor-*)."""

from __future__ import annotations

import pytest

from loope.agents.cursor import CursorAgent
from tests.unit.adapter_fakes import actions, fake_binary, make_request, messages, replay, run_agent


def test_argv_for_writers_readers_and_a_model(tmp_path):
    agent = CursorAgent("gpt-5", options={"bin": "cursor-agent"})
    request = make_request(tmp_path)
    write = agent.argv(request)
    read = agent.argv(make_request(tmp_path, role="critic"))

    assert write == [
        "cursor-agent",
        "--print",
        "--output-format",
        "stream-json",
        "--trust",
        "--force",
        "--model",
        "gpt-5",
        request.prompt,
    ]
    assert "--force" not in read
    assert read[read.index("--mode") + 1] == "plan"
    env = agent.environment(make_request(tmp_path, isolate_home=True))
    assert env["CURSOR_CONFIG_DIR"] == str(tmp_path / "step" / "home")


def test_the_binary_is_found_under_either_name(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_binary(bindir, "exit 0", name="agent")
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.delenv(CursorAgent.binary_env_var(), raising=False)
    assert CursorAgent().binary() == "agent"


def test_success_events_message_tokens_and_estimate(tmp_path):
    result, events = replay(CursorAgent, tmp_path, "cursor-ok.jsonl")

    assert result.ok, result.error
    assert actions(events) == [("read", "hello.txt"), ("edit", "hello.txt"), ("command", "ls")]
    # The last assistant message, not the result's run-together concatenation of every message.
    assert result.message == "Done: hello.txt now says goodbye world; ls shows hello.txt."
    assert messages(events) == ["I'll read the file first.", result.message]
    assert (result.input_tokens, result.output_tokens) == (14948 + 19776, 103)
    assert result.model == "Claude 4.5 Sonnet"
    assert result.cost_estimated
    assert result.cost_usd == pytest.approx((14948 + 19776) * 3e-6 + 103 * 15e-6)


def test_a_stream_that_ends_without_a_result_is_a_failure(tmp_path):
    result, events = replay(CursorAgent, tmp_path, "cursor-no-result.jsonl", 0)
    assert not result.ok
    assert result.error == "cursor exited before its final event"
    assert actions(events) == [("command", "python3 hello.py")]
    assert "cursor refused shell: python3 hello.py" in messages(events)
    assert "cursor connection reconnecting (attempt 1)" in messages(events)


def test_a_non_zero_exit_names_cursors_stderr(tmp_path):
    body = f"cat {tmp_path}/none 2>/dev/null\necho 'Error: stream closed' >&2\nexit 1"
    result, _ = run_agent(CursorAgent, tmp_path, body)
    assert result.error == "cursor exited with exit code 1: Error: stream closed"


def test_garbage_output(tmp_path):
    result, _ = run_agent(CursorAgent, tmp_path, "echo 'Pass --trust, --yolo, or -f if you trust this directory'")
    assert result.error is not None
    assert result.error.startswith("cursor exited without printing Cursor's cursor-agent's JSON events")
