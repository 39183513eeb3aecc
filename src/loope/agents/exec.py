"""``exec:<command>``: a user's own program as an agent (DESIGN.md, the ``exec:`` protocol).

The command runs through the shell in the workspace with the prompt on stdin and the LOOPE_*
variables set. A stdout line holding a JSON object whose ``type`` is ``usage``, ``action`` or
``message`` is an event (usage lines add up); every other line is part of the final message.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, cast

from loope.agents.base import Action, AgentEvent, AgentRequest
from loope.agents.catalog import INFO, AdapterInfo
from loope.agents.jsonl import json_object
from loope.agents.process import ProcessAgent, Session
from loope.agents.setback import Setback, limit, parse_reset, transient
from loope.proc import ProcResult
from loope.shell import missing_program
from loope.text import amount, count

_PLAIN_WORD = re.compile(r"[A-Za-z0-9_@%+,./:-]+")
"""A word the shell passes on unchanged: no quotes, variables, globs, redirections or separators."""
_ACTIONS = frozenset({"edit", "write", "read", "command", "search", "other"})


class ExecAgent(ProcessAgent[Session]):
    session_type = Session
    name = "exec"
    transcript_name = "transcript.log"
    info: ClassVar[AdapterInfo] = INFO["exec"]

    def __init__(self, command: str, *, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(None, options=options)
        self.command = command

    def argv(self, request: AgentRequest) -> list[str]:
        # A program named by its path with plain words after it replaces the shell (one process less
        # per step); anything else (pipes, variables, builtins) is the shell's to run.
        words = self.command.split()
        if words and "/" in words[0] and all(_PLAIN_WORD.fullmatch(w) for w in words):
            return ["/bin/sh", "-c", f"exec {self.command}"]
        return ["/bin/sh", "-c", self.command]

    def visible_paths(self, request: AgentRequest) -> list[Path]:
        from loope.sandbox.layout import named_paths

        return named_paths(self.command, request.workspace) if request.sandboxed else []

    def preflight(self, workdir: Path) -> str | None:
        """Why the command cannot run from ``workdir``, or None."""
        try:
            words = shlex.split(self.command)
        except ValueError:
            words = [self.command]  # missing_program says what is wrong with the quotes
        if not words or not words[0].strip():
            return "exec: needs a command, for example exec:./agent.sh"
        problem = missing_program(self.command, workdir)
        return f"exec:{self.command}: {problem}" if problem else None

    def read_block(self, block: bytes, session: Session) -> Iterable[AgentEvent]:
        """Events in a block of lines; the text around them goes to the message in bulk.

        Only lines that start with ``{`` can be events, so the rest of the block is never split
        line by line: printing 200 MB of plain text costs little more than writing it to a file.
        """
        events: list[AgentEvent] = []
        start = 0
        for match in _JSON_LINE.finditer(block) if b"{" in block else ():
            event = _protocol_event(match.group().decode("utf-8", "replace"), session)
            if event is None:
                continue
            _add_text(session, block[start : match.start()])
            events.append(event)
            start = match.end() + 1
        _add_text(session, block[start:])
        return events

    def parse_line(self, line: str, session: Session) -> Iterable[AgentEvent]:
        event = _protocol_event(line, session)
        if event is None:
            session.texts.append(line)
            return ()
        return (event,)

    def setback(self, error: str, proc: ProcResult, session: Session) -> Setback | None:
        """Only what the protocol's ``retry`` and ``limit`` lines say: a user's program is never guessed at."""
        return session.setback

    def judge(self, proc: ProcResult, session: Session) -> str | None:
        if proc.exit_code == 127 and "not found" in proc.stderr_tail:
            return f"exec: command not found: {self.command} ({proc.stderr_tail.strip().splitlines()[-1]})"
        return super().judge(proc, session)


def _protocol_event(line: str, session: Session) -> AgentEvent | None:
    """The event a protocol line carries (a retry or limit line is noted in ``session`` too); None for text."""
    setback = _setback_from_json(line)
    if setback is not None:
        session.setback = setback
        return AgentEvent.say(f"{setback.kind}: {setback.reason}")
    return _event_from_json(line)


def _setback_from_json(line: str) -> Setback | None:
    """A protocol line ``{"type": "retry", "reason": …}`` or ``{"type": "limit", "reset_at": …}``."""
    data = json_object(line)
    if data is None:
        return None
    reason = str(data.get("reason") or data.get("message") or "")
    if data.get("type") == "retry":
        return transient(reason or "the agent reported a transient failure")
    if data.get("type") == "limit":
        return limit(reason or "the agent reported a usage limit", parse_reset(data.get("reset_at")))
    return None


_JSON_LINE = re.compile(rb"^[ \t]*\{.*$", re.MULTILINE)


def _add_text(session: Session, raw: bytes) -> None:
    """Newline-ended lines of plain output into the message."""
    text = raw.decode("utf-8", "replace")
    if text.strip():
        session.texts.extend(text.replace("\r\n", "\n") if "\r" in text else text)


def _event_from_json(line: str) -> AgentEvent | None:
    data = json_object(line)
    if data is None:
        return None
    kind = data.get("type")
    if kind == "usage":
        return AgentEvent.usage(
            count(data.get("input_tokens")), count(data.get("output_tokens")), amount(data.get("cost_usd"))
        )
    if kind == "action":
        action = str(data.get("action", "other"))
        target = data.get("target")
        return AgentEvent.act(
            cast(Action, action if action in _ACTIONS else "other"),
            str(target) if target is not None else None,
        )
    if kind == "message":
        return AgentEvent.say(str(data.get("text", "")))
    return None
