"""The gemini adapter on recorded Gemini CLI 0.61 output (tests/fixtures/agents/gemini-*)."""

from __future__ import annotations

import pytest

from loope.agents.gemini import GeminiAgent
from tests.unit.adapter_fakes import FIXTURES, actions, make_request, messages, replay, run_agent, usages

RECORDED = "/work/scratch/adapters/runs/gemini-ok"


def test_argv_for_writers_readers_and_a_model(tmp_path):
    agent = GeminiAgent("gemini-2.5-pro", options={"bin": "gemini", "args": ["--debug"]})
    write = agent.argv(make_request(tmp_path))
    read = agent.argv(make_request(tmp_path, role="reviewer", prompt="-starts with a dash"))

    assert write[:2] == [
        "gemini",
        "--prompt=You are the implementer. Replace hello with goodbye in hello.txt, then run ls.",
    ]
    assert write[2:] == [
        "--output-format",
        "stream-json",
        "--approval-mode",
        "yolo",
        "--model",
        "gemini-2.5-pro",
        "--debug",
    ]
    assert read[1] == "--prompt=-starts with a dash"  # one argument: a leading dash is not a flag
    assert read[read.index("--approval-mode") + 1] == "default"
    assert "--model" not in GeminiAgent(options={"bin": "gemini"}).argv(make_request(tmp_path))


def test_environment_trusts_the_workspace_and_isolates_home(tmp_path, monkeypatch):
    monkeypatch.delenv("GEMINI_CLI_TRUST_WORKSPACE", raising=False)
    env = GeminiAgent().environment(make_request(tmp_path, isolate_home=True))
    assert env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    assert env["GEMINI_CLI_HOME"] == str(tmp_path / "step" / "home")


def test_success_events_message_tokens_and_estimated_cost(tmp_path):
    result, events = replay(GeminiAgent, tmp_path, "gemini-ok.jsonl", recorded=RECORDED)

    assert result.ok, result.error
    assert actions(events) == [("read", "hello.txt"), ("edit", "hello.txt"), ("command", "ls")]
    assert result.message == "Done: I read hello.txt, changed 'hello' to 'goodbye', and ran ls."
    assert messages(events) == [result.message]
    assert (result.input_tokens, result.output_tokens) == (6600, 125)
    assert result.model == "gemini-mock"  # from result.stats.models; init only said "auto"
    # gemini reports no cost: "gemini-mock" is priced as gemini ($1.25 / $10 per million).
    assert result.cost_estimated
    assert result.cost_usd == pytest.approx(6600 * 1.25e-6 + 125 * 10e-6)
    assert result.last_action == "run ls"
    assert (tmp_path / "step" / "transcript.jsonl").read_text().count("\n") == 10


def test_read_only_runs_show_what_gemini_refused(tmp_path):
    result, events = replay(GeminiAgent, tmp_path, "gemini-read-plan.jsonl", recorded=RECORDED, role="reviewer")

    assert result.ok, result.error
    assert actions(events) == [("read", "hello.txt"), ("edit", "hello.txt")]
    refused = [m for m in messages(events) if m.startswith("replace failed")]
    assert len(refused) == 1
    assert "Access denied: plan path" in refused[0]

    result, events = replay(GeminiAgent, tmp_path, "gemini-read-default.jsonl", recorded=RECORDED, role="reviewer")
    assert result.ok
    assert actions(events) == [("read", "hello.txt")]


def test_api_error_exit_145_names_the_http_error(tmp_path):
    result, events = replay(GeminiAgent, tmp_path, "gemini-401.jsonl", 145)

    assert not result.ok
    assert result.error is not None
    assert result.error.startswith("API error 401: Incorrect API key provided (mock)")
    assert "not logged in" in result.error  # the login advice
    assert usages(events)[-1].input_tokens == 0

    result, _ = replay(GeminiAgent, tmp_path, "gemini-400.jsonl", 144)
    assert result.error == "API error 400: mock error"


def test_an_error_result_fails_the_step_even_after_exit_0(tmp_path):
    result, _ = replay(GeminiAgent, tmp_path, "gemini-401.jsonl", 0)
    assert not result.ok
    assert result.exit_code == 0
    assert result.error is not None
    assert result.error.startswith("API error 401: Incorrect API key provided (mock)")


def test_exit_code_without_a_result_is_read_as_the_http_status(tmp_path):
    result, _ = run_agent(GeminiAgent, tmp_path, "echo 'Error generating content' >&2\nexit 173")
    assert result.error is not None
    assert result.error.startswith("gemini got HTTP 429 from the model API (exit 173): Error generating content")
    assert "rate limited" in result.error


@pytest.mark.parametrize(
    ("fixture", "code", "expected"),
    [
        ("gemini-noauth.stderr.json", 41, "gemini could not authenticate (exit 41); set GEMINI_API_KEY"),
        ("gemini-untrusted.stderr.txt", 55, "gemini does not trust the workspace (exit 55): Gemini CLI is not running"),
    ],
)
def test_documented_exit_codes_get_a_clear_reason(tmp_path, fixture, code, expected):
    result, _ = run_agent(GeminiAgent, tmp_path, f"cat {FIXTURES / fixture} >&2\nexit {code}")
    assert result.error is not None
    assert result.error.startswith(expected)
    if code == 41:
        assert "Please set an Auth method" in result.error


def test_a_clean_exit_without_a_result_event_is_a_failure(tmp_path):
    result, events = run_agent(GeminiAgent, tmp_path, f"head -n 3 {FIXTURES / 'gemini-ok.jsonl'}\nexit 0")
    assert not result.ok
    assert result.error == "gemini exited before its final event"
    assert actions(events) == [("read", "/work/scratch/adapters/runs/gemini-ok/hello.txt")]  # outside the workspace


def test_garbage_output_says_the_binary_is_not_gemini(tmp_path):
    result, _ = run_agent(GeminiAgent, tmp_path, "echo 'Usage: something else'\nexit 0")
    assert not result.ok
    assert result.error is not None
    assert result.error.startswith(
        "gemini exited without printing Gemini CLI's JSON events (first line: 'Usage: something"
    )
