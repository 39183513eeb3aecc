"""``loope mcp --print-config CLIENT``: the snippet that adds loope to Claude Code, Codex or Cursor."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

CLIENTS = ("claude", "codex", "cursor")


@dataclass(frozen=True)
class Snippet:
    text: str
    """What goes in the client's config file (JSON or TOML), printed on stdout."""
    hint: str
    """Where it goes (and, for Claude Code, the one-line command instead), printed on stderr."""


def launcher() -> list[str]:
    """The absolute command that starts this loope: the running script, else the one on PATH, else python -m."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "loope" and argv0.is_file() and os.access(argv0, os.X_OK):
        return [os.path.abspath(argv0)]
    found = shutil.which("loope")
    if found:
        return [os.path.abspath(found)]
    # Not resolved: a virtualenv's python is a symlink whose target lacks the venv's packages.
    return [os.path.abspath(sys.executable), "-m", "loope"]


def snippet(client: str, workdir: Path, command: list[str] | None = None) -> Snippet:
    """The config for ``client`` that starts ``loope mcp --workdir WORKDIR``, and how to allow its tools."""
    from loope.mcp.request import WAIT_MAX_S  # loads pydantic, for a command that only prints a config
    from loope.mcp.tools import READ_ONLY, TOOLS

    program, *prefix = command or launcher()
    args = [*prefix, "mcp", "--workdir", str(workdir)]
    server = {"command": program, "args": args}
    if client == "codex":
        toml_args = ", ".join(json.dumps(a) for a in args)
        text = (
            f"[mcp_servers.loope]\ncommand = {json.dumps(program)}\nargs = [{toml_args}]\n"
            f"tool_timeout_sec = {WAIT_MAX_S + 30}\n"
        )
        read_only = ", ".join(json.dumps(name) for name in READ_ONLY)
        hint = (
            f"# run: {shlex.join(['codex', 'mcp', 'add', 'loope', '--', program, *args])}\n"
            f"# then set tool_timeout_sec = {WAIT_MAX_S + 30} under [mcp_servers.loope] (codex stops waiting for a"
            f" tool after 60 s; loope_status may wait {WAIT_MAX_S} s)\n"
            f"# to offer only the read-only tools, add: enabled_tools = [{read_only}]\n"
            "# or add to ~/.codex/config.toml:"
        )
        return Snippet(text, hint)
    if client == "cursor":
        text = json.dumps({"mcpServers": {"loope": server}}, indent=2) + "\n"
        hint = (
            f"# in print mode, load it without asking: cursor-agent -p --approve-mcps ...\n"
            f"# add to {workdir / '.cursor' / 'mcp.json'} (or ~/.cursor/mcp.json for every project):"
        )
        return Snippet(text, hint)
    if client == "claude":
        text = json.dumps({"mcpServers": {"loope": {"type": "stdio", **server}}}, indent=2) + "\n"
        add = shlex.join(["claude", "mcp", "add", "loope", "--", program, *args])
        every = ",".join(f"mcp__loope__{tool.name}" for tool in TOOLS)
        reading = ",".join(f"mcp__loope__{name}" for name in READ_ONLY)
        hint = (
            f"# run: {add}\n"
            "# claude -p runs an MCP tool only when it is allowed up front; allow loope's tools with:\n"
            f"#   --allowedTools {every}\n"
            f"# or only the read-only ones (the others then ask):\n"
            f"#   --allowedTools {reading}\n"
            f"# or add to {workdir / '.mcp.json'} (shared with the project):"
        )
        return Snippet(text, hint)
    raise ValueError(f"unknown client {client!r}; known: {', '.join(CLIENTS)}")
