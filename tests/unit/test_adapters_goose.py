"""The goose adapter on constructed goose stream-json (tests/fixtures/agents/goose-*)."""

from __future__ import annotations

import pytest

from loope.agents.goose import GooseAgent
from tests.unit.adapter_fakes import actions, make_request, messages, replay, run_agent


def test_argv_for_writers_readers_and_a_model(tmp_path):
    request = make_request(tmp_path)
    write = GooseAgent("anthropic/claude-sonnet-4-5", options={"bin": "goose"}).argv(request)
    assert write == [
        "goose",
        "run",
        "--no-session",
        "--output-format",
        "stream-json",
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
        "-t",
        request.prompt,
    ]
    bare = GooseAgent("gpt-5", options={"bin": "goose"}).argv(request)
    assert bare[5:7] == ["--model", "gpt-5"]


def test_mode_is_auto_for_writers_and_chat_for_readers(tmp_path):
    assert GooseAgent().environment(make_request(tmp_path))["GOOSE_MODE"] == "auto"
    assert GooseAgent().environment(make_request(tmp_path, role="reviewer"))["GOOSE_MODE"] == "chat"
    env = GooseAgent().environment(make_request(tmp_path, isolate_home=True))
    assert env["GOOSE_PATH_ROOT"] == str(tmp_path / "step" / "home")


def test_success_chunked_text_tools_tokens_and_reported_cost(tmp_path):
    result, events = replay(GooseAgent, tmp_path, "goose-ok.jsonl")

    assert result.ok, result.error
    assert actions(events) == [("command", "cat hello.txt"), ("edit", "hello.txt"), ("command", "ls")]
    # Two chunks of one message make one message.
    assert messages(events) == ["I'll read the file first.", "Done: hello.txt now says goodbye world."]
    assert result.message == "Done: hello.txt now says goodbye world."
    assert (result.input_tokens, result.output_tokens) == (6600, 120)
    assert result.cost_usd == pytest.approx(0.0216)
    assert not result.cost_estimated
    assert result.model == "claude-sonnet-4-5"


def test_an_error_then_complete_with_exit_0_is_a_failure(tmp_path):
    result, _ = replay(GooseAgent, tmp_path, "goose-error-then-complete.jsonl", 0)
    assert not result.ok
    assert result.error is not None
    assert result.error.startswith("Authentication failed. Status: 401 Unauthorized. Message: invalid x-api-key")
    assert "not logged in" in result.error
    assert result.input_tokens == 0


def test_older_tool_names_and_a_total_only_completion(tmp_path):
    lines = [
        '{"type":"message","message":{"id":"m1","role":"assistant","content":[{"type":"toolRequest","id":"t1",'
        '"toolCall":{"status":"success","value":{"name":"developer__text_editor",'
        '"arguments":{"command":"str_replace","path":"src/app.py"}}}}]}}',
        '{"type":"message","message":{"id":"m2","role":"user","content":[{"type":"toolResponse","id":"t1",'
        '"toolResult":{"status":"error","error":"no match for old_str"}}]}}',
        '{"type":"complete","total_tokens":900}',
    ]
    body = "".join(f"echo '{ln}'\n" for ln in lines)
    result, events = run_agent(GooseAgent, tmp_path, body + "exit 0")
    assert result.ok, result.error
    assert actions(events) == [("edit", "src/app.py")]
    assert "developer__text_editor failed: no match for old_str" in messages(events)
    assert (result.input_tokens, result.output_tokens) == (900, 0)


def test_garbage_output(tmp_path):
    result, _ = run_agent(GooseAgent, tmp_path, "echo 'No provider configured. Run goose configure first'\nexit 0")
    assert result.error is not None
    assert result.error.startswith("goose exited without printing goose's JSON events")
