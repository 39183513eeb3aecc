"""``qwen``: Qwen Code (``@qwen-code/qwen-code``) in headless mode.

One process per step: ``qwen --output-format stream-json <prompt>`` with stdin closed. The stream
follows Claude Code's: ``system`` (init: model, cwd), ``assistant`` (text and ``tool_use`` blocks,
per-message ``usage``), ``user`` (tool results) and, last, ``result`` with the final text and the
token totals (no cost). A failed model call prints the error as assistant text, then a ``result``
with ``is_error: true`` (``subtype: error_during_execution``) and ``error.message``; qwen exits 1.

In headless mode ``--approval-mode default`` removes the edit, write and shell tools from what the
model is offered, which is how read roles are enforced; writers run with ``yolo``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from loope.agents.base import AgentEvent, AgentRequest
from loope.agents.catalog import INFO, AdapterInfo
from loope.agents.jsonl import StreamAgent, StreamSession, ToolTable, api_error, as_dict, assistant_blocks, tool_errors
from loope.proc import ProcResult
from loope.text import count as as_int

_TOOLS: ToolTable = {
    "read_file": ("read", ("file_path", "absolute_path", "path")),
    "read_many_files": ("read", ("paths",)),
    "list_directory": ("read", ("path", "dir_path")),
    "edit": ("edit", ("file_path",)),
    "notebook_edit": ("edit", ("notebook_path", "file_path")),
    "write_file": ("write", ("file_path",)),
    "run_shell_command": ("command", ("command",)),
    "grep_search": ("search", ("pattern",)),
    "glob": ("search", ("pattern",)),
    "web_search": ("search", ("query",)),
}
_EXIT_CODES = {
    42: "qwen rejected its input (exit 42)",
    44: "qwen's sandbox failed (exit 44)",
    52: "qwen's configuration is invalid (exit 52); check ~/.qwen/settings.json",
    53: "qwen stopped at its turn limit (exit 53)",
    55: "qwen stopped at its budget (exit 55: --max-wall-time or --max-tool-calls)",
}


class QwenAgent(StreamAgent[StreamSession]):
    session_type = StreamSession
    usage_from_lines = "without a result"
    name = "qwen"
    product = "Qwen Code"
    home_env = ("QWEN_HOME",)
    home_state = (".qwen",)
    info: ClassVar[AdapterInfo] = INFO["qwen"]

    def argv(self, request: AgentRequest) -> list[str]:
        mode = "yolo" if request.mode == "write" else "default"
        argv = [self.binary(), "--output-format", "stream-json", "--approval-mode", mode]
        if self.model:
            argv += ["--model", self.model]
        return [*argv, *self.extra_args(), request.prompt]

    def on_json(self, data: dict[str, Any], session: StreamSession) -> Iterable[AgentEvent]:
        kind = data.get("type")
        message = as_dict(data.get("message"))
        if kind == "system" and data.get("subtype") == "init":
            session.cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
            if isinstance(data.get("model"), str):
                session.model = data["model"]
        elif kind == "assistant":
            usage = as_dict(message.get("usage"))
            # Qwen speaks OpenAI-compatible APIs: input_tokens already includes the cached ones.
            session.note_usage(message.get("id"), as_int(usage.get("input_tokens")), as_int(usage.get("output_tokens")))
            return assistant_blocks(message, session, _TOOLS)
        elif kind == "user":
            return tool_errors(message, session)
        elif kind == "result":
            return _result(data, session)
        return []

    def judge(self, proc: ProcResult, session: StreamSession) -> str | None:
        reason = _EXIT_CODES.get(proc.exit_code or 0)
        if reason and not session.errors:
            return reason
        return super().judge(proc, session)


def _result(data: dict[str, Any], session: StreamSession) -> list[AgentEvent]:
    session.done = True
    text = data.get("result")
    if isinstance(text, str) and text.strip():
        session.final = text.strip()
    if data.get("is_error") is True or str(data.get("subtype") or "").startswith("error"):
        error = data.get("error")
        detail = as_dict(error).get("message") if isinstance(error, dict) else error
        session.errors.append(api_error(str(detail or data.get("subtype") or "qwen reported an error")))
    usage = as_dict(data.get("usage"))
    return [AgentEvent.usage(as_int(usage.get("input_tokens")), as_int(usage.get("output_tokens")))]
