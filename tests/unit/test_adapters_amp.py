"""The amp adapter on constructed stream-json (tests/fixtures/agents/amp-*) and a real bad-key run."""

from __future__ import annotations

import json

from loope.agents.amp import SETTINGS_FILE, AmpAgent
from tests.unit.adapter_fakes import FIXTURES, actions, make_request, messages, replay, run_agent


def test_argv_for_writers_readers_and_a_mode(tmp_path):
    agent = AmpAgent("high", options={"bin": "amp"})
    request = make_request(tmp_path)
    write = agent.argv(request)
    read = agent.argv(make_request(tmp_path, role="reviewer"))

    assert write == ["amp", "-x", request.prompt, "--stream-json", "--dangerously-allow-all", "--mode", "high"]
    assert "--dangerously-allow-all" not in read
    assert AmpAgent.prompt_on_stdin is False  # amp -x waits for an open stdin to end


def test_read_roles_get_a_settings_file_disabling_the_writing_tools(tmp_path, monkeypatch):
    own = tmp_path / "settings.json"
    own.write_text(json.dumps({"amp.tools.disable": ["browser_navigate", "Bash"], "amp.notifications.enabled": False}))
    monkeypatch.setenv("AMP_SETTINGS_FILE", str(own))

    env = AmpAgent().environment(make_request(tmp_path, role="reviewer"))
    assert env["AMP_SETTINGS_FILE"] == str(tmp_path / "step" / SETTINGS_FILE)
    settings = json.loads((tmp_path / "step" / SETTINGS_FILE).read_text())
    assert settings["amp.notifications.enabled"] is False  # the user's own settings carried over
    assert settings["amp.tools.disable"] == [
        "browser_navigate",
        "edit_file",
        "create_file",
        "undo_edit",
        "Bash",
        "Task",
    ]

    writer = AmpAgent().environment(make_request(tmp_path))
    assert writer["AMP_SETTINGS_FILE"] == str(own)


def test_isolated_home_gets_an_empty_settings_file(tmp_path):
    env = AmpAgent().environment(make_request(tmp_path, isolate_home=True))
    assert json.loads((tmp_path / "step" / SETTINGS_FILE).read_text()) == {}
    assert env["AMP_SETTINGS_FILE"] == str(tmp_path / "step" / SETTINGS_FILE)


def test_success_events_message_and_summed_tokens(tmp_path):
    result, events = replay(AmpAgent, tmp_path, "amp-ok.jsonl")

    assert result.ok, result.error
    assert actions(events) == [("read", "hello.txt"), ("edit", "hello.txt"), ("command", "ls")]
    assert result.message == 'Done: hello.txt now reads "goodbye world"; `ls` lists hello.txt.'
    assert messages(events) == ["Reading the file.", result.message]
    # No totals in amp's result: each reply's input, cache writes and cache reads, and output, summed.
    assert result.input_tokens == (12783 + 367 + 12416) + (13210 + 13150) + (13400 + 13300) + (13500 + 13400)
    assert result.output_tokens == 40 + 52 + 30 + 25
    # Amp names no model and reports no cost: nothing is invented.
    assert (result.cost_usd, result.cost_estimated, result.model) == (0.0, False, None)


def test_an_error_result_fails_the_step(tmp_path):
    result, events = replay(AmpAgent, tmp_path, "amp-approval-error.jsonl", 1)
    assert not result.ok
    assert result.error == (
        "The following tools require user approval, which is not supported in stream JSON mode: Bash"
    )
    assert actions(events) == [("command", "git push")]


def test_a_rejected_key_exits_1_with_no_json(tmp_path):
    result, _ = run_agent(AmpAgent, tmp_path, f"cat {FIXTURES / 'amp-bad-key.stderr.txt'} >&2\nexit 1")
    assert result.error is not None
    assert result.error.startswith(
        "amp exited with exit code 1: Error: Invalid or missing API key. Run 'amp login' to authenticate."
    )
    assert "not logged in" in result.error


def test_garbage_output(tmp_path):
    result, _ = run_agent(AmpAgent, tmp_path, "echo 'When prompted, paste your code here:'\nexit 0")
    assert result.error is not None
    assert result.error.startswith("amp exited without printing Amp's JSON events")
