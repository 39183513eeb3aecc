"""The kiro adapter on a constructed kiro-cli transcript (tests/fixtures/agents/kiro-*).

Kiro prints plain text; the fixtures hold each line with the stream it went to. A stand-in kiro-cli
prints them on those streams and exits with the recorded code.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from loope.agents.catalog import KIRO_READ_TOOLS
from loope.agents.kiro import KiroAgent
from tests.unit.adapter_fakes import FIXTURES, actions, make_request, messages, run_agent


def kiro_body(tmp_path: Path, fixture: str) -> str:
    """Shell lines replaying a ``{"stream", "line"}`` transcript on stdout and stderr (in the test's workspace)."""
    text = (FIXTURES / fixture).read_text().replace("/work/proj", str(tmp_path / "workspace"))
    lines = [json.loads(ln) for ln in text.splitlines() if ln.strip()]
    out = "\n".join(d["line"] for d in lines if d.get("stream") == "stdout") + "\n"
    err = "\n".join(d["line"] for d in lines if d.get("stream") == "stderr") + "\n"
    (tmp_path / "out.txt").write_text(out)
    (tmp_path / "err.txt").write_text(err)
    code = next(d["exit_code"] for d in lines if "exit_code" in d)
    quoted = shlex.quote(str(tmp_path))
    return f"cat {quoted}/out.txt\ncat {quoted}/err.txt >&2\nexit {code}"


def test_argv_for_writers_readers_and_a_model(tmp_path):
    agent = KiroAgent("claude-sonnet-4.5", options={"bin": "kiro-cli"})
    request = make_request(tmp_path)
    write = agent.argv(request)
    read = agent.argv(make_request(tmp_path, role="reviewer"))

    assert write == [
        "kiro-cli",
        "chat",
        "--no-interactive",
        "--wrap",
        "never",
        "--trust-all-tools",
        "--model",
        "claude-sonnet-4.5",
        "--",
        request.prompt,
    ]
    assert f"--trust-tools={KIRO_READ_TOOLS}" in read
    assert "--trust-all-tools" not in read


def test_success_tool_lines_final_text_and_credits(tmp_path):
    result, events = run_agent(KiroAgent, tmp_path, kiro_body(tmp_path, "kiro-ok.jsonl"))

    assert result.ok, result.error
    assert actions(events) == [("read", "hello.txt"), ("edit", "hello.txt"), ("command", "ls")]
    # The text after the last tool; tool output (the ls listing, the diff) is not part of it.
    assert result.message == "Done: hello.txt now says goodbye world."
    assert messages(events) == ["kiro-cli used 0.31 credits"]
    assert (result.input_tokens, result.output_tokens, result.cost_usd) == (0, 0, 0.0)


def test_a_rejected_key_exits_0_and_is_still_a_failure(tmp_path):
    result, _ = run_agent(KiroAgent, tmp_path, kiro_body(tmp_path, "kiro-bad-key.jsonl"))
    assert not result.ok
    assert result.exit_code == 0
    assert result.error is not None
    assert result.error.startswith(
        "kiro-cli exited 0 without its credits line, so no turn ran:"
        " Authentication failed. Please check your KIRO_API_KEY."
    )
    assert "not logged in" in result.error


def test_a_plain_answer_without_tools_is_the_message(tmp_path):
    body = "printf '> Looks right.\\nVERDICT: PASS\\n'\necho ' ▸ Credits: 0.02 • Time: 2s' >&2\nexit 0"
    result, events = run_agent(KiroAgent, tmp_path, body, role="reviewer")
    assert result.ok, result.error
    assert result.message == "Looks right.\nVERDICT: PASS"
    assert actions(events) == []


def test_garbage_output(tmp_path):
    result, _ = run_agent(KiroAgent, tmp_path, "echo 'hello'\nexit 0")
    assert result.error == "kiro-cli exited 0 without its credits line, so no turn ran"
