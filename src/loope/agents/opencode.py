"""``opencode``: OpenCode (``opencode-ai``) through ``opencode run``.

One process per step: ``opencode run --format json <prompt>``. Its stdin must be closed: whenever
stdin is not a terminal, ``opencode run`` reads it to the end before it starts. Each stdout line is
``{type, timestamp, sessionID, part|error}``: ``step_start``; ``tool_use`` once a call completed or
failed (``part.tool``, ``part.state.input``); ``text`` when a text part ends; ``step_finish`` with
the step's ``tokens`` and its ``cost`` in USD (0 when opencode does not know the model's price);
``error`` for a failed session (then opencode exits 1). Newer builds end with a ``done`` event;
1.18 does not, so a last ``step_finish`` whose reason is not ``tool-calls`` is the end of the turn.
A permission opencode asks for in ``run`` is rejected outright ("auto-rejecting" on stderr) and the
turn just stops, exit 0: a turn that stops without finishing is a failed step.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, ClassVar

from loope.agents.base import AgentEvent, AgentRequest
from loope.agents.catalog import INFO, AdapterInfo
from loope.agents.jsonl import StreamAgent, StreamSession, ToolTable, as_dict, reported_cost
from loope.text import count as as_int
from loope.text import one_line

_TOOLS: ToolTable = {
    "read": ("read", ("filePath", "path")),
    "list": ("read", ("path",)),
    "edit": ("edit", ("filePath",)),
    "multiedit": ("edit", ("filePath",)),
    "patch": ("edit", ("filePath",)),
    "write": ("write", ("filePath",)),
    "bash": ("command", ("command",)),
    "glob": ("search", ("pattern",)),
    "grep": ("search", ("pattern",)),
    "codesearch": ("search", ("query",)),
    "websearch": ("search", ("query",)),
}
# Denied tools are removed from what the model is offered ("edit" covers write and patch too).
_READ_ONLY = {"edit": "deny", "bash": "deny"}


class OpenCodeAgent(StreamAgent[StreamSession]):
    session_type = StreamSession
    name = "opencode"
    home_state = (".config/opencode", ".local/share/opencode", ".local/state/opencode", ".cache/opencode")
    home_config = ("opencode.json", "opencode.jsonc", "config.json", "AGENTS.md", "agent", "command", "plugin")
    product = "OpenCode"
    info: ClassVar[AdapterInfo] = INFO["opencode"]

    def argv(self, request: AgentRequest) -> list[str]:
        argv = [self.binary(), "run", "--format", "json"]
        if request.mode == "write":
            argv.append("--auto")  # approve what the user's config would ask for; explicit denials still hold
        if self.model:
            argv += ["--model", self.model]
        return [*argv, *self.extra_args(), request.prompt]

    def environment(self, request: AgentRequest) -> dict[str, str]:
        env = super().environment(request)
        env.setdefault("OPENCODE_DISABLE_AUTOUPDATE", "1")
        if request.mode == "read":
            env["OPENCODE_PERMISSION"] = json.dumps({**_user_permissions(env), **_READ_ONLY})
        if request.isolate_home:
            # Config, credentials and state, not the cache: it holds the provider packages opencode installs.
            home = request.step_dir / "home"
            for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state")):
                (home / sub).mkdir(parents=True, exist_ok=True)
                env[var] = str(home / sub)
        return env

    def on_json(self, data: dict[str, Any], session: StreamSession) -> Iterable[AgentEvent]:
        kind = data.get("type")
        part = as_dict(data.get("part"))
        if kind == "step_start":
            session.done = False
        elif kind == "tool_use":
            state = as_dict(part.get("state"))
            name = str(part.get("tool") or "tool")
            events = [session.tool(name, state.get("input"), _TOOLS)]
            if state.get("status") == "error":
                events.append(AgentEvent.say(f"{name} failed: {one_line(str(state.get('error') or 'error'))}"))
            return events
        elif kind == "text" and isinstance(part.get("text"), str):
            return session.say(part["text"])
        elif kind == "step_finish":
            session.done = part.get("reason") != "tool-calls"
            return [_usage(part)]
        elif kind == "done":
            session.done = True
        elif kind == "error":
            session.errors.append(_error(as_dict(data.get("error"))))
        return []


def _usage(part: dict[str, Any]) -> AgentEvent:
    tokens = as_dict(part.get("tokens"))
    cache = as_dict(tokens.get("cache"))
    tokens_in = as_int(tokens.get("input")) + as_int(cache.get("read")) + as_int(cache.get("write"))
    tokens_out = as_int(tokens.get("output")) + as_int(tokens.get("reasoning"))
    return AgentEvent.usage(tokens_in, tokens_out, reported_cost(part.get("cost")))


def _error(error: dict[str, Any]) -> str:
    data = as_dict(error.get("data"))
    name = str(error.get("name") or "error")
    message = one_line(str(data.get("message") or error.get("message") or "opencode reported an error"))
    status = data.get("statusCode")
    return f"{name} {status}: {message}" if status else f"{name}: {message}"


def _user_permissions(env: dict[str, str]) -> dict[str, Any]:
    """The permissions the user set through OPENCODE_PERMISSION, which read roles tighten."""
    try:
        data = json.loads(env.get("OPENCODE_PERMISSION") or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
