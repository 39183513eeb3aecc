"""The loope MCP tools: names, descriptions, honest annotations, and what each call runs.

Six tools rather than one ``loop`` tool with an ``action``: Claude Code has a ``/loop`` skill and
scheduling tools of its own, and one tool cannot say that ``status`` only reads while ``apply``
writes the user's files, so a user could not auto-allow just the read-only calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from loope.mcp import actions
from loope.mcp.request import (
    WAIT_MAX_S,
    ApplyArgs,
    ListArgs,
    ShowArgs,
    StartArgs,
    StatusArgs,
    StopArgs,
)

Handler = Callable[[Any, Path], dict[str, Any]]


@dataclass(frozen=True)
class ToolDef:
    name: str
    title: str
    description: str
    args: type[BaseModel]
    run: Handler
    """The call, for every tool but ``loope_status`` with a wait (the server waits, then calls it)."""
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool = False


def _status(args: StatusArgs, workdir: Path) -> dict[str, Any]:
    return actions.status(workdir, actions.find(workdir, args.loop_id).run_id)


TOOLS: tuple[ToolDef, ...] = (
    ToolDef(
        "loope_start",
        "Start a verified loop",
        "Start a loop in the background: an AI coding agent implements the goal in its own copy of the "
        "project, then verify_command (exit 0 = pass) and the reviewers you list judge it, iteration after "
        "iteration with the failures fed back, until they pass or a budget is spent. Returns at once with "
        "loop_id; follow it with loope_status (wait_s) and land the result with loope_apply. Give a "
        "verify_command: it is the check the agent cannot grade itself against.",
        StartArgs,
        actions.start,
        read_only=False,
        destructive=False,  # it writes only to its own workspace and the project's .loope/
        idempotent=False,
        open_world=True,  # the agents it starts talk to their model providers
    ),
    ToolDef(
        "loope_status",
        "A loop's status",
        f"Where a loop is: status (running, converged, max_iters, stalled, stopped, failed, ...), iteration, "
        f"cost and budgets, and while it runs what the agent says it does next. With wait_s (at most "
        f"{WAIT_MAX_S}) it waits and returns as soon as the loop finishes an iteration or ends: "
        f"use it instead of sleeping between calls.",
        StatusArgs,
        _status,
        read_only=True,
        destructive=False,
        idempotent=True,
    ),
    ToolDef(
        "loope_list",
        "List loops",
        "The project's running loops and those that finished in the last day, newest first "
        "(all=true: the 50 most recent), and its fleets (`loope fleet`) with their loops' statuses.",
        ListArgs,
        lambda args, workdir: actions.list_loops(workdir, every=args.all),
        read_only=True,
        destructive=False,
        idempotent=True,
    ),
    ToolDef(
        "loope_show",
        "A loop's report",
        "A loop's report (markdown: outcome, each iteration, the files changed) and its record; "
        "diff=true adds the cumulative diff.",
        ShowArgs,
        lambda args, workdir: actions.show(workdir, args.loop_id, diff=args.diff),
        read_only=True,
        destructive=False,
        idempotent=True,
    ),
    ToolDef(
        "loope_stop",
        "Stop a loop",
        "Stop a running loop before its next step; now=true also kills the agent step in flight "
        "(its unfinished work is lost).",
        StopArgs,
        lambda args, workdir: actions.stop(workdir, args.loop_id, now=args.now),
        read_only=False,
        destructive=True,
        idempotent=True,
    ),
    ToolDef(
        "loope_apply",
        "Apply a loop's changes",
        "Write a finished loop's changes into the project's files. A file changed there since the loop "
        "started is a conflict and nothing is applied unless force=true; deleted files are deleted only with "
        "delete=true; dry_run=true returns the plan and writes nothing.",
        ApplyArgs,
        lambda args, workdir: actions.apply(
            workdir, args.loop_id, delete=args.delete, force=args.force, dry_run=args.dry_run
        ),
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
)

BY_NAME = {tool.name: tool for tool in TOOLS}
READ_ONLY = tuple(tool.name for tool in TOOLS if tool.read_only)
