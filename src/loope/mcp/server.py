"""``loope mcp``: loope's tools (``loope.mcp.tools``) over stdio, on the official MCP SDK.

The SDK's lower-level ``Server`` is used rather than ``MCPServer`` because each tool's input is a
pydantic model of its own (``extra="forbid"``, ceilings, a docstring per field) whose errors must
reach the caller as one line naming the field and its limit; ``MCPServer`` builds the schema from a
function signature, ignores unknown arguments and reports pydantic's multi-line text.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from loope import __version__
from loope.errors import LoopeError
from loope.mcp import actions
from loope.mcp.request import StatusArgs, input_schema, parse
from loope.mcp.tools import BY_NAME, TOOLS

logger = logging.getLogger("loope.mcp")
POLL_S = 0.5
ENDING_GRACE_S = 3.0
"""How long a wait that saw an iteration finish waits more for the loop to end (if that iteration ended it)."""
"""How often a waiting ``loope_status`` looks at the loop's run.json."""
PROGRESS_EVERY_S = 5.0
"""How often it tells a caller that asked for progress that it is still waiting."""


def listed() -> list[types.Tool]:
    """The tools as listed to clients."""
    return [
        types.Tool(
            name=tool.name,
            title=tool.title,
            description=tool.description,
            input_schema=input_schema(tool.args),
            annotations=types.ToolAnnotations(
                title=tool.title,
                read_only_hint=tool.read_only,
                destructive_hint=tool.destructive,
                idempotent_hint=tool.idempotent,
                open_world_hint=tool.open_world,
            ),
        )
        for tool in TOOLS
    ]


Progress = Callable[[float, float | None, str | None], Awaitable[None]]


async def _no_progress(progress: float, total: float | None, message: str | None) -> None:
    return None


async def call(
    name: str, arguments: dict[str, Any] | None, project: Path, report: Progress = _no_progress
) -> types.CallToolResult:
    """Run one tool call to a result; loope's errors become tool errors (``is_error``) with their message.

    ``report`` sends progress notifications (when the caller asked for them) while a status call waits.
    """
    tool = BY_NAME.get(name)
    if tool is None:
        return _error(f"unknown tool {name!r}; loope's tools are {', '.join(BY_NAME)}")
    try:
        args = parse(name, tool.args, arguments)
        workdir = actions.workdir_for(getattr(args, "workspace", None), project)
        if isinstance(args, StatusArgs) and args.wait_s > 0:
            result = await _wait_then_status(workdir, args, report)
        else:
            # loope's control plane is synchronous (git, SQLite, files): keep it off the event loop.
            result = await anyio.to_thread.run_sync(tool.run, args, workdir)
    except LoopeError as exc:
        return _error(" ".join(exc.message.split()))
    except Exception as exc:  # a crash reaches the caller as a tool error (and stderr), not as a dead session
        logger.exception("%s failed", name)
        return _error(f"loope failed unexpectedly: {type(exc).__name__}: {exc}")
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=actions.as_text(result))],
        structured_content=result,
    )


async def _wait_then_status(workdir: Path, args: StatusArgs, report: Progress) -> dict[str, Any]:
    """Wait (here, on the event loop, so a cancelled call stops waiting) until the loop moves on."""
    run_id = (await anyio.to_thread.run_sync(actions.find, workdir, args.loop_id)).run_id
    before = await anyio.to_thread.run_sync(actions.progress, workdir, run_id)
    waited = 0.0
    with anyio.move_on_after(args.wait_s):
        while before[0] == "running":
            await anyio.sleep(POLL_S)
            waited += POLL_S
            now = await anyio.to_thread.run_sync(actions.progress, workdir, run_id)
            if now != before and now[1] >= 0:
                # An iteration that ends the loop is followed by its end within moments: wait for that
                # too, so the answer does not say "running" for a loop that has just converged.
                with anyio.move_on_after(ENDING_GRACE_S):
                    while now[0] == "running":
                        await anyio.sleep(POLL_S)
                        waited += POLL_S
                        now = await anyio.to_thread.run_sync(actions.progress, workdir, run_id)
                break
            if waited % PROGRESS_EVERY_S < POLL_S / 2:
                await report(waited, args.wait_s, f"{run_id} {now[0]}, {now[1]} iteration(s) finished")
    result = await anyio.to_thread.run_sync(actions.status, workdir, run_id)
    return {**result, "waited_s": round(waited, 1)}


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def build(project: Path) -> Server[Any]:
    """The MCP server for ``project`` (the directory loops start in unless a call names another)."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed())

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await call(params.name, params.arguments, project, ctx.session.report_progress)

    return Server(
        "loope",
        version=__version__,
        title="loope",
        instructions=(
            "Start verified AI coding loops with loope_start, wait on them with loope_status (wait_s),"
            " read the outcome with loope_show and land the changes with loope_apply."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve(project: Path) -> None:
    """Serve ``project`` over stdin/stdout until the client closes the connection."""
    server = build(project)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
