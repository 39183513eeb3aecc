"""``goose``: Block's goose CLI through ``goose run``.

One process per step: ``goose run --no-session --output-format stream-json -t <prompt>``. Each
stdout line is an event: ``message`` (a whole ``Message``: assistant text arrives as several
events sharing one ``message.id``; content items are ``text``, ``toolRequest``, ``toolResponse``,
``thinking``), ``notification`` (extension logs), ``model_change``, ``error`` and, last,
``complete`` with the token totals (and, in recent builds, ``cost_usd``). A failed run prints
``error`` and then ``complete`` anyway, and goose exits 0: the error decides.

Tool names may carry their extension's prefix (``developer__shell``); it is dropped. Goose's mode
comes from ``GOOSE_MODE``: writers run in ``auto``; read roles in ``chat``, where goose calls no
tool at all: it reviews what the prompt carries (loope's review prompt holds the diff).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from loope.agents.base import AgentEvent, AgentRequest
from loope.agents.catalog import INFO, AdapterInfo
from loope.agents.jsonl import StreamAgent, StreamSession, ToolTable, as_dict, reported_cost
from loope.text import count as as_int
from loope.text import one_line

_TOOLS: ToolTable = {
    "shell": ("command", ("command",)),
    "write": ("write", ("path",)),
    "edit": ("edit", ("path",)),
    "tree": ("read", ("path",)),
    "read": ("read", ("path",)),
    "view": ("read", ("path",)),
    "glob": ("search", ("pattern",)),
    "grep": ("search", ("pattern",)),
}
# The text_editor tool of older goose builds: its ``command`` says what it does.
_EDITOR = {"view": "view", "write": "write", "str_replace": "edit", "insert": "edit", "undo_edit": "edit"}
_FATAL_KINDS = frozenset({"authentication", "creditsExhausted"})


class GooseAgent(StreamAgent[StreamSession]):
    session_type = StreamSession
    name = "goose"
    product = "goose"
    home_env = ("GOOSE_PATH_ROOT",)
    home_state = (".config/goose", ".local/share/goose", ".local/state/goose")
    home_config = ("config.yaml", ".goosehints")
    info: ClassVar[AdapterInfo] = INFO["goose"]

    def argv(self, request: AgentRequest) -> list[str]:
        argv = [self.binary(), "run", "--no-session", "--output-format", "stream-json"]
        if self.model:
            provider, _, model = self.model.rpartition("/")
            argv += (["--provider", provider] if provider else []) + ["--model", model]
        return [*argv, *self.extra_args(), "-t", request.prompt]

    def environment(self, request: AgentRequest) -> dict[str, str]:
        env = super().environment(request)
        env["GOOSE_MODE"] = "auto" if request.mode == "write" else "chat"
        return env

    def on_json(self, data: dict[str, Any], session: StreamSession) -> Iterable[AgentEvent]:
        kind = data.get("type")
        if kind == "message":
            return _message(as_dict(data.get("message")), session)
        events = session.flush()
        if kind == "model_change" and isinstance(data.get("model"), str):
            session.model = data["model"]
        elif kind == "error":
            session.errors.append(one_line(str(data.get("error") or "goose reported an error")))
        elif kind == "complete":
            session.done = True
            events.append(_usage(data))
        return events


def _message(message: dict[str, Any], session: StreamSession) -> list[AgentEvent]:
    model = as_dict(as_dict(message.get("metadata")).get("inference")).get("requestedModel")
    if isinstance(model, str) and model:
        session.model = model
    events: list[AgentEvent] = []
    for content in message.get("content") or []:
        item = as_dict(content)
        kind = item.get("type")
        if kind == "text" and message.get("role") == "assistant":
            session.segment.add(str(item.get("text") or ""))
            continue
        events += session.flush()
        if kind == "toolRequest":
            call = as_dict(as_dict(item.get("toolCall")).get("value"))
            session.tool_names[str(item.get("id"))] = str(call.get("name") or "tool")
            events.append(_tool(str(call.get("name") or "tool"), as_dict(call.get("arguments")), session))
        elif kind == "toolResponse":
            result = as_dict(item.get("toolResult"))
            value = as_dict(result.get("value"))
            if result.get("status") == "error" or value.get("isError") is True:
                name = session.tool_names.get(str(item.get("id")), "a tool")
                texts = [str(as_dict(c).get("text") or "") for c in value.get("content") or []]
                why = result.get("error") or " ".join(texts) or "failed"
                events.append(AgentEvent.say(f"{name} failed: {one_line(str(why))}"))
        elif kind == "error":
            text = one_line(str(item.get("message") or item.get("kind") or "provider error"))
            if item.get("kind") in _FATAL_KINDS:
                session.errors.append(text)
            events.append(AgentEvent.say(text))
    return events


def _tool(name: str, args: dict[str, Any], session: StreamSession) -> AgentEvent:
    name = name.rpartition("__")[2]  # developer__shell -> shell
    if name == "text_editor":
        action = _EDITOR.get(str(args.get("command")), "view")
        return session.tool(action, args, _TOOLS)
    return session.tool(name, args, _TOOLS)


def _usage(data: dict[str, Any]) -> AgentEvent:
    tokens_in, tokens_out = as_int(data.get("input_tokens")), as_int(data.get("output_tokens"))
    if not (tokens_in or tokens_out):
        tokens_in = as_int(data.get("total_tokens"))  # older builds give only a total: counted as input
    return AgentEvent.usage(tokens_in, tokens_out, reported_cost(data.get("cost_usd")))
