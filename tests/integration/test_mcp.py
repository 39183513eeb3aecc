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

from tests.conftest import CALC, FIX, FIXED_CALC, GATE, Project, gone

DEADLINE_S = 90.0
TOOLS = ["loope_start", "loope_status", "loope_list", "loope_show", "loope_stop", "loope_apply"]
READ_ONLY = {"loope_status", "loope_list", "loope_show"}
DESTRUCTIVE = {"loope_stop", "loope_apply"}


class Loope:
    """A connected client of ``loope mcp`` and its tools."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The tool's structured result; fails the test on a tool error."""
        result = await self.session.call_tool(tool, arguments)
        text = result.content[0].text  # type: ignore[union-attr]
        assert not result.is_error, text
        assert result.structured_content == json.loads(text)
        return dict(result.structured_content or {})

    async def error(self, tool: str, **arguments: Any) -> str:
        """The tool error's one line; fails the test when the call succeeds."""
        result = await self.session.call_tool(tool, arguments)
        text = result.content[0].text  # type: ignore[union-attr]
        assert result.is_error, text
        assert "\n" not in text, text
        assert "Traceback" not in text, text
        return text

    async def finished(self, loop_id: str) -> dict[str, Any]:
        """Wait with ``loope_status wait_s`` until the loop is no longer running (a deadline, not a timing check)."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            info = await self.call("loope_status", loop_id=loop_id, wait_s=30)
            if info["status"] != "running":
                return info
            assert time.monotonic() < deadline, f"loop {loop_id} still running: {info}"


@asynccontextmanager
async def connect(workdir: Path, *args: str) -> AsyncIterator[Loope]:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "loope", "mcp", "--workdir", str(workdir), *args],
        cwd=str(workdir),
        env={"NO_COLOR": "1"},
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield Loope(session)


def serve(workdir: Path, scenario: Callable[[Loope], Awaitable[None]]) -> None:
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


def test_the_server_lists_loopes_tools_with_honest_annotations_and_plain_schemas(project: Project) -> None:
    async def scenario(loope: Loope) -> None:
        tools = {t.name: t for t in (await loope.session.list_tools()).tools}
        assert list(tools) == TOOLS  # no ``loop`` tool: it would clash with Claude Code's own /loop
        for name, tool in tools.items():
            hints = tool.annotations
            assert hints is not None
            assert hints.read_only_hint is (name in READ_ONLY), name
            assert hints.destructive_hint is (name in DESTRUCTIVE), name
            schema = tool.input_schema
            assert schema["additionalProperties"] is False
            text = json.dumps(schema)
            assert '"title"' not in text, (name, text)
            assert "anyOf" not in text, (name, text)
            assert "null" not in text, (name, text)
            assert all(p.get("description") for p in schema["properties"].values()), name
            assert tool.description
        start = tools["loope_start"].input_schema
        assert start["required"] == ["goal"]
        assert start["properties"]["max_iterations"]["maximum"] == 200
        assert start["properties"]["max_cost_usd"]["maximum"] == 50
        assert start["properties"]["goal"]["maxLength"] == 10_000
        assert start["properties"]["direction"] == {
            "description": "Whether a lower or a higher metric score is better.",
            "enum": ["lower", "higher"],
            "type": "string",
        }
        status = tools["loope_status"].input_schema
        assert status["required"] == ["loop_id"]
        assert status["properties"]["wait_s"]["maximum"] == 300
        assert "instead of sleeping" in (tools["loope_status"].description or "")

    serve(project.path, scenario)


def test_a_loop_started_over_mcp_is_waited_on_listed_shown_and_applied(project: Project, agent_script) -> None:
    # The agent keeps its state file as told, but says nothing of the gate: loope's status is the truth.
    implementer = agent_script(
        FIX
        + "pathlib.Path(os.environ['LOOPE_STATE_FILE']).write_text("
        + repr("---\nstatus: in-progress\niteration: 1\n---\n# Progress\nfixed add\n# Next Action\nrun tests\n")
        + ")\n"
    )

    async def scenario(loope: Loope) -> None:
        started = await loope.call(
            "loope_start", goal="fix add in calc.py", implementer=implementer, verify_command=GATE
        )
        assert started["status"] == "running"
        loop_id = started["loop_id"]
        assert loop_id.startswith("0001-fix-add")
        assert (started["max_iterations"], started["max_cost_usd"], started["reviewers"]) == (20, 5.0, [])
        assert "loope_status" in started["next"]

        # A wait returns as soon as the loop finishes an iteration or ends, never because the wait ran out; the
        # iteration's ledger line may land just before the run's end, so a second call may be needed.
        for _ in range(2):
            info = await loope.call("loope_status", loop_id="0001", wait_s=300)  # a unique prefix will do
            assert info["waited_s"] < 300
            if info["status"] != "running":
                break
            assert info["iteration"] == 1, info
        assert (info["loop_id"], info["status"], info.get("stop_reason")) == (loop_id, "converged", "converged"), info
        assert info["iteration"] == 1
        assert "agent_says" not in info  # the state file's "in-progress" would contradict "converged"
        assert "in-progress" not in json.dumps(info)
        assert "loope_apply" in info["next"]
        assert len(json.dumps(info)) < 500

        listed = await loope.call("loope_list")  # recently finished loops are listed without asking
        assert [(e["loop_id"], e["status"]) for e in listed["loops"]] == [(loop_id, "converged")]
        assert await loope.call("loope_list", all=True) == listed

        shown = await loope.call("loope_show", loop_id=loop_id)
        assert "**Outcome:** converged in 1 iteration" in shown["report"]
        assert (shown["run"]["status"], shown["run"]["converged"]) == ("converged", True)
        assert shown["run"]["changes"]["files"][0]["path"] == "calc.py"
        assert "diff" not in shown
        with_diff = await loope.call("loope_show", loop_id=loop_id, diff=True)
        assert "+    return a + b" in with_diff["diff"]

        planned = await loope.call("loope_apply", loop_id=loop_id, dry_run=True)
        assert planned["plan"] == [{"path": "calc.py", "action": "update"}]
        assert planned["applied"] is False
        assert "return a - b" in project.read("calc.py")

        applied = await loope.call("loope_apply", loop_id=loop_id)
        assert (applied["applied"], applied["files_written"]) == (True, 1)
        assert project.read("calc.py") == FIXED_CALC

    serve(project.path, scenario)
    # The gate compiled calc.py but left no bytecode: a .pyc is trusted by its source's mtime and size, and
    # the fix (a - b to a + b) keeps the size, so one written in the same second would have been judged stale.
    assert not list((project.path / ".loope" / "runs").rglob("*.pyc"))


def test_apply_refuses_a_file_changed_since_the_loop_started_unless_forced(project: Project, agent_script) -> None:
    async def scenario(loope: Loope) -> None:
        started = await loope.call(
            "loope_start", goal="fix add", implementer=agent_script(FIX), verify_command=GATE, max_iterations=2
        )
        await loope.finished(started["loop_id"])
        project.write("calc.py", "def add(a, b):\n    return b + a  # mine\n")

        refused = await loope.call("loope_apply", loop_id=started["loop_id"])
        assert refused["applied"] is False
        assert refused["plan"][0]["conflict"] == "changed since the run started"
        assert "pass force=true" in refused["detail"]
        assert "# mine" in project.read("calc.py")

        forced = await loope.call("loope_apply", loop_id=started["loop_id"], force=True)
        assert forced["applied"] is True
        assert project.read("calc.py") == FIXED_CALC

    serve(project.path, scenario)


def test_a_slow_loop_shows_what_its_agent_says_then_is_stopped(project: Project, agent_script, tmp_path: Path) -> None:
    # loope.toml still applies under the tool's values, but reviewers are only those the caller names.
    # Unsandboxed: the agent reports its pid, which the sandbox's PID namespace would renumber.
    project.write("loope.toml", 'max_iters = 7\nreviewers = ["codex"]\nsandbox = "off"\n')
    pids = tmp_path / "slow-agent.json"
    state = "---\nstatus: in-progress\niteration: 1\n---\n# Progress\nread calc.py\n# Next Action\nfix add()\n"
    slow = agent_script(
        f"""
        import time
        pathlib.Path(os.environ['LOOPE_STATE_FILE']).write_text({state!r})
        pathlib.Path({str(pids) + ".tmp"!r}).write_text(json.dumps(os.getpid()))
        os.replace({str(pids) + ".tmp"!r}, {str(pids)!r})  # whole, so a reader never sees it empty
        time.sleep(300)
        """
    )

    async def scenario(loope: Loope) -> None:
        started = await loope.call("loope_start", goal="take your time", implementer=slow, verify_command=GATE)
        loop_id = started["loop_id"]
        assert (started["max_iterations"], started["reviewers"]) == (7, [])
        running = await loope.call("loope_list")
        assert (running["count"], running["loops"][0]["loop_id"], running["loops"][0]["status"]) == (
            1,
            loop_id,
            "running",
        )

        deadline = time.monotonic() + DEADLINE_S
        while not pids.exists():  # the step is in flight
            assert time.monotonic() < deadline, "the slow agent never started"
            await asyncio.sleep(0.1)
        agent = json.loads(pids.read_text())
        info = await loope.call("loope_status", loop_id=loop_id)
        assert info["status"] == "running"
        assert info["agent_says"] == {"status": "in-progress", "progress": "read calc.py", "next_action": "fix add()"}

        stopped = await loope.call("loope_stop", loop_id=loop_id, now=True)
        assert (stopped["stop_requested"], stopped["loop_id"]) == (True, loop_id)
        info = await loope.finished(loop_id)
        assert (info["status"], info["stop_reason"]) == ("stopped", "stopped")
        assert "agent_says" not in info
        assert gone(agent)
        listed = await loope.call("loope_list")
        assert [(e["loop_id"], e["status"]) for e in listed["loops"]] == [(loop_id, "stopped")]

        again = await loope.call("loope_stop", loop_id=loop_id)
        assert (again["stop_requested"], again["status"]) == (False, "stopped")

    serve(project.path, scenario)


def test_explicit_budgets_win_over_loope_toml(project: Project, agent_script) -> None:
    project.write("loope.toml", "max_iters = 7\nmax_cost = 2.5\n")

    async def scenario(loope: Loope) -> None:
        started = await loope.call(
            "loope_start",
            goal="fix add",
            implementer=agent_script(FIX),
            verify_command=GATE,
            max_iterations=4,
            max_tick_duration_minutes=2,
            checkpoint_interval=0,
        )
        assert (started["max_iterations"], started["max_cost_usd"]) == (4, 2.5)
        await loope.finished(started["loop_id"])
        spec = json.loads((project.runs()[-1] / "spec.json").read_text())
        assert (spec["max_iters"], spec["max_cost"], spec["timeout"], spec["reviewers"]) == (4, 2.5, 120.0, [])

    serve(project.path, scenario)


START = "loope_start"
BAD_INPUT = [
    (START, {"goal": "fix add", "max_iterations": 500}, "max_iterations must be at most 200 (got 500)"),
    (START, {"goal": "x" * 10_001}, "goal must be at most 10000 characters (got 10001)"),
    (
        START,
        {"goal": "fix add", "max_tick_duration_minutes": 0},
        "max_tick_duration_minutes must be at least 1 (got 0)",
    ),
    (START, {"goal": "fix add", "max_tick_duration_minutes": 61}, "max_tick_duration_minutes must be at most 60"),
    (START, {"goal": "fix add", "max_cost_usd": 80}, "max_cost_usd must be at most 50 (got 80)"),
    (START, {"goal": "fix add", "checkpoint_interval": 201}, "checkpoint_interval must be at most 200"),
    (START, {"goal": "fix add", "colour": "red"}, "unknown field 'colour'; loope_start takes: workspace, goal,"),
    (START, {}, "goal is required"),
    (START, {"goal": "   "}, "goal is empty"),
    (START, {"goal": "x", "metric_command": "echo 1"}, "direction ('lower' or 'higher') is required"),
    (START, {"goal": "fix add", "direction": "up"}, "direction must be 'lower' or 'higher' (got 'up')"),
    (START, {"goal": "fix add", "implementer": "nosuchagent"}, "unknown agent 'nosuchagent'; known agents:"),
    (START, {"goal": "fix add", "workspace": "no/such/dir"}, "does not exist or is not a directory"),
    (START, {"goal": "fix add", "notify": ["pager:ops"]}, "unknown kind 'pager'"),
    (START, {"goal": "fix add", "reviewers": ["codex"] * 9}, "reviewers takes at most 8 items (got 9)"),
    ("loope_status", {}, "loop_id is required; loope_list gives the ids"),
    ("loope_status", {"loop_id": "0042"}, "no runs in"),
    ("loope_status", {"loop_id": "0042"}, "start one with loope_start"),
    ("loope_status", {"loop_id": "0001", "wait_s": 301}, "wait_s must be at most 300 (got 301)"),
    ("loope_list", {"include_finished": True}, "unknown field 'include_finished'; loope_list takes: workspace, all"),
    ("loope_apply", {"loop_id": "1", "force": "yes please"}, "force: Input should be a valid boolean"),
]


def test_bad_input_is_a_tool_error_naming_the_field_and_limit(project: Project) -> None:
    async def scenario(loope: Loope) -> None:
        for tool, arguments, expected in BAD_INPUT:
            message = await loope.error(tool, **arguments)
            assert expected in message, (tool, arguments, message)
        message = await loope.error("loop", action="list")
        assert message == (
            "unknown tool 'loop'; loope's tools are loope_start, loope_status, loope_list, loope_show,"
            " loope_stop, loope_apply"
        )

    serve(project.path, scenario)
    assert not (project.path / ".loope" / "runs").exists() or project.runs() == []  # nothing half-started


def test_errors_about_loops_name_the_tools_not_the_cli(project: Project, agent_script) -> None:
    async def scenario(loope: Loope) -> None:
        started = await loope.call("loope_start", goal="fix add", implementer=agent_script(FIX), verify_command=GATE)
        message = await loope.error("loope_show", loop_id="0099")
        assert message == "no run matches '0099'; loope_list gives the ids"
        await loope.finished(started["loop_id"])

    serve(project.path, scenario)


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
        allowed = [line.split()[-1] for line in done.stderr.splitlines() if "--allowedTools" in line]
        assert allowed[0].split(",") == [f"mcp__loope__{name}" for name in TOOLS]
        assert set(allowed[1].split(",")) == {f"mcp__loope__{name}" for name in READ_ONLY}
    if client == "codex":
        assert f"codex mcp add loope -- {command}" in done.stderr
        assert server["tool_timeout_sec"] > 300  # loope_status may wait that long
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
            result = await session.call_tool("loope_list", {"all": True})
            assert not result.is_error
            assert result.structured_content == {"count": 0, "loops": []}

    asyncio.run(main())


def test_a_waiting_status_reports_progress_to_a_caller_that_asked(project: Project, agent_script) -> None:
    slow = agent_script("import time\ntime.sleep(12)\n" + FIX)
    told: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        told.append((done, total, message))

    async def scenario(loope: Loope) -> None:
        started = await loope.call("loope_start", goal="fix add", implementer=slow, verify_command=GATE)
        result = await loope.session.call_tool(
            "loope_status", {"loop_id": started["loop_id"], "wait_s": 120}, progress_callback=progress
        )
        assert not result.is_error
        assert told, "no progress while waiting"
        _, total, message = told[0]
        assert (total, message) == (120, f"{started['loop_id']} running, 0 iteration(s) finished")
        assert [t[0] for t in told] == sorted(t[0] for t in told)
        await loope.finished(started["loop_id"])

    serve(project.path, scenario)


def test_a_race_started_over_mcp_keeps_the_passing_candidate(project: Project, agent_script) -> None:
    broken = agent_script("pathlib.Path('calc.py').write_text('def add(a, b):\\n    return 0\\n')\nprint('zero')\n")
    fixed = agent_script(FIX)

    async def scenario(loope: Loope) -> None:
        started = await loope.call(
            "loope_start", goal="fix add", implementers=[broken, fixed], verify_command=GATE, max_iterations=1
        )
        assert started["candidates"] == [broken, fixed]
        await loope.finished(started["loop_id"])
        shown = await loope.call("loope_show", loop_id=started["loop_id"])
        (round_,) = shown["run"]["rounds"]
        assert (round_["winner"], round_["candidates"][0]["gate_passed"]) == (2, True)
        assert project.read("calc.py") == CALC  # not applied yet

    serve(project.path, scenario)
