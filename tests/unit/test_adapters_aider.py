"""The aider adapter on recorded aider 0.86.2 runs (tests/fixtures/agents/aider-*).

Aider prints no event stream: a stand-in aider replays the recorded stdout and writes the recorded
analytics log and chat history where its ``--analytics-log`` and ``--chat-history-file`` say.
"""

from __future__ import annotations

import shlex

import pytest

from loope.agents.aider import ANALYTICS_FILE, HISTORY_FILE, AiderAgent
from tests.unit.adapter_fakes import FIXTURES, actions, make_request, messages, run_agent, usages

REPLY = """I'll change hello to goodbye in hello.txt.

hello.txt
```
<<<<<<< SEARCH
hello world
=======
goodbye world
>>>>>>> REPLACE
```

Then list the files:

```bash
ls
```"""


def aider_body(name: str, exit_code: int = 0, *, files: bool = True) -> str:
    """A stand-in aider replaying the recorded run ``name`` (stdout, analytics log, chat history)."""
    body = ""
    if files:
        analytics = shlex.quote(str(FIXTURES / f"{name}.analytics.jsonl"))
        history = shlex.quote(str(FIXTURES / f"{name}.history.md"))
        body = (
            'prev=""\nfor arg in "$@"; do\n'
            f'  [ "$prev" = --analytics-log ] && cp {analytics} "$arg"\n'
            f'  [ "$prev" = --chat-history-file ] && cp {history} "$arg"\n'
            '  prev="$arg"\ndone\n'
        )
    return body + f"cat {shlex.quote(str(FIXTURES / f'{name}.stdout.txt'))}\nexit {exit_code}"


def test_argv_for_writers_readers_and_a_model(tmp_path):
    agent = AiderAgent("openai/gpt-4o", options={"bin": "aider", "args": ["--map-tokens", "0"]})
    request = make_request(tmp_path)
    write = agent.argv(request)
    read = agent.argv(make_request(tmp_path, role="reviewer"))

    assert write[:3] == ["aider", f"--message={request.prompt}", "--yes-always"]
    step = tmp_path / "step"
    assert write[write.index("--analytics-log") + 1] == str(step / ANALYTICS_FILE)
    assert write[write.index("--chat-history-file") + 1] == str(step / HISTORY_FILE)
    # Aider must not commit, touch .gitignore, or write its history into the workspace.
    assert {"--no-auto-commits", "--no-dirty-commits", "--no-gitignore", "--no-analytics"} <= set(write)
    assert write[-4:] == ["--model", "openai/gpt-4o", "--map-tokens", "0"]
    assert "--dry-run" not in write
    assert read[read.index("--chat-mode") + 1] == "ask"
    assert "--dry-run" in read


def test_success_edit_reply_and_tokens_from_the_analytics_log(tmp_path):
    result, events = run_agent(AiderAgent, tmp_path, aider_body("aider-ok"), model="openai/gpt-4o")

    assert result.ok, result.error
    assert actions(events) == [("read", "hello.txt"), ("edit", "hello.txt")]
    # The reply as the history keeps it, blank lines and all; not the commit message aider printed after it.
    assert result.message == REPLY
    assert messages(events) == [result.message]
    assert [(u.input_tokens, u.output_tokens, u.cost_usd) for u in usages(events)] == [(1500, 30, None)]
    # aider logged cost 0 (it did not know the mock model's price): the tokens are priced as gpt-4o.
    assert result.cost_estimated
    assert result.cost_usd == pytest.approx(1500 * 2.5e-6 + 30 * 10e-6)


def test_a_failed_model_call_after_exit_0_is_a_failed_step(tmp_path):
    result, events = run_agent(AiderAgent, tmp_path, aider_body("aider-401"), model="openai/mock-model")

    assert not result.ok
    assert result.exit_code == 0
    assert result.error is not None
    assert result.error.startswith(
        "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided (mock)"
    )
    assert "not logged in" in result.error
    assert usages(events) == []
    assert result.message == ""  # no reply in the history: none of aider's banner lines


def test_the_repo_map_cache_aider_leaves_in_the_workspace_is_removed(tmp_path):
    workspace = tmp_path / "workspace"
    (workspace / ".aider.tags.cache.v3").mkdir(parents=True)  # the user's own: kept
    body = "mkdir -p .aider.tags.cache.v4 && touch .aider.tags.cache.v4/cache.db\n" + aider_body("aider-ok")
    result, _ = run_agent(AiderAgent, tmp_path, body)
    assert result.ok, result.error
    assert sorted(p.name for p in workspace.iterdir()) == [".aider.tags.cache.v3"]


def test_the_stdout_error_line_decides_when_aider_wrote_no_files(tmp_path):
    result, _ = run_agent(AiderAgent, tmp_path, aider_body("aider-401", files=False))
    assert result.error is not None
    # The error line was wrapped on stdout; its pieces are joined again.
    assert result.error.startswith(
        "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided (mock)"
        " The API provider is not able to authenticate you."
    )
    assert result.message.startswith("Aider v0.86.2")  # no history: the message is what stdout showed


def test_a_call_that_started_and_never_finished_is_a_failure(tmp_path):
    (tmp_path / "analytics.jsonl").write_text('{"event": "message_send_starting", "properties": {}}\n')
    copy = f'[ "$prev" = --analytics-log ] && cp {tmp_path}/analytics.jsonl "$arg"'
    body = f'prev=""\nfor arg in "$@"; do {copy}; prev="$arg"; done\n'
    result, _ = run_agent(AiderAgent, tmp_path, body + "echo 'Aider v0.86.2'\nexit 0")
    assert result.error == "aider's model call did not complete"


def test_no_model_and_no_key_is_named(tmp_path):
    # The lines aider printed before waiting for an OpenRouter login (from a real run's chat history).
    lines = ["No LLM model was specified and no API keys were provided.", "Waiting up to 5 minutes ..."]
    result, _ = run_agent(AiderAgent, tmp_path, "".join(f"echo '{ln}'\n" for ln in lines) + "exit 0")
    assert result.error is not None
    assert result.error.startswith("aider found no model and no API key and waited for an OpenRouter login")


def test_garbage_output_is_no_success(tmp_path):
    result, _ = run_agent(AiderAgent, tmp_path, "echo 'hello there'\nexit 0")
    assert result.error == (
        "aider exited without calling its model (no message_send in its analytics log): hello there"
    )


def test_a_setup_error_exit_code(tmp_path):
    result, _ = run_agent(AiderAgent, tmp_path, "echo 'aider: error: unrecognized arguments: --bogus' >&2\nexit 2")
    assert result.error == "aider exited with exit code 2: aider: error: unrecognized arguments: --bogus"
