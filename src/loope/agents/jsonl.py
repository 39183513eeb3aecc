"""What the adapters whose CLI prints one JSON object a line share.

``StreamAgent`` reads each stdout line as a JSON object and hands it to the adapter's ``on_json``;
lines that are not JSON are kept aside (warnings, or proof that the binary is not the expected CLI).
``StreamSession`` tracks what every such CLI reports: assistant text (whole or in chunks), tool
calls with the workspace-relative paths they touch, per-message token counts, and whether the
CLI's terminal event ever came. The judgment is shared too: a recorded error wins over any exit
code, and a clean exit without the terminal event is a failure, not a success.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from loope.agents.base import Action, AgentEvent, AgentRequest
from loope.agents.message import MessageText
from loope.agents.process import ProcessAgent, Session
from loope.proc import ProcResult
from loope.record import record
from loope.text import amount as as_float
from loope.text import one_line, strip_ansi

ToolTable = Mapping[str, tuple[Action, tuple[str, ...]]]
"""Tool name -> (normalized action, the argument names that may hold its target, in order)."""

_JSON_MESSAGE = re.compile(r'"message"\s*:\s*("(?:[^"\\]|\\.)*")')
_FILE_ACTIONS = frozenset({"edit", "write", "read"})
RECENT_KEPT = 512
"""How many tool calls (or replies) a session remembers by id: their results and repeats follow closely."""


class Recent(dict[str, Any]):
    """A dict of the ``RECENT_KEPT`` keys set last: a stream of a million tool calls holds 512 of them."""

    def __setitem__(self, key: str, value: Any) -> None:
        self.pop(key, None)
        super().__setitem__(key, value)
        if len(self) > RECENT_KEPT:
            oldest = next(iter(self))
            self.evicted(oldest, self.pop(oldest))

    def evicted(self, key: str, value: Any) -> None:
        """What to do with the oldest entry as it is dropped (nothing, by default)."""


class ReplyUsage(Recent):
    """Tokens per reply id; replies dropped from memory still count, in ``folded``."""

    def __init__(self) -> None:
        super().__init__()
        self.folded = (0, 0)
        self.replies = 0
        """Replies ever noted (those dropped included)."""

    def evicted(self, key: str, value: Any) -> None:
        self.folded = (self.folded[0] + value[0], self.folded[1] + value[1])

    def note(self, key: str | None, tokens_in: int, tokens_out: int) -> None:
        """Tokens of one reply; a reply repeated on several lines (one per block) counts once."""
        key = key or f"#{self.replies}"
        if key not in self:
            self.replies += 1
        seen_in, seen_out = self.get(key, (0, 0))
        self[key] = (max(seen_in, tokens_in), max(seen_out, tokens_out))

    def totals(self) -> tuple[int, int] | None:
        """(input, output) tokens of every reply noted; None when none was."""
        if not self.replies:
            return None
        return self.folded[0] + sum(i for i, _ in self.values()), self.folded[1] + sum(o for _, o in self.values())


@record()
class StreamSession(Session):
    """What one JSON-streaming CLI has printed so far."""

    workspace: Path | None = None
    cwd: str | None = None
    """The working directory the CLI reports, when it does."""
    done: bool = False
    """The CLI's terminal event arrived (a result, a completion)."""
    json_seen: bool = False
    noise: list[str] = field(default_factory=list)
    """Lines that were not JSON objects."""
    segment: MessageText = field(default_factory=MessageText)
    """The assistant message being streamed in chunks (its beginning and end: a delta stream may be endless)."""
    tool_names: Recent = field(default_factory=Recent)
    """Tool call id -> tool name, for CLIs whose results name only the call."""
    message_usage: ReplyUsage = field(default_factory=ReplyUsage)
    """Per model reply: (input, output) tokens, for CLIs without totals (or when they never came)."""

    def relative(self, path: str) -> str:
        """``path`` relative to the workspace when it lies inside it (CLIs report absolute paths)."""
        return relative_path(path, self.cwd, str(self.workspace) if self.workspace else None)

    def tool(self, name: str, args: object, tools: ToolTable) -> AgentEvent:
        """The action event for a call of tool ``name`` with ``args``."""
        action, keys = tools.get(name, ("other", ()))
        if action == "other":
            return AgentEvent.act("other", name)
        values = args if isinstance(args, dict) else {}
        target = next((values[k] for k in keys if isinstance(values.get(k), str) and values[k]), None)
        if target is None:
            return AgentEvent.act(action, None)
        return AgentEvent.act(action, self.relative(target) if action in _FILE_ACTIONS else target)

    def say(self, text: str) -> list[AgentEvent]:
        """A whole assistant message: the final message so far, and a live event."""
        text = text.strip()
        if not text:
            return []
        self.texts.append(text)
        self.final = text
        return [AgentEvent.say(text)]

    def flush(self) -> list[AgentEvent]:
        """The streamed chunks as one message (called when anything else arrives)."""
        if not self.segment:
            return []
        text, self.segment = self.segment.text(), MessageText()
        return self.say(text)

    def note_usage(self, key: str | None, tokens_in: int, tokens_out: int) -> None:
        """Tokens of one reply; a reply repeated on several lines (one per block) counts once."""
        self.message_usage.note(key, tokens_in, tokens_out)

    def usage_from_messages(self) -> AgentEvent | None:
        totals = self.message_usage.totals()
        return None if totals is None else AgentEvent.usage(*totals)


SS = TypeVar("SS", bound=StreamSession)


class StreamAgent(ProcessAgent[SS]):
    """An adapter for a CLI that prints JSON lines; subclasses implement ``on_json``."""

    product: ClassVar[str]
    """The CLI's own name, for messages (``Gemini CLI``)."""
    prompt_on_stdin = False

    usage_from_lines: ClassVar[Literal["never", "without a result", "always"]] = "never"
    """When to count the tokens the assistant lines showed: never (the result line has the totals),
    without a result line (the CLI was killed or timed out before printing it), or always (it prints none)."""

    def new_session(self, request: AgentRequest) -> SS:
        return self.session_type(model=self.model, workspace=request.workspace)

    def parse_line(self, line: str, session: SS) -> Iterable[AgentEvent]:
        data = json_object(line)
        if data is None:
            if len(session.noise) < 20:  # only the first lines are ever shown
                session.noise.append(line)
            return ()
        session.json_seen = True
        return self.on_json(data, session)

    def on_json(self, data: dict[str, Any], session: SS) -> Iterable[AgentEvent]:
        raise NotImplementedError

    def finish(self, proc: ProcResult, session: SS) -> Iterable[AgentEvent]:
        events = session.flush()
        count = self.usage_from_lines == "always" or (self.usage_from_lines == "without a result" and not session.done)
        usage = session.usage_from_messages() if count else None
        return [*events, usage] if usage else events

    def judge(self, proc: ProcResult, session: SS) -> str | None:
        if session.errors:
            return session.errors[-1]
        if proc.signal_name:
            killed = f"{self.label} was killed by {proc.signal_name}"
            return f"{killed} (last action: {session.last_action})" if session.last_action else killed
        if session.done or (proc.exit_code != 0 and not session.json_seen and not session.noise):
            # Finished (a non-zero exit still fails it), or failed before printing anything at all.
            return super().judge(proc, session) if proc.exit_code != 0 else None
        detail = detail_from(proc.stderr_tail)
        ended = f"{self.label} exited" if proc.exit_code == 0 else f"{self.label} exited with {proc.describe()}"
        if not session.json_seen:
            first = session.noise[0].strip()[:200] if session.noise else ""
            shown = f" (first line: {first!r})" if first else ""
            reason = f"{ended} without printing {self.product}'s JSON events{shown}"
            reason += f"; check that {self.binary()} is {self.product}"
        else:
            reason = f"{ended} before its final event"
        return f"{reason}: {detail}" if detail else reason


# -- Claude Code's stream-json, which qwen and amp print too ------------------------------------


def assistant_blocks(message: Mapping[str, Any], session: StreamSession, tools: ToolTable) -> list[AgentEvent]:
    """Events in an ``assistant`` line's content: text blocks and tool calls."""
    events: list[AgentEvent] = []
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            events += session.say(block["text"])
        elif block.get("type") == "tool_use":
            name = str(block.get("name") or "tool")
            session.tool_names[str(block.get("id"))] = name
            events.append(session.tool(name, block.get("input"), tools))
    return events


def tool_errors(message: Mapping[str, Any], session: StreamSession) -> list[AgentEvent]:
    """A ``user`` line's failed tool results, as messages (a refused tool is news, not a failure)."""
    events: list[AgentEvent] = []
    for block in message.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("is_error") is True:
            name = session.tool_names.get(str(block.get("tool_use_id")), "a tool")
            content = block.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            events.append(AgentEvent.say(f"{name} failed: {one_line(text)}"))
    return events


# -- small helpers -------------------------------------------------------------------------------


def relative_path(path: str, *roots: str | None) -> str:
    """``path`` relative to the first of ``roots`` it lies inside (symlinks resolved too), else as given."""
    if not os.path.isabs(path):
        return path
    for root in roots:
        if not root:
            continue
        for base in {root, os.path.realpath(root)}:
            rel = os.path.relpath(path, base)
            if rel != os.pardir and not rel.startswith(os.pardir + os.sep):
                return rel
    return path


def json_object(line: str) -> dict[str, Any] | None:
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def reported_cost(value: object) -> float | None:
    """A USD figure the CLI reported; 0 means the CLI did not know the price, so it is no figure."""
    cost = as_float(value)
    return cost if cost else None


def api_error(text: str) -> str:
    """``[API Error: {"error": {"code": 401, "message": "..."}}]`` -> ``API error 401: ...``."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    start, end = text.find("{"), text.rfind("}")
    if start >= 0 and end > start:
        try:
            body = json.loads(text[start : end + 1])
        except ValueError:
            body = None
        error = as_dict(body.get("error")) if isinstance(body, dict) else {}
        if isinstance(error.get("message"), str):
            code = error.get("code")
            return f"API error {code}: {error['message']}" if code else f"API error: {error['message']}"
    return one_line(text)


def detail_from(stderr: str) -> str:
    """The most telling part of a CLI's stderr: the last JSON ``message`` in it, else its last line."""
    found = _JSON_MESSAGE.findall(stderr[-4000:])
    if found:
        try:
            return api_error(str(json.loads(found[-1])))
        except ValueError:
            pass
    lines = [ln.strip() for ln in strip_ansi(stderr).splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""
