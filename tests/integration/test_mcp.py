"""``loope mcp`` end to end: the SDK's own stdio client against the server in a subprocess,
real git projects, scripted exec: agents, real pytest as the gate, detached runners."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import FIX, FIXED_CALC, GATE, Project, gone

DEADLINE_S = 90.0
ACTIONS = ["start", "status", "stop", "list", "show", "apply"]


class Loop:
    """A connected client of ``loope mcp`` and its one tool."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, **arguments: Any) -> dict[str, Any]:
        """The tool's structured result; fails the test on a tool error."""
        result = await self.session.call_tool("loop", arguments)
        text = result.content[0].text  # type: ignore[union-attr]
        assert not result.is_error, text
        assert result.structured_content == json.loads(text)
        return dict(result.structured_content or {})

    async def error(self, name: str = "loop", **arguments: Any) -> str:
        """The tool error's one line; fails the test when the call succeeds."""
        result = await self.session.call_tool(name, arguments)
        text = result.content[0].text  # type: ignore[union-attr]
        assert result.is_error, text
        assert "\n" not in text, text
        assert "Traceback" not in text, text
        return text

    async def finished(self, loop_id: str) -> dict[str, Any]:
        """Poll ``status`` until the loop is no longer running (a deadline, not a timing assertion)."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            info = await self.call(action="status", loop_id=loop_id)
            if info["loop"]["status"] != "running":
                return info
            assert time.monotonic() < deadline, f"loop {loop_id} still running: {info['loop']}"
            await asyncio.sleep(0.2)


@asynccontextmanager
async def connect(workdir: Path, *args: str) -> AsyncIterator[Loop]:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "loope", "mcp", "--workdir", str(workdir), *args],
        cwd=str(workdir),
        env={"NO_COLOR": "1"},
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield Loop(session)


def serve(workdir: Path, scenario: Callable[[Loop], Awaitable[None]]) -> None:
    """Run ``scenario`` against a ``loope mcp`` server for ``workdir``."""

    async def main() -> None:
        async with connect(workdir) as loop:
            await scenario(loop)

    asyncio.run(main())


@pytest.fixture(autouse=True)
def _no_runner_left(project: Project) -> Iterator[None]:
    """A test that fails mid-loop must not leave a detached runner behind."""
    yield
    for root in project.runs():
        try:
            pid = json.loads((root / "run.json").read_text()).get("pid")
            if json.loads((root / "run.json").read_text()).get("status") == "running" and pid:
                os.killpg(pid, signal.SIGKILL)
        except (OSError, ValueError):
            continue


def test_the_server_lists_one_tool_loop_with_its_actions_and_limits(project: Project) -> None:
    async def scenario(loop: Loop) -> None:
        tools = (await loop.session.list_tools()).tools
        assert [t.name for t in tools] == ["loop"]
        schema = tools[0].input_schema
        assert schema["properties"]["action"]["enum"] == ACTIONS
        assert schema["required"] == ["action"]
        assert schema["additionalProperties"] is False
        assert schema["properties"]["max_iterations"]["maximum"] == 200
        assert schema["properties"]["max_cost_usd"]["maximum"] == 50
        assert schema["properties"]["goal"]["anyOf"][0]["maxLength"] == 10_000
        assert all(p.get("description") for p in schema["properties"].values())
        assert "NONE unless you list them" in (tools[0].description or "")

    serve(project.path, scenario)


def test_a_loop_started_over_mcp_converges_and_is_listed_shown_and_applied(project: Project, agent_script) -> None:
    implementer = agent_script(FIX)

    async def scenario(loop: Loop) -> None:
        started = await loop.call(
            action="start", goal="fix add in calc.py", implementer=implementer, verify_command=GATE
        )
        assert started["status"] == "running"
        loop_id = started["loop_id"]
        assert loop_id.startswith("0001-fix-add")
        assert (started["max_iterations"], started["max_cost_usd"], started["reviewers"]) == (20, 5.0, [])
        listed = await loop.call(action="list", include_finished=True)
        assert [entry["id"] for entry in listed["loops"]] == [loop_id]

        info = await loop.finished("0001")  # a unique prefix will do
        assert (info["loop"]["id"], info["loop"]["status"], info["loop"]["stop_reason"]) == (
            loop_id,
            "converged",
            "converged",
        )
        assert info["loop"]["iteration"] == 1
        assert info["frontmatter"]["loop_id"] == loop_id
        assert info["state_excerpt"].startswith("---\nloop_id: ")
        assert len(info["state_excerpt"].splitlines()) <= 40

        assert await loop.call(action="list") == {"count": 0, "loops": []}  # only running loops
        finished = await loop.call(action="list", include_finished=True)
        assert finished["count"] == 1
        assert (finished["loops"][0]["id"], finished["loops"][0]["status"]) == (loop_id, "converged")

        shown = await loop.call(action="show", loop_id=loop_id)
        assert "**Outcome:** converged in 1 iteration" in shown["report"]
        assert (shown["run"]["status"], shown["run"]["converged"]) == ("converged", True)
        assert shown["run"]["changes"]["files"][0]["path"] == "calc.py"
        assert "diff" not in shown
        with_diff = await loop.call(action="show", loop_id=loop_id, diff=True)
        assert "+    return a + b" in with_diff["diff"]

        planned = await loop.call(action="apply", loop_id=loop_id, dry_run=True)
        assert [(p["path"], p["action"], p["conflict"]) for p in planned["plan"]] == [("calc.py", "update", None)]
        assert planned["applied"] is False
        assert "return a - b" in project.read("calc.py")

        applied = await loop.call(action="apply", loop_id=loop_id)
        assert (applied["applied"], applied["files_written"]) == (True, 1)
        assert project.read("calc.py") == FIXED_CALC

    serve(project.path, scenario)


def test_apply_refuses_a_file_changed_since_the_loop_started_unless_forced(project: Project, agent_script) -> None:
    async def scenario(loop: Loop) -> None:
        started = await loop.call(
            action="start", goal="fix add", implementer=agent_script(FIX), verify_command=GATE, max_iterations=2
        )
        await loop.finished(started["loop_id"])
        project.write("calc.py", "def add(a, b):\n    return b + a  # mine\n")

        refused = await loop.call(action="apply", loop_id=started["loop_id"])
        assert refused["applied"] is False
        assert refused["plan"][0]["conflict"] == "changed since the run started"
        assert "pass force=true" in refused["detail"]
        assert "# mine" in project.read("calc.py")

        forced = await loop.call(action="apply", loop_id=started["loop_id"], force=True)
        assert forced["applied"] is True
        assert project.read("calc.py") == FIXED_CALC

    serve(project.path, scenario)


def test_a_slow_loop_is_stopped_and_ends_as_stopped(project: Project, agent_script, tmp_path: Path) -> None:
    # loope.toml still applies under the tool's values, but reviewers are only those the caller names.
    project.write("loope.toml", 'max_iters = 7\nreviewers = ["codex"]\n')
    pids = tmp_path / "slow-agent.json"
    slow = agent_script(
        f"""
        import time
        pathlib.Path({str(pids)!r}).write_text(json.dumps(os.getpid()))
        time.sleep(300)
        """
    )

    async def scenario(loop: Loop) -> None:
        started = await loop.call(action="start", goal="take your time", implementer=slow, verify_command=GATE)
        loop_id = started["loop_id"]
        assert (started["max_iterations"], started["reviewers"]) == (7, [])
        running = await loop.call(action="list")
        assert (running["count"], running["loops"][0]["id"], running["loops"][0]["status"]) == (1, loop_id, "running")

        deadline = time.monotonic() + DEADLINE_S
        while not pids.exists():  # the step is in flight
            assert time.monotonic() < deadline, "the slow agent never started"
            await asyncio.sleep(0.1)
        agent = json.loads(pids.read_text())

        stopped = await loop.call(action="stop", loop_id=loop_id, now=True)
        assert (stopped["stop_requested"], stopped["loop_id"]) == (True, loop_id)
        info = await loop.finished(loop_id)
        assert (info["loop"]["status"], info["loop"]["stop_reason"]) == ("stopped", "stopped")
        assert gone(agent)
        assert await loop.call(action="list") == {"count": 0, "loops": []}

        again = await loop.call(action="stop", loop_id=loop_id)
        assert (again["stop_requested"], again["status"]) == (False, "stopped")

    serve(project.path, scenario)


def test_explicit_budgets_win_over_loope_toml(project: Project, agent_script) -> None:
    project.write("loope.toml", "max_iters = 7\nmax_cost = 2.5\n")

    async def scenario(loop: Loop) -> None:
        started = await loop.call(
            action="start",
            goal="fix add",
            implementer=agent_script(FIX),
            verify_command=GATE,
            max_iterations=4,
            max_tick_duration_minutes=2,
            checkpoint_interval=0,
        )
        assert (started["max_iterations"], started["max_cost_usd"]) == (4, 2.5)
        await loop.finished(started["loop_id"])
        spec = json.loads((project.runs()[-1] / "spec.json").read_text())
        assert (spec["max_iters"], spec["max_cost"], spec["timeout"], spec["reviewers"]) == (4, 2.5, 120.0, [])

    serve(project.path, scenario)


BAD_INPUT = [
    ({"action": "start", "goal": "fix add", "max_iterations": 500}, "max_iterations must be at most 200 (got 500)"),
    ({"action": "start", "goal": "x" * 10_001}, "goal must be at most 10000 characters (got 10001)"),
    (
        {"action": "start", "goal": "fix add", "max_tick_duration_minutes": 0},
        "max_tick_duration_minutes must be at least 1 (got 0)",
    ),
    (
        {"action": "start", "goal": "fix add", "max_tick_duration_minutes": 61},
        "max_tick_duration_minutes must be at most 60 (got 61)",
    ),
    ({"action": "start", "goal": "fix add", "max_cost_usd": 80}, "max_cost_usd must be at most 50 (got 80)"),
    ({"action": "start", "goal": "fix add", "checkpoint_interval": 201}, "checkpoint_interval must be at most 200"),
    ({"action": "start", "goal": "fix add", "colour": "red"}, "unknown field 'colour'; the loop tool takes: action,"),
    ({"action": "restart"}, "action must be one of start, status, stop, list, show, apply (got 'restart')"),
    ({}, "action is required"),
    ({"action": "start"}, "goal is required to start a loop"),
    ({"action": "start", "goal": "   "}, "goal is empty"),
    ({"action": "status"}, "loop_id is required for action 'status'"),
    ({"action": "start", "goal": "x", "metric_command": "echo 1"}, "direction ('lower' or 'higher') is required"),
    ({"action": "start", "goal": "fix add", "direction": "up"}, "direction must be 'lower' or 'higher' (got 'up')"),
    (
        {"action": "start", "goal": "fix add", "implementer": "nosuchagent"},
        "unknown agent 'nosuchagent'; known agents:",
    ),
    ({"action": "start", "goal": "fix add", "workspace": "no/such/dir"}, "does not exist or is not a directory"),
    ({"action": "status", "loop_id": "0042"}, "no runs in"),
    ({"action": "start", "goal": "fix add", "notify": ["pager:ops"]}, "unknown kind 'pager'"),
    ({"action": "start", "goal": "fix add", "reviewers": ["codex"] * 9}, "reviewers takes at most 8 items (got 9)"),
]


def test_out_of_range_and_unknown_input_are_tool_errors_naming_the_field_and_limit(project: Project) -> None:
    async def scenario(loop: Loop) -> None:
        for arguments, expected in BAD_INPUT:
            message = await loop.error(**arguments)
            assert expected in message, (arguments, message)
        assert "this server has one tool, 'loop'" in await loop.error("loops", action="list")

    serve(project.path, scenario)
    assert not (project.path / ".loope" / "runs").exists() or project.runs() == []  # nothing half-started


@pytest.mark.parametrize("client", ["claude", "codex", "cursor"])
def test_print_config_gives_a_snippet_each_client_parses(project: Project, client: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loope", "mcp", "--print-config", client],
        cwd=project.path,
        capture_output=True,
        text=True,
        check=True,
    )
    if client == "codex":
        server = tomllib.loads(done.stdout)["mcp_servers"]["loope"]
        assert "~/.codex/config.toml" in done.stderr
    else:
        server = json.loads(done.stdout)["mcpServers"]["loope"]
    command = Path(server["command"])
    assert command.is_absolute()
    assert os.access(command, os.X_OK)
    assert server["args"][-3:] == ["mcp", "--workdir", str(project.path.resolve())]
    if client == "claude":
        assert f"claude mcp add loope -- {command}" in done.stderr
    if client == "cursor":
        assert ".cursor/mcp.json" in done.stderr


def test_the_printed_config_starts_a_working_server(project: Project) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loope", "mcp", "--print-config", "cursor"],
        cwd=project.path,
        capture_output=True,
        text=True,
        check=True,
    )
    server = json.loads(done.stdout)["mcpServers"]["loope"]

    async def main() -> None:
        params = StdioServerParameters(command=server["command"], args=server["args"], cwd="/")
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("loop", {"action": "list", "include_finished": True})
            assert not result.is_error
            assert result.structured_content == {"count": 0, "loops": []}

    asyncio.run(main())
