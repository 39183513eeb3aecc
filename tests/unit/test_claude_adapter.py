"""The claude adapter on recorded Claude Code output (tests/fixtures/agents/claude-*.jsonl).

A recorded transcript is replayed by a stand-in program (a shell script that prints it and exits
with the recorded code) run through the adapter for real: the same process, parsing and judging
path a real ``claude`` goes through.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from loope.agents import registry
from loope.agents.base import AgentEvent, AgentRequest, AgentResult
from loope.agents.claude import ClaudeAgent
from tests.unit.adapter_fakes import actions, fake_binary, messages, usages

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"


def make_request(tmp_path: Path, role: str = "implementer", **overrides) -> AgentRequest:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    fields = {
        "role": role,
        "prompt": "Fix add() in calc.py",
        "workspace": workspace,
        "step_dir": tmp_path / "step",
        "run_id": "0001-fix-add",
        "run_dir": tmp_path,
        "iteration": 1,
        "state_file": workspace / ".loope" / "state.md",
        **overrides,
    }
    return AgentRequest(**fields)


def run_fake(tmp_path: Path, body: str, **request) -> tuple[AgentResult, list[AgentEvent]]:
    events: list[AgentEvent] = []
    agent = ClaudeAgent(options={"bin": fake_binary(tmp_path, body, "fake-claude")})
    result = agent.run(make_request(tmp_path, on_event=events.append, **request))
    return result, events


def replay(tmp_path: Path, name: str, exit_code: int = 0, **request) -> tuple[AgentResult, list[AgentEvent]]:
    """Run the adapter on a recorded transcript, exiting as the recorded run did."""
    return run_fake(tmp_path, f"cat {shlex.quote(str(FIXTURES / name))}\nexit {exit_code}", **request)


# -- a successful run -----------------------------------------------------------------------------


def test_success_events_message_tokens_and_reported_cost(tmp_path):
    result, events = replay(tmp_path, "claude-success.jsonl")

    assert result.ok, result.error
    assert result.message == "Fixed: add() now returns a + b."
    # Absolute paths in the workspace claude reported are shown relative to it.
    assert actions(events) == [("read", "calc.py"), ("edit", "calc.py"), ("command", 'python -c "print(1)"')]
    assert messages(events) == ["Let me look at calc.py.", "Fixed: add() now returns a + b."]
    # Only the result line counts: one usage event, the CLI's own totals and cost.
    assert [(u.input_tokens, u.output_tokens, u.cost_usd) for u in usages(events)] == [(4000, 400, 0.024)]
    assert (result.input_tokens, result.output_tokens, result.cost_usd) == (4000, 400, 0.024)
    assert result.cost_estimated is False
    assert result.model == "claude-opus-5-5"
    assert result.last_action == 'run python -c "print(1)"'


def test_loop_step_counts_cache_reads_as_input_once(tmp_path):
    result, events = replay(tmp_path, "claude-loop-fix.jsonl")

    assert result.ok, result.error
    # 4 replies of 1000 input + 500 cache-read + 100 output tokens.
    assert (result.input_tokens, result.output_tokens) == (6000, 400)
    assert result.cost_usd == pytest.approx(0.0122)
    assert len(usages(events)) == 1
    assert result.model == "claude-sonnet-5-5"
    assert [a for a, _ in actions(events)] == ["read", "edit", "command"]
    assert actions(events)[1] == ("edit", "calc.py")
    assert "pytest" in (actions(events)[2][1] or "")


def test_refused_tool_is_reported_but_is_not_a_failure(tmp_path):
    result, events = replay(tmp_path, "claude-bash-denied.jsonl")

    assert result.ok, result.error
    assert "claude was refused Bash: This command requires approval" in messages(events)
    assert "requires approval" not in result.message


def test_plan_mode_refusals_are_reported(tmp_path):
    result, events = replay(tmp_path, "claude-plan-mode.jsonl", role="reviewer")

    assert result.ok, result.error
    refusals = [m for m in messages(events) if m.startswith("claude was refused")]
    assert len(refusals) == 2
    assert "refused Edit" in refusals[0]
    assert "plan mode" in refusals[0]
    assert ("edit", "calc.py") in actions(events)  # what it tried is still shown


def test_stream_error_fallback_counts_the_billed_tokens(tmp_path):
    result, _ = replay(tmp_path, "claude-stream-error-fallback.jsonl")

    assert result.ok, result.error
    # usage.input_tokens says 400 (every failed attempt); modelUsage and the cost count the billed 100.
    assert (result.input_tokens, result.output_tokens, result.cost_usd) == (100, 20, 0.0008)


def test_partial_message_lines_are_ignored(tmp_path):
    result, events = replay(tmp_path, "claude-partial-messages.jsonl")

    assert result.ok, result.error
    assert messages(events) == ["Hello, I am the fake model."]
    assert result.message == "Hello, I am the fake model."


def test_non_json_lines_do_not_break_the_parse(tmp_path):
    noisy = tmp_path / "noisy.jsonl"
    lines = (FIXTURES / "claude-success.jsonl").read_text().splitlines()
    junk = ["Warning: no stdin data received in 3s", "{not json", "[1, 2]", '"a string"', "{}", '{"type": 3}']
    noisy.write_text("\n".join([lines[0], *junk, *lines[1:]]) + "\n")

    result, events = run_fake(tmp_path, f"cat {shlex.quote(str(noisy))}")

    assert result.ok, result.error
    assert actions(events) == [("read", "calc.py"), ("edit", "calc.py"), ("command", 'python -c "print(1)"')]
    assert result.cost_usd == 0.024


# -- failures -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("claude-budget.jsonl", ["stopped by its spending cap", "Reached maximum budget ($0.0001)"]),
        ("claude-max-turns.jsonl", ["turn limit", "Reached maximum number of turns (2)"]),
        ("claude-401.jsonl", ["Failed to authenticate", "401", "not logged in"]),
        ("claude-429.jsonl", ["Request rejected (429)", "rate limited by the model provider"]),
        ("claude-500.jsonl", ["API Error: 500", "server-side issue"]),
        ("claude-connection-refused.jsonl", ["Connection refused", "connection_failed"]),
    ],
)
def test_error_results_fail_the_step_with_their_reason(tmp_path, fixture, expected):
    result, _ = replay(tmp_path, fixture, exit_code=1)  # claude exits 1 with every error result

    assert not result.ok
    assert result.exit_code == 1
    for part in expected:
        assert part in (result.error or "")
    assert "exit code" not in (result.error or "")  # the result line says why; the exit code adds nothing


def test_an_error_result_fails_the_step_even_with_exit_0(tmp_path):
    result, _ = replay(tmp_path, "claude-401.jsonl", exit_code=0)

    assert not result.ok
    assert "not logged in" in (result.error or "")


def test_the_spending_cap_still_counts_what_was_spent(tmp_path):
    result, _ = replay(tmp_path, "claude-budget.jsonl", exit_code=1)

    # usage is all zeros on this line; modelUsage holds the billed reply.
    assert (result.input_tokens, result.output_tokens, result.cost_usd) == (1000, 100, 0.006)
    assert result.cost_estimated is False


def test_api_retries_are_shown_as_they_happen(tmp_path):
    _, events = replay(tmp_path, "claude-429.jsonl", exit_code=1)

    retries = [m for m in messages(events) if m.startswith("API error")]
    assert retries == ["API error 429; retry 1 of 2", "API error 429; retry 2 of 2"]


def test_output_that_is_not_stream_json_fails_with_a_clear_reason(tmp_path):
    result, _ = run_fake(tmp_path, "echo 'hello from something else'")

    assert not result.ok
    assert "without printing Claude Code's JSON events" in (result.error or "")
    assert "hello from something else" in (result.error or "")


def test_a_crash_before_the_result_line_reports_the_exit_and_stderr(tmp_path):
    head = shlex.quote(str(FIXTURES / "claude-success.jsonl"))
    result, _ = run_fake(tmp_path, f"head -n 3 {head}\necho 'TypeError: boom' >&2\nexit 2")

    assert not result.ok
    assert "exit code 2" in (result.error or "")
    assert "before its final event" in (result.error or "")
    assert "TypeError: boom" in (result.error or "")


def test_killed_by_a_signal_says_so_and_estimates_the_usage_seen(tmp_path):
    head = shlex.quote(str(FIXTURES / "claude-success.jsonl"))
    result, events = run_fake(tmp_path, f"head -n 3 {head}\nkill -KILL $$")

    assert not result.ok
    assert result.error == "claude was killed by SIGKILL (last action: read calc.py)"
    # No result line: the assistant lines' usage (one reply, counted once) is priced as an estimate.
    assert (result.input_tokens, result.output_tokens) == (1000, 1)
    assert result.cost_estimated is True
    assert result.cost_usd > 0
    assert len(usages(events)) == 1


def test_usage_seen_counts_every_reply_once_however_many_there_were(tmp_path):
    # 2000 replies (more than the session keeps by id), each on two lines (one per content block).
    line = (
        '{"type":"assistant","message":{"id":"m"$1"","model":"claude-sonnet-4-5",'
        '"usage":{"input_tokens":3,"output_tokens":2},"content":[{"type":"text","text":"part"}]}}'
    )
    awk = line.replace('"', '\\"').replace('\\"$1\\"', '" $1 "')
    result, _ = run_fake(tmp_path, f'seq 2000 | awk \'{{print "{awk}"; print "{awk}"}}\'\nkill -KILL $$')

    assert not result.ok
    assert (result.input_tokens, result.output_tokens) == (2000 * 3, 2000 * 2)


def test_a_timeout_keeps_the_usage_seen(tmp_path):
    head = shlex.quote(str(FIXTURES / "claude-success.jsonl"))
    result, _ = run_fake(tmp_path, f"head -n 3 {head}\nexec sleep 60", timeout_s=0.5)

    assert result.timed_out
    assert "last action: read calc.py" in (result.error or "")
    assert result.input_tokens == 1000
    assert result.cost_estimated is True


def test_paths_outside_the_workspace_stay_absolute(tmp_path):
    agent = ClaudeAgent()
    session = agent.new_session(make_request(tmp_path))
    line = (
        '{"type":"assistant","message":{"id":"m1","content":['
        '{"type":"tool_use","name":"Read","input":{"file_path":"/etc/hosts"}},'
        f'{{"type":"tool_use","name":"Write","input":{{"file_path":"{tmp_path}/workspace/src/new.py"}}}},'
        '{"type":"tool_use","name":"Grep","input":{"pattern":"def add"}},'
        '{"type":"tool_use","name":"Agent","input":{"prompt":"look around"}}]}}'
    )
    events = list(agent.parse_line(line, session))

    assert actions(events) == [
        ("read", "/etc/hosts"),
        ("write", "src/new.py"),
        ("search", "def add"),
        ("other", "Agent"),
    ]


# -- the command line and environment -------------------------------------------------------------


def test_write_roles_accept_edits_and_allow_bash(tmp_path):
    argv = ClaudeAgent().argv(make_request(tmp_path, role="implementer"))

    assert argv[:5] == ["claude", "-p", "--output-format", "stream-json", "--verbose"]
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert argv[argv.index("--allowedTools") + 1] == "Bash"
    assert "--dangerously-skip-permissions" not in argv
    assert "--model" not in argv
    assert "--max-budget-usd" not in argv


@pytest.mark.parametrize("role", ["reviewer", "verifier", "critic"])
def test_read_roles_run_in_plan_mode(tmp_path, role):
    argv = ClaudeAgent().argv(make_request(tmp_path, role=role))

    assert argv[argv.index("--permission-mode") + 1] == "plan"
    assert "--allowedTools" not in argv


def test_model_budget_and_extra_args(tmp_path):
    agent = registry.create(registry.parse("claude:opus"), {"args": ["--add-dir", "../shared"], "bin": "/opt/claude"})
    assert isinstance(agent, ClaudeAgent)

    argv = agent.argv(make_request(tmp_path, max_budget_usd=0.4))

    assert argv[0] == "/opt/claude"
    assert argv[argv.index("--model") + 1] == "opus"
    assert argv[argv.index("--max-budget-usd") + 1] == "0.4"
    assert argv[-2:] == ["--add-dir", "../shared"]


def test_a_tiny_remaining_budget_is_still_a_valid_cap(tmp_path):
    argv = ClaudeAgent().argv(make_request(tmp_path, max_budget_usd=0.0))

    assert float(argv[argv.index("--max-budget-usd") + 1]) > 0  # claude rejects 0


def test_binary_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOPE_CLAUDE_BIN", "/somewhere/claude")

    assert ClaudeAgent().argv(make_request(tmp_path))[0] == "/somewhere/claude"


def test_environment_quiets_claude_and_isolates_its_config(tmp_path, monkeypatch):
    monkeypatch.delenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", raising=False)
    request = make_request(tmp_path, isolate_home=True)

    env = ClaudeAgent().environment(request)

    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["CLAUDE_CONFIG_DIR"] == str(request.step_dir / "home")
    assert env["LOOPE_ROLE"] == "implementer"


def test_environment_keeps_a_users_own_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "0")

    assert ClaudeAgent().environment(make_request(tmp_path))["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "0"


def test_preflight_names_the_install_command(tmp_path):
    missing = ClaudeAgent(options={"bin": "claude-not-installed-anywhere"}).preflight(tmp_path)
    assert missing is not None
    assert "npm install -g @anthropic-ai/claude-code" in missing
    assert ClaudeAgent(options={"bin": fake_binary(tmp_path, "exit 0", "fake-claude")}).preflight(tmp_path) is None
    assert "does not exist" in (ClaudeAgent(options={"bin": "./nope/claude"}).preflight(tmp_path) or "")


def test_adapter_info():
    info = registry.info("claude")

    assert info.binary == "claude"
    assert "plan" in info.read_only
    assert info.cost_source == "reported (total_cost_usd)"
    assert "ANTHROPIC_API_KEY" in info.auth_env
    assert ".claude/.credentials.json" in info.login_files
    assert ClaudeAgent.home_env == ("CLAUDE_CONFIG_DIR",)


def test_claude_is_told_it_is_sandboxed_only_when_loopes_sandbox_holds_the_step(tmp_path, monkeypatch):
    from loope.sandbox import bwrap
    from tests.unit.adapter_fakes import sandbox_around

    if not bwrap.support().works:
        pytest.skip(f"needs bubblewrap: {bwrap.support().reason}")
    monkeypatch.delenv("IS_SANDBOX", raising=False)
    (tmp_path / "workspace").mkdir(exist_ok=True)
    sandboxed = make_request(tmp_path, sandbox=sandbox_around(tmp_path / "workspace", tmp_path))
    unsandboxed = make_request(tmp_path)

    # As root, Claude Code refuses its bypass modes unless told it is sandboxed; only a sandboxed step is.
    assert (ClaudeAgent().environment(sandboxed).get("IS_SANDBOX") == "1") is (os.geteuid() == 0)
    assert "IS_SANDBOX" not in ClaudeAgent().environment(unsandboxed)
