"""The real Claude Code CLI as the MCP client of ``loope mcp``, its model scripted on 127.0.0.1.

Claude Code is configured exactly as ``loope mcp --print-config claude`` says (the ``.mcp.json``
snippet and the ``--allowedTools`` line for ``claude -p``); the scripted model calls loope's tools
and reads their results, as a user's model would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIX, FIXED_CALC, GATE, Project
from tests.e2e.model_server import MessagesRequest, Turn, reply, text, tool_use

pytestmark = pytest.mark.e2e

TOOLS = ["loope_start", "loope_status", "loope_list", "loope_show", "loope_stop", "loope_apply"]
WAIT_S = 120


def loop_id_in(request: MessagesRequest) -> str:
    """The loop id from the loope_start result the model got back."""
    for message in request.messages:
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                content = block.get("content")
                raw = content if isinstance(content, str) else "".join(str(c.get("text", "")) for c in content or [])
                if '"loop_id"' in raw:
                    return str(json.loads(raw)["loop_id"])
    raise AssertionError("no loope_start result in the conversation")


def scripted_user(implementer: str):
    """Start a loop, wait on it, apply it, then ask about a loop that does not exist."""

    def script(request: MessagesRequest) -> Turn:
        if not request.main:
            return reply(text("Run a loope loop"))
        if request.turn == 0:  # Claude Code defers MCP tools: their schemas load through ToolSearch
            return reply(tool_use("ToolSearch", query="select:" + ",".join(f"mcp__loope__{t}" for t in TOOLS)))
        if request.turn == 1:
            return reply(
                text("Starting a loop."),
                tool_use(
                    "mcp__loope__loope_start",
                    goal="fix add() in calc.py",
                    implementer=implementer,
                    verify_command=GATE,
                ),
            )
        loop_id = loop_id_in(request)
        if request.turn == 2:
            return reply(tool_use("mcp__loope__loope_status", loop_id=loop_id, wait_s=WAIT_S))
        if request.turn == 3:
            return reply(tool_use("mcp__loope__loope_apply", loop_id=loop_id))
        if request.turn == 4:
            return reply(tool_use("mcp__loope__loope_show", loop_id="0099"))
        return reply(text("The loop converged and its fix is applied."))

    return script


@pytest.fixture
def loope_config(project: Project, tmp_path: Path) -> tuple[Path, list[str]]:
    """The MCP config file and the ``--allowedTools`` value, both as ``--print-config claude`` prints them."""
    printed = subprocess.run(
        [sys.executable, "-m", "loope", "mcp", "--print-config", "claude"],
        cwd=project.path,
        capture_output=True,
        text=True,
        check=True,
    )
    config = tmp_path / "mcp.json"
    config.write_text(printed.stdout)
    allowed = next(line.split()[-1] for line in printed.stderr.splitlines() if "--allowedTools" in line)
    return config, ["--allowedTools", allowed]


@pytest.fixture
def _no_runner_left(project: Project) -> Iterator[None]:
    yield
    for root in project.runs():
        record = json.loads((root / "run.json").read_text())
        if record.get("status") == "running" and record.get("pid"):
            os.killpg(record["pid"], signal.SIGKILL)


def tool_results(requests: list[MessagesRequest]) -> list[dict[str, Any]]:
    """The tool result each main request carried, in order (the first carries none)."""
    return [r.tool_results()[0] for r in requests if r.main and r.turn > 0]


@pytest.mark.usefixtures("_no_runner_left")
def test_claude_code_starts_waits_on_and_applies_a_loop_through_loopes_tools(
    project: Project, agent_script, use_claude, claude_bin: Path, loope_config
) -> None:
    seen: list[MessagesRequest] = []
    script = scripted_user(agent_script(FIX))

    def recording(request: MessagesRequest) -> Turn:
        seen.append(request)
        return script(request)

    use_claude(recording)
    config, allowed = loope_config
    prompt = "Fix add() with a loope loop, then apply it."
    argv = [str(claude_bin), "-p", prompt, "--mcp-config", str(config), "--strict-mcp-config", *allowed]
    done = subprocess.run(
        [*argv, "--output-format", "json"],
        check=False,
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stdout + done.stderr

    # The tools Claude Code offered its model: loope's six by name, then their schemas through ToolSearch.
    first = next(r for r in seen if r.main)
    deferred = json.dumps(first.body)
    assert all(f"mcp__loope__{name}\\n" in deferred for name in TOOLS)
    assert "mcp__loope__loop\\n" not in deferred
    searched, started, waited, applied, missing = tool_results(seen)[:5]
    assert not searched["is_error"], searched
    after_search = [r for r in seen if r.main][1]
    offered = {t["name"]: t for t in after_search.body["tools"] if t["name"].startswith("mcp__loope__")}
    assert sorted(offered) == sorted(f"mcp__loope__{name}" for name in TOOLS)
    for tool in offered.values():
        schema = json.dumps(tool["input_schema"])
        assert "anyOf" not in schema, schema
        assert '"title"' not in schema, schema
        assert tool["description"]
    assert offered["mcp__loope__loope_status"]["input_schema"]["properties"]["wait_s"]["maximum"] == 300

    assert not started["is_error"], started
    status = json.loads(waited["content"])
    assert (status["status"], status["stop_reason"], status["iteration"]) == ("converged", "converged", 1)
    assert status["waited_s"] < WAIT_S  # it returned when the loop converged, before the wait ran out
    result = json.loads(applied["content"])
    assert (result["applied"], result["files_written"]) == (True, 1)
    assert project.read("calc.py") == FIXED_CALC
    assert missing["is_error"]
    assert "no run matches '0099'; loope_list gives the ids" in missing["content"]
    assert json.loads(done.stdout)["result"] == "The loop converged and its fix is applied."
