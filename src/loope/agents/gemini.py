"""``gemini``: Google's Gemini CLI (``@google/gemini-cli``) in headless mode.

One process per step: ``gemini --prompt=<prompt> --output-format stream-json`` with stdin closed.
Each stdout line is a JSON event: ``init``, ``message`` (the user's prompt, then the assistant's
reply in ``delta`` chunks), ``tool_use`` / ``tool_result`` (linked by ``tool_id``), ``error``
(warnings such as loop detection) and, last, ``result`` with ``status`` and the token ``stats``
(per model; no cost). A failed model call ends with ``result.status: "error"``.

Gemini's exit codes say more than most (41 auth, 42 input, 44 sandbox, 52 config, 53 turn limit,
54 tool, 55 untrusted folder), and an API error exits with the HTTP status modulo 256 (401 -> 145).
Headless gemini refuses an untrusted folder (exit 55), so the workspace is trusted through
``GEMINI_CLI_TRUST_WORKSPACE``; ``--approval-mode default`` in headless mode offers only read-only
tools, which is how read roles are enforced.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from loope.agents.base import AgentEvent, AgentRequest
from loope.agents.catalog import INFO, AdapterInfo
from loope.agents.jsonl import StreamAgent, StreamSession, ToolTable, api_error, as_dict, detail_from
from loope.proc import ProcResult
from loope.text import count as as_int
from loope.text import one_line

_TOOLS: ToolTable = {
    "read_file": ("read", ("file_path", "absolute_path", "path")),
    "read_many_files": ("read", ("paths", "include")),
    "list_directory": ("read", ("dir_path", "path")),
    "write_file": ("write", ("file_path",)),
    "replace": ("edit", ("file_path",)),
    "edit": ("edit", ("file_path",)),
    "run_shell_command": ("command", ("command",)),
    "glob": ("search", ("pattern",)),
    "grep_search": ("search", ("pattern",)),
    "search_file_content": ("search", ("pattern",)),
    "google_web_search": ("search", ("query",)),
}
_EXIT_CODES = {
    41: "gemini could not authenticate (exit 41); set GEMINI_API_KEY or log in once with `gemini`",
    42: "gemini rejected its input (exit 42)",
    44: "gemini's sandbox failed (exit 44)",
    52: "gemini's configuration is invalid (exit 52); check ~/.gemini/settings.json",
    53: "gemini stopped at its turn limit (exit 53)",
    54: "a gemini tool failed fatally (exit 54)",
    55: "gemini does not trust the workspace (exit 55)",
}


class GeminiAgent(StreamAgent[StreamSession]):
    session_type = StreamSession
    name = "gemini"
    product = "Gemini CLI"
    home_env = ("GEMINI_CLI_HOME",)
    home_state = (".gemini",)
    home_config = ("settings.json", "GEMINI.md", "commands", "extensions")
    info: ClassVar[AdapterInfo] = INFO["gemini"]

    def argv(self, request: AgentRequest) -> list[str]:
        # --prompt=<text> keeps a prompt that starts with "-" from being read as a flag.
        mode = "yolo" if request.mode == "write" else "default"
        argv = [self.binary(), f"--prompt={request.prompt}", "--output-format", "stream-json", "--approval-mode", mode]
        if self.model:
            argv += ["--model", self.model]
        return argv + self.extra_args()

    def environment(self, request: AgentRequest) -> dict[str, str]:
        env = super().environment(request)
        env.setdefault("GEMINI_CLI_TRUST_WORKSPACE", "true")
        return env

    def on_json(self, data: dict[str, Any], session: StreamSession) -> Iterable[AgentEvent]:
        kind = data.get("type")
        if kind == "message":
            if data.get("role") == "assistant" and isinstance(data.get("content"), str):
                session.segment.add(data["content"])
            return []
        events = session.flush()
        if kind == "init":
            model = data.get("model")
            if isinstance(model, str) and model != "auto":
                session.model = model
        elif kind == "tool_use":
            name = str(data.get("tool_name") or "tool")
            session.tool_names[str(data.get("tool_id"))] = name
            events.append(session.tool(name, data.get("parameters"), _TOOLS))
        elif kind == "tool_result" and data.get("status") == "error":
            name = session.tool_names.get(str(data.get("tool_id")), "a tool")
            why = as_dict(data.get("error")).get("message") or data.get("output") or "failed"
            events.append(AgentEvent.say(f"{name} failed: {one_line(str(why))}"))
        elif kind == "error":
            events.append(AgentEvent.say(f"gemini {data.get('severity') or 'error'}: {data.get('message')}"))
        elif kind == "result":
            events += _result(data, session)
        return events

    def judge(self, proc: ProcResult, session: StreamSession) -> str | None:
        code = proc.exit_code
        detail = session.errors[-1] if session.errors else detail_from(proc.stderr_tail)
        if code in _EXIT_CODES:
            return f"{_EXIT_CODES[code]}: {detail}" if detail else _EXIT_CODES[code]
        if code is not None and 144 <= code <= 255 and not session.errors:
            # gemini exits with the HTTP status of a failed API call, modulo 256.
            reason = f"gemini got HTTP {code + 256} from the model API (exit {code})"
            return f"{reason}: {detail}" if detail else reason
        return super().judge(proc, session)


def _result(data: dict[str, Any], session: StreamSession) -> list[AgentEvent]:
    session.done = True
    if data.get("status") == "error":
        error = as_dict(data.get("error"))
        session.errors.append(api_error(str(error.get("message") or error.get("type") or "gemini reported an error")))
    stats = as_dict(data.get("stats"))
    models = {name: as_dict(m) for name, m in as_dict(stats.get("models")).items()}
    used = {name: m for name, m in models.items() if as_int(m.get("total_tokens"))}
    if used:
        session.model = max(used, key=lambda name: as_int(used[name].get("total_tokens")))
    return [AgentEvent.usage(as_int(stats.get("input_tokens")), as_int(stats.get("output_tokens")))]
