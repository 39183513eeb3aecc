"""``loope mcp``: one MCP tool, ``loop``, over stdio, on the official MCP SDK.

The SDK's lower-level ``Server`` is used rather than ``MCPServer`` because the tool's input is a
pydantic model of its own (``LoopRequest``: ``extra="forbid"``, ceilings, a docstring per field) whose
errors must reach the caller as one line naming the field and its limit; ``MCPServer`` builds the
schema from a function signature, ignores unknown arguments and reports pydantic's multi-line text.
"""

from __future__ import annotations

import logging
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
from loope.mcp.request import input_schema, parse

TOOL = "loop"
logger = logging.getLogger("loope.mcp")

DESCRIPTION = """\
Run an AI coding agent in a verified loop (implement → verify → review, a fresh agent session per \
iteration) in the background, and control it. One tool, several actions:

- start: needs goal. Starts a detached loop in workspace (default: this server's project) and returns \
{loop_id, status}. Set verify_command (exit 0 = done) so the loop has a verifier the agent cannot grade \
itself against; or metric_command + direction for a metric search. Budgets: max_iterations (default 20, \
at most 200), max_cost_usd (default 5, at most 50), max_tick_duration_minutes (1-60 per agent step). \
implementer is an agent name (claude, codex, claude:opus) or exec:<command>. reviewers: NONE unless you \
list them (e.g. ["codex"]); an MCP caller states its reviewers explicitly. loope.toml in the workspace \
still applies beneath the values given here.
- status: loop_id (or a unique prefix) → {loop, frontmatter, state_excerpt}: status, iteration, cost, \
runner, and the first 40 lines of the agent's state file.
- stop: loop_id, optional now (kill the step in flight) → {stop_requested, loop_id}.
- list: → {count, loops}: the running loops; with include_finished, the 50 most recent.
- show: loop_id → the report (markdown) and run.json summary; diff=true adds the cumulative diff.
- apply: loop_id → lands a finished loop's changes in its workdir; returns the per-file plan and \
whether it was applied. Deletes only with delete=true; a file changed since the loop started is a \
conflict (nothing applied) unless force=true; dry_run=true only plans.
"""


def tool() -> types.Tool:
    """The ``loop`` tool as listed to clients."""
    return types.Tool(
        name=TOOL,
        title="loope: verified agent loops",
        description=DESCRIPTION,
        input_schema=input_schema(),
        annotations=types.ToolAnnotations(
            title="loope loop",
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=True,
        ),
    )


def call(name: str, arguments: dict[str, Any] | None, project: Path) -> types.CallToolResult:
    """Run one tool call to a result; loope's errors become tool errors (``is_error``) with their message."""
    if name != TOOL:
        return _error(f"unknown tool {name!r}; this server has one tool, {TOOL!r}")
    try:
        request = parse(arguments)
        result = actions.handle(request, project)
    except LoopeError as exc:
        return _error(" ".join(exc.message.split()))
    except Exception as exc:  # a crash reaches the caller as a tool error (and stderr), not as a dead session
        logger.exception("the loop tool failed")
        return _error(f"loope failed unexpectedly: {type(exc).__name__}: {exc}")
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=actions.as_text(result))],
        structured_content=result,
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def build(project: Path) -> Server[Any]:
    """The MCP server for ``project`` (the directory loops start in unless a call names another)."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool()])

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        # loope's control plane is synchronous (git, SQLite, files): keep it off the event loop.
        return await anyio.to_thread.run_sync(call, params.name, params.arguments, project)

    return Server(
        "loope",
        version=__version__,
        title="loope",
        instructions="Start, watch, stop and land verified AI coding loops with the `loop` tool.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve(project: Path) -> None:
    """Serve ``project`` over stdin/stdout until the client closes the connection."""
    server = build(project)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
