"""``amp``: Sourcegraph's Amp CLI (``@sourcegraph/amp``) in execute mode.

One process per step: ``amp -x <prompt> --stream-json``. Its stdin must be closed: with an open
stdin ``amp -x`` waits for it to end, since piped input is appended to the prompt. The stream is
Claude Code's: ``system`` (init: cwd, tools), ``assistant`` (text and ``tool_use`` blocks, each line
with its reply's ``usage``), ``user`` (tool results) and, last, ``result``; a run that failed ends
with ``is_error: true`` and an ``error`` string (for example a tool that needs approval, which
execute mode cannot ask for). The result carries no totals and Amp reports no model or cost, so the
tokens are the sum of the replies' and the cost is not known (``amp usage`` shows the credits).

Writers run with ``--dangerously-allow-all``. Amp has no read-only mode: read roles get a private
settings file (the user's settings plus ``amp.tools.disable`` for every tool that writes or runs
commands), passed through ``AMP_SETTINGS_FILE``. With no API key and no stored login amp starts an
interactive login and waits; ``loope doctor`` checks for credentials first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from loope.agents.base import AgentEvent, AgentRequest
from loope.agents.catalog import INFO, AdapterInfo
from loope.agents.jsonl import StreamAgent, StreamSession, ToolTable, as_dict, assistant_blocks, tool_errors
from loope.text import count as as_int
from loope.text import one_line

_TOOLS: ToolTable = {
    "Read": ("read", ("path",)),
    "edit_file": ("edit", ("path",)),
    "undo_edit": ("edit", ("path",)),
    "create_file": ("write", ("path",)),
    "Bash": ("command", ("cmd", "command")),
    "Grep": ("search", ("pattern",)),
    "glob": ("search", ("filePattern", "pattern")),
    "finder": ("search", ("query",)),
    "web_search": ("search", ("query",)),
}
_WRITING_TOOLS = ("edit_file", "create_file", "undo_edit", "Bash", "Task")
SETTINGS_FILE = "amp-settings.json"


class AmpAgent(StreamAgent[StreamSession]):
    session_type = StreamSession
    usage_from_lines = "always"  # amp's result line carries no token counts
    name = "amp"
    home_state = (".config/amp", ".local/share/amp", ".cache/amp")
    home_config = ("settings.json", "AGENTS.md")
    product = "Amp"
    info: ClassVar[AdapterInfo] = INFO["amp"]

    def argv(self, request: AgentRequest) -> list[str]:
        argv = [self.binary(), "-x", request.prompt, "--stream-json"]
        if request.mode == "write":
            argv.append("--dangerously-allow-all")
        if self.model:
            argv += ["--mode", self.model]  # amp has no model choice: its mode picks the model
        return argv + self.extra_args()

    def environment(self, request: AgentRequest) -> dict[str, str]:
        env = super().environment(request)
        if request.mode == "read" or request.isolate_home:
            user = None if request.isolate_home else _user_settings(env)
            settings = dict(user or {})
            if request.mode == "read":
                disabled = settings.get("amp.tools.disable")
                kept = [t for t in disabled if t not in _WRITING_TOOLS] if isinstance(disabled, list) else []
                settings["amp.tools.disable"] = [*kept, *_WRITING_TOOLS]
            path = request.step_dir / SETTINGS_FILE
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
            env["AMP_SETTINGS_FILE"] = str(path)
        return env

    def on_json(self, data: dict[str, Any], session: StreamSession) -> Iterable[AgentEvent]:
        kind = data.get("type")
        message = as_dict(data.get("message"))
        if kind == "system" and data.get("subtype") == "init":
            session.cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
        elif kind == "assistant":
            usage = as_dict(message.get("usage"))
            # Anthropic-style counts: input_tokens leaves out the cache reads and writes.
            tokens_in = as_int(usage.get("input_tokens")) + as_int(usage.get("cache_creation_input_tokens"))
            tokens_in += as_int(usage.get("cache_read_input_tokens"))
            session.note_usage(message.get("id"), tokens_in, as_int(usage.get("output_tokens")))
            return assistant_blocks(message, session, _TOOLS)
        elif kind == "user":
            return tool_errors(message, session)
        elif kind == "result":
            session.done = True
            if isinstance(data.get("result"), str) and data["result"].strip():
                session.final = data["result"].strip()
            if data.get("is_error") is True or str(data.get("subtype") or "").startswith("error"):
                error = data.get("error") or data.get("subtype") or "amp reported an error"
                session.errors.append(one_line(str(error)))
        return []


def _user_settings(env: dict[str, str]) -> dict[str, Any] | None:
    """The user's own amp settings, to carry into a read role's settings file (None if unreadable)."""
    configured = env.get("AMP_SETTINGS_FILE")
    path = Path(configured) if configured else Path.home() / ".config" / "amp" / "settings.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
