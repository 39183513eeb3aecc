"""The qwen adapter on recorded Qwen Code 0.24 output (tests/fixtures/agents/qwen-*)."""

from __future__ import annotations

import pytest

from loope.agents.qwen import QwenAgent
from tests.unit.adapter_fakes import FIXTURES, actions, make_request, messages, replay, run_agent, usages


def test_argv_for_writers_readers_and_a_model(tmp_path):
    agent = QwenAgent("qwen3-coder-plus", options={"bin": "qwen"})
    request = make_request(tmp_path)
    write = agent.argv(request)
    read = agent.argv(make_request(tmp_path, role="verifier"))

    assert write == [
        "qwen",
        "--output-format",
        "stream-json",
        "--approval-mode",
        "yolo",
        "--model",
        "qwen3-coder-plus",
        request.prompt,
    ]
    assert read[read.index("--approval-mode") + 1] == "default"
    env = agent.environment(make_request(tmp_path, isolate_home=True))
    assert env["QWEN_HOME"] == str(tmp_path / "step" / "home")


def test_success_events_message_tokens_and_priced_estimate(tmp_path):
    # The workspace in the recording is the init line's cwd: paths are shown relative to it.
    result, events = replay(QwenAgent, tmp_path, "qwen-ok.jsonl", options={"prices": {"mock-model": [1.0, 2.0]}})

    assert result.ok, result.error
    assert actions(events) == [("read", "hello.txt"), ("edit", "hello.txt"), ("command", "ls")]
    assert result.message == "Done: I read hello.txt, changed 'hello' to 'goodbye', and ran ls."
    assert messages(events) == [result.message]
    # The result line's totals, not the per-message usage on top of them.
    assert [(u.input_tokens, u.output_tokens) for u in usages(events)] == [(6600, 120)]
    assert (result.input_tokens, result.output_tokens) == (6600, 120)
    assert result.model == "mock-model"
    assert result.cost_estimated
    assert result.cost_usd == pytest.approx(6600 * 1e-6 + 120 * 2e-6)


def test_an_unpriced_model_costs_nothing_known_rather_than_a_guess(tmp_path):
    result, _ = replay(QwenAgent, tmp_path, "qwen-ok.jsonl")
    assert (result.cost_usd, result.cost_estimated) == (0.0, False)


def test_read_only_run(tmp_path):
    result, events = replay(QwenAgent, tmp_path, "qwen-read-default.jsonl", role="reviewer")
    assert result.ok
    assert actions(events) == [("read", "hello.txt")]


def test_api_error_result_fails_the_step_with_its_message(tmp_path):
    result, events = replay(QwenAgent, tmp_path, "qwen-401.jsonl", 1)

    assert not result.ok
    assert result.error is not None
    assert result.error.startswith("API Error: 401 Incorrect API key provided (mock)")
    assert "not logged in" in result.error
    assert result.exit_code == 1
    assert messages(events) == ["[API Error: 401 Incorrect API key provided (mock)]"]


def test_the_error_result_decides_even_after_exit_0(tmp_path):
    result, _ = replay(QwenAgent, tmp_path, "qwen-401.jsonl", 0)
    assert not result.ok
    assert result.error is not None
    assert result.error.startswith("API Error: 401")


def test_no_result_line_counts_the_replies_and_fails(tmp_path):
    result, _ = run_agent(QwenAgent, tmp_path, f"head -n 5 {FIXTURES / 'qwen-ok.jsonl'}\nexit 0")
    assert not result.ok
    assert result.error == "qwen exited before its final event"
    assert (result.input_tokens, result.output_tokens) == (1500 + 1600, 60)


def test_turn_limit_exit_code(tmp_path):
    result, _ = run_agent(QwenAgent, tmp_path, "exit 53")
    assert result.error == "qwen stopped at its turn limit (exit 53)"


def test_garbage_output(tmp_path):
    result, _ = run_agent(QwenAgent, tmp_path, "echo hello\nexit 0")
    assert result.error is not None
    assert result.error.startswith("qwen exited without printing Qwen Code's JSON events (first line: 'hello')")
