"""``kiro``: the Kiro CLI (``kiro-cli``) in non-interactive chat.

One process per step: ``kiro-cli chat --no-interactive --wrap never <trust flags> -- <prompt>``.
Kiro prints no machine-readable stream: stdout is the transcript in plain text (ANSI colours, the
first line prefixed ``> ``), with a header line per tool call (``Reading file: <path>, ...``,
``Replacing: <path>``, ``I will run the following command: <cmd> (using tool: shell)``), the tool's
output, and a status line (`` ✓ ...``). The final message is the text after the last tool call.
stderr ends with a ``▸ Credits: <n> • Time: <t>`` trailer: there are no token counts and no USD.

Kiro exits 0 even when the API key is rejected ("Authentication failed." on stderr, nothing on
stdout), so the credits trailer is the proof that a turn ran; without it the step failed.
Writers trust every tool; read roles trust only ``read``, ``grep`` and ``glob``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from loope.agents.base import Action, AgentEvent, AgentRequest
from loope.agents.catalog import INFO, KIRO_READ_TOOLS, AdapterInfo
from loope.agents.jsonl import relative_path
from loope.agents.message import MessageText
from loope.agents.process import ProcessAgent, Session
from loope.proc import ProcResult
from loope.text import strip_ansi

_HEADERS: tuple[tuple[re.Pattern[str], Action], ...] = (
    (re.compile(r"^Reading (?:file|directory|files): (.+?)(?:, .*)?$"), "read"),
    (re.compile(r"^(?:Replacing|Updating|Appending to|Editing): (.+)$"), "edit"),
    (re.compile(r"^Creating: (.+)$"), "write"),
    (re.compile(r"^I will run the following (?:shell )?command: (.+?)(?: \(using tool: \w+\))?$"), "command"),
    (re.compile(r"^(?:Searching for|Searching|Globbing|Grepping): (.+)$"), "search"),
)
_STATUS = re.compile(r"^\s*[✓✔✗✘❌●]")
_CREDITS = re.compile(r"Credits:\s*([0-9.]+)")


@dataclass
class KiroSession(Session):
    workspace: str | None = None
    in_tool: bool = False
    segment: MessageText = field(default_factory=MessageText)
    """Text since the last tool call (its beginning and end): the final message, once the run ends."""
    tool_output: list[str] = field(default_factory=list)
    first: bool = True


class KiroAgent(ProcessAgent[KiroSession]):
    session_type = KiroSession
    name = "kiro"
    home_state = (".kiro", ".local/share/kiro-cli", ".aws/sso/cache")
    transcript_name = "transcript.log"
    prompt_on_stdin = False
    info: ClassVar[AdapterInfo] = INFO["kiro"]

    def argv(self, request: AgentRequest) -> list[str]:
        argv = [self.binary(), "chat", "--no-interactive", "--wrap", "never"]
        argv.append("--trust-all-tools" if request.mode == "write" else f"--trust-tools={KIRO_READ_TOOLS}")
        if self.model:
            argv += ["--model", self.model]
        return [*argv, *self.extra_args(), "--", request.prompt]

    def environment(self, request: AgentRequest) -> dict[str, str]:
        env = super().environment(request)
        env.setdefault("NO_COLOR", "1")
        return env

    def new_session(self, request: AgentRequest) -> KiroSession:
        return KiroSession(model=self.model, workspace=str(request.workspace))

    def parse_line(self, line: str, session: KiroSession) -> Iterable[AgentEvent]:
        text = strip_ansi(line).rstrip()
        if session.first:
            session.first = False
            text = text.removeprefix("> ")
        for pattern, action in _HEADERS:
            match = pattern.match(text.strip())
            if match:
                session.in_tool, session.segment, session.tool_output = True, MessageText(), []
                target = match.group(1).strip()
                if action in ("read", "edit", "write"):
                    target = relative_path(target, session.workspace)
                return (AgentEvent.act(action, target),)
        if _STATUS.match(text):
            session.in_tool, session.tool_output = False, []
        elif session.in_tool:
            session.tool_output = [*session.tool_output[-199:], text]  # a bounded tail of the tool's output
        else:
            session.texts.append(text)
            session.segment.append(text)
        return ()

    def finish(self, proc: ProcResult, session: KiroSession) -> Iterable[AgentEvent]:
        if session.in_tool and session.tool_output:
            # A tool with no status line: what followed its header may well be the answer.
            for line in session.tool_output:
                session.segment.append(line)
        text = session.segment.text().strip()
        if text:
            session.final = text
        credits = _CREDITS.search(strip_ansi(proc.stderr_tail))
        return (AgentEvent.say(f"kiro-cli used {credits.group(1)} credits"),) if credits else ()

    def judge(self, proc: ProcResult, session: KiroSession) -> str | None:
        if proc.exit_code != 0:
            return super().judge(proc, session)
        if _CREDITS.search(strip_ansi(proc.stderr_tail)):
            return None
        lines = [ln.strip() for ln in strip_ansi(proc.stderr_tail).splitlines() if ln.strip()]
        reason = "kiro-cli exited 0 without its credits line, so no turn ran"
        return f"{reason}: {lines[-1][:300]}" if lines else reason
