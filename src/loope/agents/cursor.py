"""``cursor``: Cursor's CLI agent (``cursor-agent``, also installed as ``agent``) in print mode.

One process per step: ``cursor-agent --print --output-format stream-json --trust <prompt>`` (headless
cursor refuses to start in an untrusted folder without ``--trust``). Each stdout line is a JSON
event: ``system`` (init: model, cwd), ``assistant`` (one line per message), ``tool_call`` started
and completed (the tool is the key of ``tool_call``: ``readToolCall``, ``editToolCall``,
``shellToolCall``, ...; a completed call holds ``result.success``, ``result.error`` or
``result.rejected``), ``thinking``, ``connection`` / ``retry``, and last ``result`` with the token
``usage`` (no cost). On failure cursor exits non-zero with the reason on stderr, and the stream
may simply end without a ``result``: that is a failed step whatever the exit code.

Writers run with ``--force`` (every tool, no prompts); read roles run with ``--mode plan``, which
refuses to write files.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from loope.agents.base import AgentEvent, AgentRequest
from loope.agents.catalog import INFO, AdapterInfo
from loope.agents.jsonl import StreamAgent, StreamSession, ToolTable, as_dict
from loope.text import count as as_int
from loope.text import one_line

_TOOLS: ToolTable = {
    "readToolCall": ("read", ("path",)),
    "lsToolCall": ("read", ("path",)),
    "editToolCall": ("edit", ("path",)),
    "deleteToolCall": ("edit", ("path",)),
    "writeToolCall": ("write", ("path",)),
    "shellToolCall": ("command", ("command",)),
    "grepToolCall": ("search", ("pattern",)),
    "globToolCall": ("search", ("globPattern", "pattern")),
}


class CursorAgent(StreamAgent[StreamSession]):
    session_type = StreamSession
    name = "cursor"
    product = "Cursor's cursor-agent"
    home_env = ("CURSOR_CONFIG_DIR",)
    home_state = (".cursor", ".config/cursor", ".cache/cursor")
    home_config = ("cli-config.json", "mcp.json")
    info: ClassVar[AdapterInfo] = INFO["cursor"]

    def argv(self, request: AgentRequest) -> list[str]:
        argv = [self.binary(), "--print", "--output-format", "stream-json", "--trust"]
        argv += ["--force"] if request.mode == "write" else ["--mode", "plan"]
        if self.model:
            argv += ["--model", self.model]
        return [*argv, *self.extra_args(), request.prompt]

    def on_json(self, data: dict[str, Any], session: StreamSession) -> Iterable[AgentEvent]:
        kind = data.get("type")
        if kind == "system" and data.get("subtype") == "init":
            session.cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
            model = data.get("model")
            if isinstance(model, str) and model.lower() != "auto":
                session.model = model
        elif kind == "assistant":
            message = as_dict(data.get("message"))
            text = "".join(
                str(b.get("text") or "") for b in message.get("content") or [] if as_dict(b).get("type") == "text"
            )
            return session.say(text)
        elif kind == "tool_call":
            return _tool_call(data, session)
        elif kind in ("connection", "retry"):
            return [AgentEvent.say(f"cursor {kind} {data.get('subtype')} (attempt {data.get('attempt')})")]
        elif kind == "result":
            return _result(data, session)
        return []


def _tool_call(data: dict[str, Any], session: StreamSession) -> list[AgentEvent]:
    call = as_dict(data.get("tool_call"))
    kind = next((key for key in call if key.endswith("ToolCall")), None)
    if kind is None:
        function = as_dict(call.get("function"))
        name = str(function.get("name") or "tool")
        return [AgentEvent.act("other", name)] if data.get("subtype") == "started" else []
    body = as_dict(call[kind])
    tool = kind.removesuffix("ToolCall")
    if data.get("subtype") == "started":
        if kind in _TOOLS:
            return [session.tool(kind, body.get("args"), _TOOLS)]
        args = as_dict(body.get("args"))  # updateTodos, mcp (which names its tool), ...
        return [AgentEvent.act("other", str(args.get("toolName") or args.get("name") or tool))]
    result = as_dict(body.get("result"))
    if "rejected" in result:
        rejected = as_dict(result["rejected"])
        what = rejected.get("command") or rejected.get("path")
        why = rejected.get("reason")
        text = f"cursor refused {tool}: {what}" if what else f"cursor refused {tool}"
        return [AgentEvent.say(f"{text} ({why})" if why else text)]
    if "error" in result:
        error = result["error"]
        why = as_dict(error).get("message") if isinstance(error, dict) else error
        return [AgentEvent.say(f"{tool} failed: {one_line(str(why or 'error'))}")]
    return []


def _result(data: dict[str, Any], session: StreamSession) -> list[AgentEvent]:
    session.done = True
    text = data.get("result")
    if session.final is None and isinstance(text, str) and text.strip():
        session.final = text.strip()  # no assistant lines came (partial output): the result holds all the text
    if data.get("is_error") is True or str(data.get("subtype") or "success") != "success":
        detail = text if isinstance(text, str) and text.strip() else data.get("error") or data.get("subtype")
        session.errors.append(one_line(str(detail or "cursor-agent reported an error")))
    usage = as_dict(data.get("usage"))
    # Like Anthropic's: inputTokens leaves out the cached tokens, which are billed (at a discount) too.
    tokens_in = as_int(usage.get("inputTokens")) + as_int(usage.get("cacheReadTokens"))
    tokens_in += as_int(usage.get("cacheWriteTokens"))
    return [AgentEvent.usage(tokens_in, as_int(usage.get("outputTokens")))]
