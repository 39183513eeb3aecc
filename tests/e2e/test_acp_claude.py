"""``claude-acp``: Zed's real claude-agent-acp driven by loope over ACP, its model scripted on 127.0.0.1.

loope is the ACP client: it answers the agent's permission requests, so a write to a protected
path, or any write of a reviewer, is refused before it happens.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loope.sandbox import bwrap
from tests.conftest import CALC_TESTS, FIX, GATE, Project, run_file
from tests.e2e.conftest import agent_binary, ran_sandboxed
from tests.e2e.model_server import Fail, MessagesRequest, ModelServer, Scripted, Turn, reply, text, tool_use
from tests.e2e.test_claude import RIGHT, implementer_script

pytestmark = pytest.mark.e2e


@pytest.fixture
def use_claude_acp(use_claude, monkeypatch: pytest.MonkeyPatch):
    """``use_claude`` (the Anthropic API scripted, a private config dir), with loope's claude-acp pointed at
    the installed claude-agent-acp."""

    def mount(script):
        api = use_claude(script)
        monkeypatch.setenv("LOOPE_CLAUDE_ACP_BIN", str(agent_binary("claude-agent-acp")))
        # The bundled Claude Code refuses to start as root (as CI runs) unless it is told it is sandboxed:
        # inside loope's sandbox loope says so itself; without it, the test does.
        monkeypatch.delenv("IS_SANDBOX", raising=False)
        if not bwrap.support().works:
            monkeypatch.setenv("IS_SANDBOX", "1")
        return api

    return mount


def steps(project: Project, role: str) -> list[Path]:
    return sorted((project.runs()[-1] / "agents").glob(f"*-{role}-claude-acp"))


def events(step: Path) -> list[dict]:
    return [json.loads(line) for line in (step / "events.jsonl").read_text().splitlines()]


def run_loop(cli, project: Project, *args: str):
    return cli("run", "Fix add() in calc.py", "--verify-cmd", GATE, "--timeout", "120", *args, cwd=project.path)


def test_claude_acp_fixes_the_bug_in_two_iterations_from_gate_feedback(project, cli, use_claude_acp) -> None:
    use_claude_acp(implementer_script)

    result = run_loop(cli, project, "--implementer", "claude-acp", "--no-review")

    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["status"], run["converged"], run["iterations"]) == ("converged", True, 2)
    first, second = steps(project, "implementer")
    for step in (first, second):
        actions = [(e["action"], e["target"]) for e in events(step) if e["kind"] == "action"]
        assert ("read", "calc.py") in actions
        assert ("edit", "calc.py") in actions
        transcript = (step / "transcript.jsonl").read_text()
        assert '"method": "session/new"' in transcript
        assert '"method": "session/request_permission"' in transcript
    implementer = [s for s in run["steps"] if s["role"] == "implementer"]
    assert all(s["cost_usd"] > 0 for s in implementer)
    assert run_file(run, "calc.py") == f"def add(a, b):\n    {RIGHT}\n"
    assert project.read("calc.py") == "def add(a, b):\n    return a - b\n"
    assert ran_sandboxed(project) is bwrap.support().works  # claude-agent-acp inside loope's sandbox


def test_a_write_to_a_protected_test_file_is_refused_at_the_permission_request(
    project, cli, use_claude_acp, model_server: ModelServer
) -> None:
    def script(request: MessagesRequest) -> Turn:
        if not request.main:
            return reply(text("Fix add"))
        tests = f"{request.cwd}/tests/test_calc.py"
        if request.turn == 0:  # Claude Code writes an existing file only after reading it
            return reply(tool_use("Read", file_path=tests))
        if request.turn == 1:
            return reply(tool_use("Write", file_path=tests, content="def test_nothing():\n    pass\n"))
        return reply(text("I could not change the tests."))

    use_claude_acp(script)
    result = run_loop(
        cli, project, "--implementer", "claude-acp", "--no-review", "--max-iters", "1", "--protect", "tests/**"
    )

    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    assert run_file(run, "tests/test_calc.py") == CALC_TESTS  # never written, not reverted
    (step,) = steps(project, "implementer")
    said = [e["text"] for e in events(step) if e["kind"] == "message"]
    assert "loope refuses: tests/test_calc.py is protected; leave it as it is" in said
    (refused,) = [r for r in model_server.requests_for("anthropic") if MessagesRequest(r.body).turn == 2]
    (answer,) = MessagesRequest(refused.body).tool_results()
    assert answer["is_error"]
    assert run["steps"][0]["violations"] == []  # nothing reached the disk for the guard to undo
    # Claude Code only hears "User refused permission": loope's reason follows in the same session.
    assert any("tests/test_calc.py is protected" in json.dumps(r.body) for r in model_server.requests_for("anthropic"))


def test_a_reviewers_attempted_edit_is_refused(project, cli, agent_script, use_claude_acp) -> None:
    def reviewer(request: MessagesRequest) -> Turn:
        if not request.main:
            return reply(text("Review"))
        calc = f"{request.cwd}/calc.py"
        if request.turn == 0:
            return reply(tool_use("Read", file_path=calc))
        if request.turn == 1:
            return reply(tool_use("Write", file_path=calc, content="# reviewed\n"))
        return reply(text("add() returns the sum.\n\nVERDICT: PASS"))

    use_claude_acp(reviewer)
    result = run_loop(cli, project, "--implementer", agent_script(FIX), "--reviewer", "claude-acp")

    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    (review,) = [s for s in run["steps"] if s["role"] == "reviewer"]
    assert (review["verdict"], review["violations"]) == ("PASS", [])
    (step,) = steps(project, "reviewer")
    said = [e["text"] for e in events(step) if e["kind"] == "message"]
    assert "loope refuses: the reviewer is read-only and may not edit anything" in said
    assert run_file(run, "calc.py") == f"def add(a, b):\n    {RIGHT}\n"


MARKER = "3217.5"


def test_a_timeout_cancels_the_session_and_leaves_no_process(project, cli, use_claude_acp) -> None:
    def script(request: MessagesRequest) -> Turn:
        if not request.main:
            return reply(text("Wait"))
        if request.turn == 0:
            return reply(tool_use("Bash", command=f"sleep {MARKER}", description="Wait a while"))
        return reply(text("done"))

    use_claude_acp(script)
    result = cli(
        "run", "Fix add()", "--verify-cmd", GATE, "--timeout", "30", "--implementer", "claude-acp", "--no-review",
        cwd=project.path,
    )  # fmt: skip

    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    assert run["stop_reason"] == "timed_out"
    (step,) = steps(project, "implementer")
    transcript = (step / "transcript.jsonl").read_text()
    assert '"method": "session/cancel"' in transcript
    assert ("command", f"sleep {MARKER}") in [(e.get("action"), e.get("target")) for e in events(step)]
    assert not [pid for pid in _pids() if MARKER in _cmdline(pid)], "the agent's sleep outlived its step"


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_a_rate_limit_is_retried_as_for_every_adapter(project, cli, use_claude_acp, model_server: ModelServer) -> None:
    use_claude_acp(Scripted(Fail(429, "slow down", retry_after=0)))  # and CLAUDE_CODE_MAX_RETRIES=0

    result = run_loop(cli, project, "--implementer", "claude-acp", "--no-review", "--retries", "1")

    assert result.exit_code == 1
    run = project.run_json()
    assert run["stop_reason"] == "step_failed"
    assert "429" in run["stop_detail"]
    assert "rate limited by the model provider" in run["stop_detail"]
    (step,) = steps(project, "implementer")
    assert len((step / "attempts.jsonl").read_text().splitlines()) == 1  # tried once more after the 429
    main = [r for r in model_server.requests_for("anthropic") if MessagesRequest(r.body).main]
    assert len(main) == 2
