"""``loope run`` driving the real Claude Code CLI against the scripted model server, with real pytest as the gate."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from loope.agents.pricing import estimate
from tests.conftest import GATE, Project, run_file
from tests.e2e.conftest import REVIEW_TOKENS, codex_sandbox
from tests.e2e.model_server import (
    Fail,
    MessagesRequest,
    ModelServer,
    ResponsesRequest,
    Scripted,
    Turn,
    Usage,
    reply,
    text,
    tool_use,
)

pytestmark = pytest.mark.e2e

# Every scripted reply reports these tokens; claude prices them itself (sonnet: $2/$10 per MTok, cache read $0.1).
USAGE = Usage(input_tokens=1000, output_tokens=100, cache_read_input_tokens=500)
RIGHT = "return a + b"
WRONG = "return abs(a) + abs(b)"


def return_line(request: MessagesRequest) -> str:
    """The ``return`` line of calc.py, from the Read result in the latest request (``N\\t<line>``, or
    ``N→<line>`` from the Claude Code the ACP adapter bundles)."""
    found = re.search(r"return [^\n]*", request.tool_results()[0]["content"])
    assert found is not None, request.tool_results()
    return found.group(0).strip()


def implementer_script(request: MessagesRequest) -> Turn | Fail:
    """Read, then Edit: a wrong fix first; the right one once the prompt names the failing test."""
    if not request.main:
        return reply(text("Fix add"))
    calc = f"{request.cwd}/calc.py"
    fed_back = "test_add_negative" in request.prompt
    if request.turn == 0:
        return reply(text("Let me look at calc.py."), tool_use("Read", file_path=calc), usage=USAGE)
    if request.turn == 1:
        new = RIGHT if fed_back else WRONG
        return reply(tool_use("Edit", file_path=calc, old_string=return_line(request), new_string=new), usage=USAGE)
    if request.turn == 2 and fed_back:
        command = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"
        return reply(tool_use("Bash", command=command, description="Run the tests"), usage=USAGE)
    summary = "add() now returns a + b; the tests pass." if fed_back else "add() now adds the absolute values."
    return reply(text(summary), usage=USAGE)


def step_dirs(project: Project, role: str) -> list[Path]:
    return sorted((project.runs()[-1] / "agents").glob(f"*-{role}-claude"))


def transcript(step: Path) -> list[dict]:
    return [json.loads(line) for line in (step / "transcript.jsonl").read_text().splitlines() if line.strip()]


def reported_cost(step: Path) -> float:
    (result,) = [line for line in transcript(step) if line.get("type") == "result"]
    return float(result["total_cost_usd"])


def events(step: Path) -> list[dict]:
    return [json.loads(line) for line in (step / "events.jsonl").read_text().splitlines()]


def run_loop(cli, project: Project, *args: str):
    # Sandboxed wherever bubblewrap works (the real CLI inside loope's sandbox).
    argv = ("run", "Fix add() in calc.py", "--verify-cmd", GATE, "--timeout", "120", "--sandbox", "auto", *args)
    return cli(*argv, cwd=project.path)


def test_claude_fixes_the_bug_in_two_iterations_from_gate_feedback(
    project, cli, use_claude, model_server: ModelServer, e2e_reviewer
):
    use_claude(implementer_script)

    result = run_loop(cli, project, "--implementer", "claude:sonnet", "--isolate-home", *e2e_reviewer)

    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["status"], run["converged"], run["iterations"]) == ("converged", True, 2)
    first, second = step_dirs(project, "implementer")
    # Tokens come from the result line alone (cache reads count as input): 3 replies, then 4.
    steps = [s for s in run["steps"] if s["role"] == "implementer"]
    assert [(s["input_tokens"], s["output_tokens"]) for s in steps] == [(4500, 300), (6000, 400)]
    assert [s["model"] for s in steps] == ["claude-sonnet-5-5"] * 2
    assert [s["cost_estimated"] for s in steps] == [False, False]  # claude's own figure
    # codex reviewed once, read-only, after the gate passed (iteration 1's gate failed: no review).
    (review,) = [s for s in run["steps"] if s["role"] == "reviewer"]
    assert (review["iteration"], review["ok"], review["verdict"], review["violations"]) == (2, True, "PASS", [])
    assert (review["adapter"], review["model"]) == ("codex:gpt-5.5", "gpt-5.5")
    # codex sums its three responses' tokens (cached input inside input) and reports no USD: estimated.
    tokens_in, tokens_out = 3 * REVIEW_TOKENS.input_tokens, 3 * REVIEW_TOKENS.output_tokens
    assert (review["input_tokens"], review["output_tokens"]) == (tokens_in, tokens_out)
    assert review["cost_estimated"] is True
    assert review["cost_usd"] == estimate("gpt-5.5", tokens_in, tokens_out)
    # Totals add reported and estimated USD alike; one estimated step flags the total as an estimate.
    totals = run["totals"]
    assert totals["cost_usd"] == pytest.approx(
        reported_cost(first) + reported_cost(second) + review["cost_usd"], abs=1e-6
    )
    assert totals["cost_estimated"] is True
    assert (totals["input_tokens"], totals["output_tokens"]) == (4500 + 6000 + tokens_in, 300 + 400 + tokens_out)
    # The read-only sandbox refused the reviewer's scripted append; codex itself says it ran read-only.
    reviews = [ResponsesRequest(r.body, r.headers) for r in model_server.requests_for("openai")]
    assert len(reviews) == 3
    assert {(r.model, r.sandbox_mode, r.metadata.get("analytics_enabled")) for r in reviews} == {
        ("gpt-5.5", codex_sandbox("read-only"), False)
    }
    read, append = reviews[-1].outputs()
    assert f"def add(a, b):\n    {RIGHT}" in read
    assert "calc.py: Read-only file system" in append
    (codex_step,) = sorted((project.runs()[-1] / "agents").glob("*-reviewer-codex"))
    assert ("command", "cat calc.py") in [(e.get("action"), e.get("target")) for e in events(codex_step)]
    assert any((codex_step / "home").iterdir())  # --isolate-home: codex's CODEX_HOME was the step's own dir
    for step in (first, second):
        actions = [(e["action"], e["target"]) for e in events(step) if e["kind"] == "action"]
        assert ("read", "calc.py") in actions
        assert ("edit", "calc.py") in actions
        assert any((step / "home").iterdir())  # --isolate-home: claude kept its config in the step's own dir
    assert "test_add_negative" not in (first / "prompt.md").read_text()
    assert "test_add_negative" in (second / "prompt.md").read_text()
    assert run_file(run, "calc.py") == f"def add(a, b):\n    {RIGHT}\n"
    assert project.read("calc.py") == "def add(a, b):\n    return a - b\n"  # the user's tree is untouched
    # Bash runs headless in write roles: the agent's own pytest run passed.
    requests = [MessagesRequest(r.body) for r in model_server.requests_for("anthropic")]
    assert {r.model for r in requests} == {"claude-sonnet-5-5"}
    bash_results = [t for r in requests for t in r.tool_results() if "passed" in t["content"]]
    assert len(bash_results) == 1
    assert not bash_results[0]["is_error"]
    assert "2 passed" in bash_results[0]["content"]


def reviewer_script(request: MessagesRequest) -> Turn | Fail:
    """A reviewer that reads calc.py, tries to edit it, and passes the change."""
    if not request.main:
        return reply(text("Review"))
    calc = f"{request.cwd}/calc.py"
    if request.turn == 0:
        return reply(tool_use("Read", file_path=calc))
    if request.turn == 1:
        return reply(tool_use("Edit", file_path=calc, old_string=return_line(request), new_string="return a * b"))
    return reply(text("The fix is right.\n\nVERDICT: PASS"))


def test_claude_reviewer_in_plan_mode_cannot_edit(project, cli, agent_script, use_claude, model_server: ModelServer):
    use_claude(reviewer_script)
    implementer = agent_script(
        """
        pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a + b\\n")
        print("fixed add")
        """
    )

    result = run_loop(cli, project, "--implementer", implementer, "--reviewer", "claude")

    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert run["status"] == "converged"
    (review,) = [s for s in run["steps"] if s["role"] == "reviewer"]
    assert (review["ok"], review["verdict"], review["violations"]) == (True, "PASS", [])
    (step,) = step_dirs(project, "reviewer")
    init = transcript(step)[0]
    assert init["permissionMode"] == "plan"
    assert ("edit", "calc.py") in [(e.get("action"), e.get("target")) for e in events(step)]
    assert any("refused Edit" in e.get("text", "") for e in events(step))
    # Claude itself refused the edit (the guard had nothing to undo): the model saw the refusal.
    after_edit = MessagesRequest(model_server.requests_for("anthropic")[-1].body).tool_results()
    assert after_edit[0]["is_error"]
    assert "plan mode" in after_edit[0]["content"]
    assert run_file(run, "calc.py") == "def add(a, b):\n    return a + b\n"


def test_claude_unauthorized_fails_the_step_with_a_login_message(project, cli, use_claude, model_server: ModelServer):
    use_claude(Scripted(Fail(401, "invalid x-api-key")))

    result = run_loop(cli, project, "--implementer", "claude", "--no-review")

    assert result.exit_code == 1
    run = project.run_json()
    assert run["stop_reason"] == "step_failed"
    assert "401" in run["stop_detail"]
    assert "not logged in" in run["stop_detail"]
    assert len(model_server.requests_for("anthropic")) == 1  # never retried
    (step,) = [s for s in run["steps"] if s["role"] == "implementer"]
    assert step["ok"] is False


def test_claude_rate_limited_fails_the_step_with_the_rate_limit_message(
    project, cli, use_claude, model_server: ModelServer
):
    use_claude(Scripted(Fail(429, "slow down")))  # and CLAUDE_CODE_MAX_RETRIES=0

    result = run_loop(cli, project, "--implementer", "claude", "--no-review", "--retries", "0")

    assert result.exit_code == 1
    run = project.run_json()
    assert run["stop_reason"] == "step_failed"
    assert "429" in run["stop_detail"]
    assert "rate limited" in run["stop_detail"]
    assert len(model_server.requests_for("anthropic")) == 1


def test_claude_stops_at_the_runs_spending_cap(project, cli, use_claude, model_server: ModelServer):
    def edit_at_once(request: MessagesRequest) -> Turn | Fail:
        if not request.main:
            return reply(text("Fix add"))
        calc = f"{request.cwd}/calc.py"
        return reply(tool_use("Edit", file_path=calc, old_string="return a - b", new_string=RIGHT), usage=USAGE)

    use_claude(edit_at_once)

    result = run_loop(cli, project, "--implementer", "claude:sonnet", "--no-review", "--max-cost", "0.0001")

    assert result.exit_code == 1
    run = project.run_json()
    # The engine stops on the failed step; the money it spent still counts.
    assert run["stop_reason"] in ("step_failed", "budget_exceeded")
    assert "spending cap" in run["stop_detail"]
    assert "$0.0001" in run["stop_detail"]  # claude got the run's remaining budget as --max-budget-usd
    (step_dir,) = step_dirs(project, "implementer")
    assert reported_cost(step_dir) > 0
    assert run["totals"]["cost_usd"] == pytest.approx(reported_cost(step_dir), abs=1e-6)
    assert len(model_server.requests_for("anthropic")) == 1
    # The cap is checked after the reply and before its tool call runs.
    assert run_file(run, "calc.py") == "def add(a, b):\n    return a - b\n"
