"""The codex adapter on recorded Codex CLI 0.171.0 output (tests/fixtures/agents/codex-*).

Each recorded stdout is replayed by a stand-in program run through the adapter for real: the same
process, parsing, judging and costing path a real ``codex exec --json`` goes through.
"""

from __future__ import annotations

import shlex

import pytest

from loope.agents import registry
from loope.agents.catalog import CODEX_DEFAULT_PRICE
from loope.agents.codex import CodexAgent
from loope.agents.pricing import price_for
from tests.unit.adapter_fakes import (
    FIXTURES,
    actions,
    fake_binary,
    make_request,
    messages,
    replay,
    run_agent,
    usages,
)

PATCH_RUN = "/work/scratch/codex/ws/t-writer-patch"  # where codex-writer-apply-patch.jsonl was recorded
NOUSERNS_PATCH_RUN = "/work/scratch/codex/ws/t-nouserns-patch"
EDIT = "import pathlib;p=pathlib.Path('calc.py');p.write_text(p.read_text().replace('a - b','a + b'))"
SHELL_FIX = f'python3 -c "{EDIT}"'
METADATA_WARNING = (
    "codex warning: Model metadata for `some-model` not found. Defaulting to fallback metadata;"
    " this can degrade performance and cause issues."
)


@pytest.fixture(autouse=True)
def codex_home(tmp_path, monkeypatch):
    """The adapter reads codex's config.toml for the model: never the real ~/.codex."""
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    return home


def priced(model: str, tokens_in: int, tokens_out: int) -> float:
    price_in, price_out = price_for(model) or (0.0, 0.0)
    return round((tokens_in * price_in + tokens_out * price_out) / 1_000_000, 6)


# -- the command line ----------------------------------------------------------------------------


def test_argv_for_writers_and_readers(tmp_path):
    agent = CodexAgent(options={"bin": "codex"})
    writer = make_request(tmp_path)

    assert agent.argv(writer) == [
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--ephemeral",
        "-C",
        str(writer.workspace),
        "-s",
        "workspace-write",
        "-c",
        "analytics.enabled=false",
        "--disable",
        "unbounded_connection_retries",
        "-",
    ]
    for role in ("reviewer", "verifier", "critic"):
        read = agent.argv(make_request(tmp_path, role=role))
        assert read[read.index("-s") + 1] == "read-only"
        assert "workspace-write" not in read


def test_the_spec_model_and_loope_toml_args_reach_the_command_line(tmp_path):
    args = ["-c", 'model_provider="local"', "--disable", "plugins"]
    agent = registry.create(registry.parse("codex:gpt-5-mini"), {"args": args})
    argv = agent.argv(make_request(tmp_path))

    assert argv[argv.index("-m") + 1] == "gpt-5-mini"
    assert argv[-5:] == [*args, "-"]  # the user's args, then "-": the prompt comes on stdin


def test_the_spec_model_wins_over_a_model_in_the_args(tmp_path):
    # codex refuses -m twice (exit 2): the spec's model (flags win over loope.toml) replaces the args' one.
    agent = CodexAgent("gpt-5", options={"args": ["-m", "o3", "--model=o4-mini", "--oss"]})
    argv = agent.argv(make_request(tmp_path))

    assert [a for a in argv if a in ("-m", "--model") or a.startswith("--model=")] == ["-m"]
    assert argv[argv.index("-m") + 1] == "gpt-5"
    assert "--oss" in argv


@pytest.mark.parametrize("sandbox", [["-s", "danger-full-access"], ["--sandbox=danger-full-access"]])
def test_a_sandbox_in_the_args_replaces_the_adapters_own(tmp_path, sandbox):
    # In a container without user namespaces codex's sandbox cannot start; the container is the sandbox.
    argv = CodexAgent(options={"args": sandbox}).argv(make_request(tmp_path, role="reviewer"))

    assert "read-only" not in argv
    assert argv.count("-s") == sandbox.count("-s")


def test_the_prompt_travels_on_stdin(tmp_path):
    body = f'cat > {tmp_path}/stdin.txt\nfor a in "$@"; do printf "%s\\n" "$a"; done > {tmp_path}/args.txt\nexit 0'
    request = make_request(tmp_path, prompt="-starts with a dash\nand spans lines", timeout_s=60)
    CodexAgent(options={"bin": fake_binary(tmp_path, body)}).run(request)

    assert (tmp_path / "stdin.txt").read_text() == request.prompt
    assert (tmp_path / "args.txt").read_text().splitlines()[-1] == "-"


def test_isolate_home_points_codex_home_at_a_private_dir_that_exists(tmp_path, codex_home):
    env = CodexAgent().environment(make_request(tmp_path, isolate_home=True))
    assert env["CODEX_HOME"] == str(tmp_path / "step" / "home")
    assert (tmp_path / "step" / "home").is_dir()  # codex refuses a CODEX_HOME that does not exist

    shared = CodexAgent().environment(make_request(tmp_path))
    assert shared["CODEX_HOME"] == str(codex_home)  # the user's own, untouched


# -- successful runs -----------------------------------------------------------------------------


def test_shell_fix_events_message_tokens_and_estimated_cost(tmp_path):
    result, events = replay(CodexAgent, tmp_path, "codex-writer-shell.jsonl")

    assert result.ok, result.error
    # The command without codex's /bin/bash -lc wrapper, shown once (when it started).
    assert actions(events) == [("command", SHELL_FIX)]
    assert result.message.startswith("Done: fixed add() in calc.py.")
    assert messages(events) == [METADATA_WARNING, result.message]
    assert [(u.input_tokens, u.output_tokens, u.cost_usd) for u in usages(events)] == [(200, 40, None)]
    assert (result.input_tokens, result.output_tokens) == (200, 40)
    # No model named anywhere: priced at the table's codex entry, and flagged as an estimate.
    assert result.model is None
    assert result.cost_usd == priced(CODEX_DEFAULT_PRICE, 200, 40)
    assert result.cost_usd > 0
    assert result.cost_estimated is True
    assert result.last_action == f"run {SHELL_FIX}"


def test_apply_patch_is_an_edit_of_the_workspace_relative_path(tmp_path):
    result, events = replay(CodexAgent, tmp_path, "codex-writer-apply-patch.jsonl", recorded=PATCH_RUN, model="gpt-5.5")

    assert result.ok, result.error
    assert actions(events) == [("edit", "calc.py")]  # item.started and item.completed: one action
    assert result.model == "gpt-5.5"
    assert result.cost_usd == priced("gpt-5.5", 200, 40)


def test_reasoning_is_not_the_answer_and_cached_input_is_counted_once(tmp_path):
    result, events = replay(CodexAgent, tmp_path, "codex-reasoning.jsonl", role="reviewer", model="gpt-5-mini")

    assert result.ok, result.error
    assert result.message == "All good.\nVERDICT: PASS"
    assert not any("Thinking" in m for m in messages(events))
    # turn.completed: input_tokens 1000 of which 300 cached, output_tokens 50 of which 7 reasoning.
    assert (result.input_tokens, result.output_tokens) == (1000, 50)
    assert result.cost_usd == priced("gpt-5-mini", 1000, 50)
    assert result.cost_estimated is True


def test_the_final_message_is_the_last_agent_message(tmp_path):
    lines = (FIXTURES / "codex-reviewer.jsonl").read_text().splitlines()
    early = '{"type":"item.completed","item":{"id":"item_9","type":"agent_message","text":"Let me read calc.py."}}'
    transcript = tmp_path / "two-messages.jsonl"
    transcript.write_text("\n".join([*lines[:3], early, *lines[3:]]) + "\n")

    result, events = run_agent(CodexAgent, tmp_path, f"cat {shlex.quote(str(transcript))}")

    assert result.ok, result.error
    assert messages(events)[-2:] == ["Let me read calc.py.", "I reviewed the change. Looks correct.\n\nVERDICT: PASS"]
    assert result.message == "I reviewed the change. Looks correct.\n\nVERDICT: PASS"


@pytest.mark.parametrize(
    ("args", "config", "expected"),
    [
        (["-m", "o3"], None, "o3"),
        (["--model=o4-mini"], None, "o4-mini"),
        (["-c", 'model="gpt-4.1"'], None, "gpt-4.1"),
        ([], 'model = "gpt-5-nano"\n[model_providers.x]\nname = "x"\n', "gpt-5-nano"),
    ],
)
def test_the_model_for_the_price_comes_from_the_args_or_config_toml(tmp_path, codex_home, args, config, expected):
    if config:
        (codex_home / "config.toml").write_text(config)

    result, _ = replay(CodexAgent, tmp_path, "codex-reviewer.jsonl", options={"args": args})

    assert result.model == expected
    assert result.cost_usd == priced(expected, 100, 20)
    assert result.cost_estimated is True


def test_a_model_the_price_table_does_not_know_is_priced_at_the_default_entry(tmp_path):
    result, _ = replay(CodexAgent, tmp_path, "codex-reviewer.jsonl", model="some-model")

    assert result.model == "some-model"
    assert result.cost_usd == priced(CODEX_DEFAULT_PRICE, 100, 20)
    assert result.cost_estimated is True


def test_loope_toml_prices_override_the_table(tmp_path):
    options = {"prices": {"some-model": [0.0, 0.0]}}  # a local model: free, and still flagged an estimate
    result, _ = replay(CodexAgent, tmp_path, "codex-reviewer.jsonl", model="some-model", options=options)

    assert (result.cost_usd, result.cost_estimated) == (0.0, True)


def test_a_turn_without_usage_costs_nothing_and_estimates_nothing(tmp_path):
    result, events = replay(CodexAgent, tmp_path, "codex-minimal-tool.jsonl")

    assert result.ok, result.error
    assert actions(events) == [("command", "echo minimal-tool-ok")]
    assert (result.input_tokens, result.output_tokens, result.cost_usd, result.cost_estimated) == (0, 0, 0.0, False)


def test_a_write_refused_by_the_read_only_sandbox_is_shown_but_is_not_a_failure(tmp_path):
    result, events = replay(CodexAgent, tmp_path, "codex-readonly-shell-blocked.jsonl", role="reviewer")

    assert result.ok, result.error
    assert actions(events) == [("command", SHELL_FIX)]
    assert "command failed (exit 1): OSError: [Errno 30] Read-only file system: 'calc.py'" in messages(events)


def test_a_rejected_patch_leaves_no_trace_in_the_events(tmp_path):
    # codex only tells the model (exit 0, no file_change item): loope's guard and diff see the files.
    result, events = replay(CodexAgent, tmp_path, "codex-readonly-patch-rejected.jsonl", role="reviewer")

    assert result.ok, result.error
    assert actions(events) == []
    assert "patch rejected" in result.message


def test_non_json_lines_do_not_break_the_parse(tmp_path):
    lines = (FIXTURES / "codex-writer-shell.jsonl").read_text().splitlines()
    noisy = tmp_path / "noisy.jsonl"
    noisy.write_text("\n".join([lines[0], "WARNING: something", "{not json", "[1]", '{"type": 3}', *lines[1:]]) + "\n")

    result, events = run_agent(CodexAgent, tmp_path, f"cat {shlex.quote(str(noisy))}")

    assert result.ok, result.error
    assert actions(events) == [("command", SHELL_FIX)]
    assert result.input_tokens == 200


# -- failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("codex-401.jsonl", ["unexpected status 401 Unauthorized: Incorrect API key provided", "not logged in"]),
        ("codex-401-retries.jsonl", ["401 Unauthorized", "not logged in"]),
        ("codex-429.jsonl", ["429 Too Many Requests", "rate limited by the model provider"]),
        ("codex-400.jsonl", ["API error: scripted HTTP 400"]),
        ("codex-missing-key.jsonl", ["Missing environment variable: `FAKE_KEY`", "codex login"]),
        ("codex-truncated-retries.jsonl", ["stream disconnected before completion: stream closed before"]),
    ],
)
def test_a_failed_turn_fails_the_step_with_its_reason(tmp_path, fixture, expected):
    result, _ = replay(CodexAgent, tmp_path, fixture, 1)  # codex exits 1 after turn.failed

    assert not result.ok
    assert result.exit_code == 1
    for part in expected:
        assert part in (result.error or "")
    assert "exit code" not in (result.error or "")  # turn.failed says why; the exit code adds nothing
    assert "Reconnecting" not in (result.error or "")


def test_retry_notices_are_shown_and_are_not_failures(tmp_path):
    result, events = replay(CodexAgent, tmp_path, "codex-401-retries.jsonl", 1)

    retries = [m for m in messages(events) if m.startswith("codex: Reconnecting...")]
    assert len(retries) == 5
    assert retries[0].startswith("codex: Reconnecting... 1/5 (unexpected status 401")

    # The same notices followed by a turn that completes: a success.
    lines = (FIXTURES / "codex-401-retries.jsonl").read_text().splitlines()
    ok = (FIXTURES / "codex-reviewer.jsonl").read_text().splitlines()
    recovered = tmp_path / "recovered.jsonl"
    recovered.write_text("\n".join([*lines[:-2], *ok[3:]]) + "\n")
    result, _ = run_agent(CodexAgent, tmp_path, f"cat {shlex.quote(str(recovered))}")
    assert result.ok, result.error


def test_a_failed_turn_fails_the_step_even_with_exit_0(tmp_path):
    result, _ = replay(CodexAgent, tmp_path, "codex-401.jsonl", 0)

    assert not result.ok
    assert "not logged in" in (result.error or "")


def test_killed_while_retrying_names_the_last_error(tmp_path):
    # An unreachable provider with unbounded retries: codex waits for the network until it is killed.
    path = shlex.quote(str(FIXTURES / "codex-unreachable-unbounded.jsonl"))
    result, _ = run_agent(CodexAgent, tmp_path, f"cat {path}\nkill -KILL $$")

    assert not result.ok
    assert result.error == (
        "codex was killed by SIGKILL before its turn ended;"
        " last error: Reconnecting... waiting for network (Connection failed: error sending request)"
    )


def test_killed_mid_command_names_the_last_action(tmp_path):
    path = shlex.quote(str(FIXTURES / "codex-writer-shell.jsonl"))
    result, _ = run_agent(CodexAgent, tmp_path, f"head -n 4 {path}\nkill -KILL $$")

    assert not result.ok
    assert result.error == f"codex was killed by SIGKILL (last action: run {SHELL_FIX})"


def test_a_hang_is_cut_by_the_step_timeout(tmp_path):
    # A server that accepts the request and never answers: codex waits forever (no timeout of its own).
    path = shlex.quote(str(FIXTURES / "codex-hang-before-headers.jsonl"))
    result, _ = run_agent(CodexAgent, tmp_path, f"cat {path}\nexec sleep 60", timeout_s=0.5)

    assert result.timed_out
    assert not result.ok
    assert (result.error or "").startswith("timed out after 0.5s")


def test_exit_0_before_the_turn_ends_is_a_failure(tmp_path):
    path = shlex.quote(str(FIXTURES / "codex-writer-shell.jsonl"))
    result, _ = run_agent(CodexAgent, tmp_path, f"head -n 4 {path}")

    assert not result.ok
    assert result.error == "codex exited before its final event"


def test_output_that_is_not_codex_json_fails_with_a_clear_reason(tmp_path):
    result, _ = run_agent(CodexAgent, tmp_path, "echo 'hello from something else'")

    assert not result.ok
    assert "Codex CLI's JSON events" in (result.error or "")
    assert "hello from something else" in (result.error or "")


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        ("codex-home-missing.stderr.txt", 'Error finding codex home: CODEX_HOME points to "/tmp/does-not-exist-codex"'),
        ("codex-untrusted-dir.stderr.txt", "Not inside a trusted directory and --skip-git-repo-check"),
    ],
)
def test_a_refusal_to_start_reports_codexs_own_line(tmp_path, stderr, expected):
    body = f"cat {shlex.quote(str(FIXTURES / stderr))} >&2\nexit 1"
    result, _ = run_agent(CodexAgent, tmp_path, body)

    assert not result.ok
    assert (result.error or "").startswith("codex exited with exit code 1: ")
    assert expected in (result.error or "")


def test_a_usage_error_reports_the_error_line_not_the_help_hint(tmp_path):
    body = (
        "echo \"error: the argument '--model <MODEL>' cannot be used multiple times\" >&2\n"
        "echo >&2\necho 'Usage: codex exec [OPTIONS] [PROMPT]' >&2\necho \"For more information, try '--help'.\" >&2\n"
        "exit 2"
    )
    result, _ = run_agent(CodexAgent, tmp_path, body)

    assert result.error == (
        "codex exited with exit code 2: error: the argument '--model <MODEL>' cannot be used multiple times"
    )


def test_a_sandbox_that_cannot_start_fails_the_step_with_the_fix(tmp_path):
    # A container without user namespaces: every command fails, yet codex exits 0 with turn.completed.
    result, events = replay(CodexAgent, tmp_path, "codex-nouserns-shell.jsonl")

    assert not result.ok
    assert "codex's sandbox cannot run commands here (bwrap: Creating new namespace failed" in (result.error or "")
    assert 'args = ["-s", "danger-full-access"]' in (result.error or "")
    assert actions(events) == [("command", SHELL_FIX)]


def test_a_failed_file_change_is_reported(tmp_path):
    result, events = replay(CodexAgent, tmp_path, "codex-nouserns-patch.jsonl", recorded=NOUSERNS_PATCH_RUN)

    # Not a failure by itself (the gate judges the files), but said where the live view shows it.
    assert result.ok, result.error
    assert actions(events) == [("edit", "calc.py")]
    assert "codex could not change calc.py" in messages(events)


def test_preflight_names_a_missing_codex(tmp_path, monkeypatch):
    monkeypatch.delenv("LOOPE_CODEX_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))

    assert CodexAgent().preflight(tmp_path) == (
        "codex is not installed (codex not found on PATH); install it with: npm install -g @openai/codex"
    )
