"""The opencode adapter on recorded OpenCode 1.18 output (tests/fixtures/agents/opencode-*)."""

from __future__ import annotations

import json

import pytest

from loope.agents.opencode import OpenCodeAgent
from tests.unit.adapter_fakes import FIXTURES, actions, make_request, messages, replay, run_agent, usages

RECORDED = "/work/scratch/adapters/runs/opencode-ok"


def test_argv_for_writers_readers_and_a_model(tmp_path):
    agent = OpenCodeAgent("anthropic/claude-sonnet-4-5", options={"bin": "opencode"})
    request = make_request(tmp_path)
    write = agent.argv(request)
    read = agent.argv(make_request(tmp_path, role="reviewer"))

    assert write == [
        "opencode",
        "run",
        "--format",
        "json",
        "--auto",
        "--model",
        "anthropic/claude-sonnet-4-5",
        request.prompt,
    ]
    assert "--auto" not in read


def test_read_roles_deny_edits_and_bash_on_top_of_the_users_rules(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENCODE_PERMISSION", '{"webfetch": "deny", "edit": "allow"}')
    env = OpenCodeAgent().environment(make_request(tmp_path, role="reviewer"))
    assert json.loads(env["OPENCODE_PERMISSION"]) == {"webfetch": "deny", "edit": "deny", "bash": "deny"}

    writer = OpenCodeAgent().environment(make_request(tmp_path))
    assert writer["OPENCODE_PERMISSION"] == '{"webfetch": "deny", "edit": "allow"}'  # the user's, untouched


def test_isolated_home_gets_private_xdg_dirs(tmp_path):
    env = OpenCodeAgent().environment(make_request(tmp_path, isolate_home=True))
    home = tmp_path / "step" / "home"
    assert (env["XDG_CONFIG_HOME"], env["XDG_DATA_HOME"]) == (str(home / "config"), str(home / "data"))
    assert (home / "state").is_dir()


def test_success_events_message_tokens_and_reported_cost(tmp_path):
    result, events = replay(OpenCodeAgent, tmp_path, "opencode-ok.jsonl", recorded=RECORDED)

    assert result.ok, result.error
    assert actions(events) == [("read", "hello.txt"), ("edit", "hello.txt"), ("command", "ls")]
    assert result.message == "Done: I read hello.txt, changed 'hello' to 'goodbye', and ran ls."
    assert messages(events) == [result.message]
    assert [u.cost_usd for u in usages(events)] == [0.00495, 0.00525, 0.00555, 0.00585]
    assert (result.input_tokens, result.output_tokens) == (6600, 120)
    assert result.cost_usd == pytest.approx(0.0216)
    assert not result.cost_estimated


def test_a_zero_cost_means_an_unknown_price_so_the_tokens_are_priced(tmp_path):
    zero = f'sed \'s/"cost":[0-9.]*/"cost":0/\' {FIXTURES / "opencode-ok.jsonl"}'
    result, _ = run_agent(OpenCodeAgent, tmp_path, zero, model="anthropic/claude-sonnet-4-5")
    assert result.ok
    assert result.cost_estimated
    assert result.cost_usd == pytest.approx(6600 * 3e-6 + 120 * 15e-6)


def test_api_error_event_fails_the_step(tmp_path):
    result, _ = replay(OpenCodeAgent, tmp_path, "opencode-401.jsonl", 1)
    assert not result.ok
    assert result.error is not None
    assert result.error.startswith("APIError 401: Incorrect API key provided (mock)")
    assert "not logged in" in result.error


def test_a_rejected_permission_that_stops_the_turn_fails_despite_exit_0(tmp_path):
    result, events = replay(
        OpenCodeAgent,
        tmp_path,
        "opencode-permission-rejected.jsonl",
        0,
        stderr="opencode-permission-rejected.stderr.txt",
        recorded=RECORDED,
    )
    assert not result.ok
    assert result.error == (
        "opencode exited before its final event: ! permission requested: edit (hello.txt); auto-rejecting"
    )
    assert actions(events) == [("read", "hello.txt"), ("edit", "hello.txt")]
    assert "edit failed: The user rejected permission to use this specific tool call." in messages(events)


def test_garbage_output(tmp_path):
    result, _ = run_agent(OpenCodeAgent, tmp_path, "echo '{not json'\nexit 0")
    assert result.error is not None
    assert "without printing OpenCode's JSON events" in result.error
