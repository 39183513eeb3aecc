"""``copilot``: GitHub Copilot CLI (``@github/copilot``) in prompt mode.

One process per step: ``copilot -p <prompt> --output-format json --allow-all-tools``. Each stdout
line is ``{type, data, id, timestamp, parentId, ephemeral?}``: ``assistant.message`` (text and tool
requests), ``tool.execution_start`` / ``tool.execution_complete`` (``success: false`` when a tool
was denied), ``session.error`` for a failed session and, last, ``result`` with the exit code.
Ephemeral events (deltas, model calls, background tasks) are ignored.

stdout carries no token counts: ``--usage-output-file`` writes them (per model) into the step
directory when copilot exits, and they are read from there. Copilot bills premium requests, not
USD, so the cost is an estimate from those tokens. ``--deny-tool`` wins over ``--allow-all-tools``:
read roles deny the ``write`` and ``shell`` tool kinds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from loope.agents.base import AgentEvent, AgentRequest
from loope.agents.catalog import INFO, AdapterInfo
from loope.agents.jsonl import StreamAgent, StreamSession, ToolTable, as_dict
from loope.proc import ProcResult
from loope.text import count as as_int
from loope.text import one_line

_TOOLS: ToolTable = {
    "view": ("read", ("path",)),
    "read": ("read", ("path",)),
    "edit": ("edit", ("path",)),
    "str_replace": ("edit", ("path",)),
    "insert": ("edit", ("path",)),
    "create": ("write", ("path",)),
    "write": ("write", ("path",)),
    "bash": ("command", ("command",)),
    "shell": ("command", ("command",)),
    "glob": ("search", ("pattern",)),
    "grep": ("search", ("pattern",)),
    "rg": ("search", ("pattern",)),
}
USAGE_FILE = "copilot-usage.json"


@dataclass
class CopilotSession(StreamSession):
    usage_file: Path | None = None


class CopilotAgent(StreamAgent[CopilotSession]):
    session_type = CopilotSession
    name = "copilot"
    product = "GitHub Copilot CLI"
    home_env = ("COPILOT_HOME",)
    home_state = (".copilot", ".cache/copilot")
    home_config = ("config.json", "mcp-config.json")
    info: ClassVar[AdapterInfo] = INFO["copilot"]

    def argv(self, request: AgentRequest) -> list[str]:
        argv = [self.binary(), "-p", request.prompt, "--output-format", "json", "--allow-all-tools"]
        if request.mode == "read":
            argv += ["--deny-tool=write", "--deny-tool=shell"]
        argv += ["--no-ask-user", "--no-auto-update", "--usage-output-file", str(request.step_dir / USAGE_FILE)]
        if self.model:
            argv += ["--model", self.model]
        return argv + self.extra_args()

    def new_session(self, request: AgentRequest) -> CopilotSession:
        return CopilotSession(model=self.model, workspace=request.workspace, usage_file=request.step_dir / USAGE_FILE)

    def on_json(self, data: dict[str, Any], session: CopilotSession) -> Iterable[AgentEvent]:
        kind = data.get("type")
        body = as_dict(data.get("data"))
        if kind == "assistant.message":
            if isinstance(body.get("model"), str):
                session.model = body["model"]
            return session.say(str(body.get("content") or ""))
        if kind == "tool.execution_start":
            name = str(body.get("toolName") or "tool")
            session.tool_names[str(body.get("toolCallId"))] = name
            return [session.tool(name, body.get("arguments"), _TOOLS)]
        if kind == "tool.execution_complete" and body.get("success") is False:
            name = session.tool_names.get(str(body.get("toolCallId")), "a tool")
            why = as_dict(body.get("error")).get("message") or "failed"
            return [AgentEvent.say(f"{name} failed: {one_line(str(why))}")]
        if kind == "session.error":
            message = one_line(str(body.get("message") or body.get("errorType") or "copilot reported an error"))
            session.errors.append(message)
        elif kind == "result":
            session.done = True
        return []

    def finish(self, proc: ProcResult, session: CopilotSession) -> Iterable[AgentEvent]:
        usage = _usage_file(session.usage_file)
        if usage is None:
            return []
        per_model = {name: as_dict(as_dict(m).get("usage")) for name, m in as_dict(usage.get("modelMetrics")).items()}
        if not per_model:
            return []
        session.model = max(per_model, key=lambda name: as_int(per_model[name].get("inputTokens")))
        # OpenAI-style counts: inputTokens already includes the cached ones.
        tokens_in = sum(as_int(u.get("inputTokens")) for u in per_model.values())
        tokens_out = sum(as_int(u.get("outputTokens")) for u in per_model.values())
        return [AgentEvent.usage(tokens_in, tokens_out)]


def _usage_file(path: Path | None) -> dict[str, Any] | None:
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):  # unreadable or half-written: no token counts, never a failed step
        return None
    return data if isinstance(data, dict) else None
