"""The copilot adapter on recorded GitHub Copilot CLI 1.0.102 output (tests/fixtures/agents/copilot-*)."""

from __future__ import annotations

import shlex

import pytest

from loope.agents.copilot import USAGE_FILE, CopilotAgent
from tests.unit.adapter_fakes import FIXTURES, actions, make_request, messages, replay_body, run_agent

RECORDED = "/work/scratch/adapters/runs/copilot-ok"


def copilot_body(tmp_path, fixture: str, exit_code: int = 0, usage: str | None = None) -> str:
    """A stand-in copilot: writes the recorded usage file where --usage-output-file says, then replays stdout."""
    write_usage = ""
    if usage:
        write_usage = (
            'prev=""\nfor arg in "$@"; do\n'
            f'  [ "$prev" = --usage-output-file ] && cp {shlex.quote(str(FIXTURES / usage))} "$arg"\n'
            '  prev="$arg"\ndone\n'
        )
    return write_usage + replay_body(fixture, exit_code, recorded=RECORDED, workspace=tmp_path / "workspace")


def test_argv_for_writers_readers_and_a_model(tmp_path):
    agent = CopilotAgent("gpt-5", options={"bin": "copilot"})
    request = make_request(tmp_path)
    write = agent.argv(request)
    read = agent.argv(make_request(tmp_path, role="reviewer"))

    assert write[:7] == [
        "copilot",
        "-p",
        request.prompt,
        "--output-format",
        "json",
        "--allow-all-tools",
        "--no-ask-user",
    ]
    assert write[write.index("--usage-output-file") + 1] == str(tmp_path / "step" / USAGE_FILE)
    assert write[-2:] == ["--model", "gpt-5"]
    assert "--deny-tool=write" not in write
    assert {"--deny-tool=write", "--deny-tool=shell"} <= set(read)
    env = agent.environment(make_request(tmp_path, isolate_home=True))
    assert env["COPILOT_HOME"] == str(tmp_path / "step" / "home")


def test_success_events_message_and_tokens_from_the_usage_file(tmp_path):
    result, events = run_agent(
        CopilotAgent, tmp_path, copilot_body(tmp_path, "copilot-ok.jsonl", usage="copilot-ok.usage.json")
    )

    assert result.ok, result.error
    assert actions(events) == [("read", "hello.txt"), ("edit", "hello.txt"), ("command", "ls")]
    assert result.message == "Done: I read hello.txt, changed 'hello' to 'goodbye', and ran ls."
    assert messages(events) == [result.message]
    assert (result.input_tokens, result.output_tokens) == (6600, 120)
    assert result.model == "gpt-4.1"
    # Premium requests are no USD figure: the tokens are priced as gpt-4.1 ($2 / $8 per million).
    assert result.cost_estimated
    assert result.cost_usd == pytest.approx(6600 * 2e-6 + 120 * 8e-6)


def test_without_a_usage_file_there_are_no_tokens_and_no_invented_cost(tmp_path):
    result, _ = run_agent(CopilotAgent, tmp_path, copilot_body(tmp_path, "copilot-ok.jsonl"))
    assert result.ok
    assert (result.input_tokens, result.cost_usd, result.cost_estimated) == (0, 0.0, False)


def test_denied_tools_in_a_read_role_are_reported_not_failed(tmp_path):
    result, events = run_agent(
        CopilotAgent, tmp_path, copilot_body(tmp_path, "copilot-read-denied.jsonl"), role="reviewer"
    )
    assert result.ok, result.error
    assert actions(events) == [("read", "hello.txt"), ("edit", "hello.txt"), ("command", "ls")]
    denied = [m for m in messages(events) if "denied" in m]
    assert denied == [
        "edit failed: Permission to run this tool was denied due to the following rules: `write`",
        "bash failed: Permission to run this tool was denied due to the following rules: `shell`",
    ]


def test_session_error_fails_the_step(tmp_path):
    result, _ = run_agent(CopilotAgent, tmp_path, copilot_body(tmp_path, "copilot-401.jsonl", 1))
    assert not result.ok
    assert result.error is not None
    assert result.error.startswith("Authentication failed with provider at http://127.0.0.1:18080/e401 (HTTP 401).")
    assert result.exit_code == 1


def test_session_error_decides_even_after_exit_0(tmp_path):
    result, _ = run_agent(CopilotAgent, tmp_path, copilot_body(tmp_path, "copilot-401.jsonl", 0))
    assert not result.ok
    assert result.error is not None
    assert "HTTP 401" in result.error


def test_garbage_output(tmp_path):
    result, _ = run_agent(CopilotAgent, tmp_path, "echo 'GitHub Copilot CLI 1.0.102.'\nexit 0")
    assert result.error is not None
    assert result.error.startswith("copilot exited without printing GitHub Copilot CLI's JSON events")
