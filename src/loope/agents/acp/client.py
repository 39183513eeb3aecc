"""loope's side of one ACP session: the agent's updates as loope events, and loope's answers to it.

The agent asks before it acts (``session/request_permission``) and may read and write files and
run commands through the client (``fs/*``, ``terminal/*``): that is where loope refuses a write
to a protected path before it happens, and every write of a read-only role.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    CreateTerminalResponse,
    DeniedOutcome,
    EnvVariable,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from loope.agents.base import Action, AgentEvent, AgentRequest
from loope.agents.message import MessageText
from loope.proc import Confinement, ProcResult, run_process
from loope.workspace import safefs

_ACTIONS: dict[str, Action] = {
    "read": "read",
    "edit": "edit",
    "delete": "edit",
    "move": "edit",
    "search": "search",
    "execute": "command",
    "fetch": "other",
    "think": "other",
}
READ_ONLY_KINDS = frozenset({"read", "search", "think", "fetch", "switch_mode"})
"""The only tool kinds a read-only role is allowed (a command can write as well as an edit can)."""
TERMINAL_OUTPUT_LIMIT = 1_000_000


@dataclass
class Transcript:
    """What one session said and spent, as it came."""

    message: MessageText = field(default_factory=MessageText)
    """The agent's message since its last tool call (its beginning and end): the step's final message at the end."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    """The session's cumulative cost, when the agent reports one (``usage_update``)."""
    refusals: list[str] = field(default_factory=list)
    last_action: str | None = None


class LoopeClient:
    """The ACP ``Client`` loope is to an agent during one step."""

    def __init__(self, request: AgentRequest, box: Callable[[Path], Confinement] | None = None) -> None:
        self.request = request
        self.workspace = Path(os.path.realpath(request.workspace))
        self.seen = Transcript()
        self.terminals = Terminals(request, box)
        self._pending: dict[str, tuple[str | None, str | None]] = {}
        """Tool calls whose target is not known yet: their kind and title."""

    # -- what the agent says ----------------------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = getattr(update, "session_update", None)
        if kind == "agent_message_chunk":
            text = getattr(update.content, "text", None)
            if isinstance(text, str):
                self.seen.message.add(text)
        elif kind == "tool_call":
            self.flush_message()
            self._tool_call(update)
        elif kind == "tool_call_update":
            self._tool_call_update(update)
        elif kind == "plan":
            steps = [f"[{entry.status}] {entry.content}" for entry in update.entries]
            self.report(AgentEvent.say("plan:\n" + "\n".join(steps)))
        elif kind == "usage_update" and update.cost is not None and update.cost.currency.upper() == "USD":
            self.seen.cost_usd = float(update.cost.amount)

    def flush_message(self) -> None:
        text = self.seen.message.text().strip()
        if text:
            self.report(AgentEvent.say(text))
        self.seen.message = MessageText()

    def finish(self) -> str:
        """The last message the agent sent (reported as an event too)."""
        text = self.seen.message.text().strip()
        self.flush_message()
        return text

    def _tool_call(self, update: Any) -> None:
        """An action, reported once its target is known (agents often send the input in a later update)."""
        target = self._target(update)
        if target is None:
            self._pending[update.tool_call_id] = (update.kind, update.title)
        else:
            self.report(AgentEvent.act(_ACTIONS.get(update.kind or "other", "other"), target))

    def _tool_call_update(self, update: Any) -> None:
        pending = self._pending.get(update.tool_call_id)
        if pending is None:
            return
        kind = update.kind or pending[0]
        target = self._target(update)
        if target is not None or update.status in ("completed", "failed"):
            del self._pending[update.tool_call_id]
            self.report(AgentEvent.act(_ACTIONS.get(kind or "other", "other"), target or pending[1]))

    def _target(self, call: Any) -> str | None:
        for path in self._paths(call):
            return self._shown(path)
        raw = call.raw_input if isinstance(call.raw_input, dict) else {}
        command = raw.get("command") or raw.get("cmd")
        if isinstance(command, list):
            command = " ".join(str(part) for part in command)
        return str(command) if command else None

    def _paths(self, call: Any) -> list[str]:
        found = [loc.path for loc in call.locations or []]
        raw = call.raw_input if isinstance(call.raw_input, dict) else {}
        for key in ("file_path", "path", "notebook_path"):
            if isinstance(raw.get(key), str):
                found.append(raw[key])
        changes = raw.get("changes")
        if isinstance(changes, dict):  # codex's patch approval: {path: change}
            found += [str(path) for path in changes]
        return found

    def _shown(self, path: str) -> str:
        full = Path(path) if os.path.isabs(path) else self.workspace / path
        try:
            return full.relative_to(self.workspace).as_posix()
        except ValueError:
            return path

    def report(self, event: AgentEvent) -> None:
        if event.kind == "action":
            self.seen.last_action = event.describe()
        self.request.on_event(event)

    # -- what loope allows ------------------------------------------------------------------------

    def refusal(self, kind: str | None, paths: list[str]) -> str | None:
        """Why loope refuses this tool call, or None when the agent may go on."""
        kind = kind or "other"
        if self.request.mode == "read" and kind not in READ_ONLY_KINDS:
            return f"loope refuses: the {self.request.role} is read-only and may not {kind} anything"
        if kind not in ("edit", "delete", "move"):
            return None
        for path in paths:
            reason = self.write_refusal(path)
            if reason:
                return reason
        return None

    def write_refusal(self, path: str) -> str | None:
        """Why loope refuses a write of ``path``: outside the workspace (symlinks followed), or guarded."""
        rel = self.inside(path)
        if rel is None:
            return f"loope refuses: {path} is outside the workspace {self.workspace}"
        if self.request.mode == "read":
            return f"loope refuses: the {self.request.role} is read-only and may not write {rel}"
        if ".git" in rel.split("/"):  # loope writes it, outside the sandbox: never into a git dir
            return f"loope refuses: {rel} belongs to git; leave it as it is"
        reason = self.request.may_write(rel) if self.request.may_write else None
        return f"loope refuses: {reason}; leave it as it is" if reason else None

    def inside(self, path: str) -> str | None:
        """``path`` relative to the workspace, every symlink resolved; None when it lands outside."""
        full = Path(path) if os.path.isabs(path) else self.workspace / path
        real = Path(os.path.realpath(full))
        try:
            return real.relative_to(self.workspace).as_posix()
        except ValueError:
            return None

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        reason = self.refusal(tool_call.kind, self._paths(tool_call))
        if reason is None:
            chosen = _option(options, "allow_once", "allow_always")
        else:
            self.seen.refusals.append(reason)
            self.report(AgentEvent.say(reason))
            chosen = _option(options, "reject_once", "reject_always")
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id=chosen, outcome="selected"),
            field_meta={"loope": {"reason": reason}} if reason else None,
        )

    # -- files ------------------------------------------------------------------------------------

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        rel = self.inside(path)
        if rel is None:
            raise RequestError.invalid_params({"path": path, "reason": "loope serves files in the workspace only"})
        self.report(AgentEvent.act("read", rel))
        # Opened step by step, no link followed: a directory the agent swaps for a link after the
        # check above cannot lead the read out of the workspace.
        data = safefs.read_bytes(self.workspace, rel)
        if data is None:
            raise RequestError.invalid_params({"path": path, "reason": "no such file in the workspace"})
        text = data.decode("utf-8", errors="replace")
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            text = "".join(lines[start : start + limit if limit is not None else None])
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        reason = self.write_refusal(path)
        if reason is not None:
            self.seen.refusals.append(reason)
            self.report(AgentEvent.say(reason))
            raise RequestError.invalid_params({"path": path, "reason": reason})
        rel = self.inside(path)
        assert rel is not None  # write_refusal refuses a path outside the workspace
        # Written step by step, no link followed (a link planted on the way after the check is
        # replaced by a real directory): loope writes outside the sandbox, never outside the workspace.
        before = safefs.lstat(self.workspace, rel)
        mode = stat.S_IMODE(before.st_mode) if before is not None and stat.S_ISREG(before.st_mode) else 0o644
        safefs.write_bytes(self.workspace, rel, content.encode("utf-8"), mode)
        self.report(AgentEvent.act("write", rel))
        return WriteTextFileResponse()

    # -- terminals --------------------------------------------------------------------------------

    async def create_terminal(  # noqa: PLR0917 - the signature is the ACP Client protocol's
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        if self.request.mode == "read":
            reason = f"loope refuses: the {self.request.role} is read-only and may not run commands"
            self.seen.refusals.append(reason)
            raise RequestError.invalid_params({"command": command, "reason": reason})
        where = self.inside(cwd) if cwd else "."
        if where is None:
            raise RequestError.invalid_params({"cwd": cwd, "reason": "commands run inside the workspace only"})
        argv = [command, *(args or [])]
        self.report(AgentEvent.act("command", " ".join(argv)))
        extra = {var.name: var.value for var in env or []}
        terminal = self.terminals.start(argv, self.workspace / where, extra, output_byte_limit)
        return CreateTerminalResponse(terminal_id=terminal)

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> TerminalOutputResponse:
        return self.terminals.get(terminal_id).output()

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        terminal = self.terminals.get(terminal_id)
        result = await asyncio.to_thread(terminal.wait)
        status = terminal.exit_status(result)
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> KillTerminalResponse:
        self.terminals.get(terminal_id).cancel.set()
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> ReleaseTerminalResponse:
        self.terminals.release(terminal_id)
        return ReleaseTerminalResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def _option(options: list[PermissionOption], *kinds: str) -> str | None:
    """The id of the first option of the first of ``kinds`` offered."""
    for kind in kinds:
        for option in options:
            if option.kind == kind:
                return option.option_id
    return None


@dataclass
class Terminal:
    """A command the agent runs through loope (``terminal/create``), on loope's subprocess helper."""

    log: Path
    limit: int
    cancel: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    result: ProcResult | None = None

    def wait(self) -> ProcResult | None:
        if self.thread is not None:
            self.thread.join()
        return self.result

    def output(self) -> TerminalOutputResponse:
        try:
            size = self.log.stat().st_size
            with self.log.open("rb") as handle:
                handle.seek(max(size - self.limit, 0))
                data = handle.read()
        except FileNotFoundError:
            size, data = 0, b""
        status = self.exit_status(self.result) if self.result is not None else None
        text = data.decode("utf-8", "replace")
        return TerminalOutputResponse(output=text, truncated=size > self.limit, exit_status=status)

    @staticmethod
    def exit_status(result: ProcResult | None) -> TerminalExitStatus:
        if result is None or result.exit_code is None:
            return TerminalExitStatus(exit_code=None, signal=None)
        if result.exit_code < 0:
            return TerminalExitStatus(exit_code=None, signal=result.signal_name)
        return TerminalExitStatus(exit_code=result.exit_code, signal=None)


class Terminals:
    """The step's terminals, each confined by ``box`` (from its cwd); every one is killed when the step ends."""

    def __init__(self, request: AgentRequest, box: Callable[[Path], Confinement] | None = None) -> None:
        self.request = request
        self.box = box
        self._running: dict[str, Terminal] = {}
        self._ids = itertools.count(1)

    def start(self, argv: list[str], cwd: Path, env: dict[str, str], limit: int | None) -> str:
        terminal_id = f"term-{next(self._ids)}"
        logs = self.request.step_dir / "terminals"
        logs.mkdir(parents=True, exist_ok=True)
        terminal = Terminal(logs / f"{terminal_id}.log", min(limit or TERMINAL_OUTPUT_LIMIT, TERMINAL_OUTPUT_LIMIT))
        full_env = {**os.environ, **self.request.protocol_env(), **self.request.env, **env}
        confine = self.box(cwd) if self.box is not None else None

        def run() -> None:
            log, cancel = terminal.log, terminal.cancel
            terminal.result = run_process(
                argv, cwd=cwd, env=full_env, stdout_path=log, merge_stderr=True, cancel=cancel, term_grace_s=2.0,
                confine=confine,
            )  # fmt: skip

        terminal.thread = threading.Thread(target=run, name=f"loope-acp-{terminal_id}", daemon=True)
        terminal.thread.start()
        self._running[terminal_id] = terminal
        return terminal_id

    def get(self, terminal_id: str) -> Terminal:
        terminal = self._running.get(terminal_id)
        if terminal is None:
            raise RequestError.invalid_params({"terminalId": terminal_id, "reason": "no such terminal"})
        return terminal

    def release(self, terminal_id: str) -> None:
        terminal = self._running.pop(terminal_id, None)
        if terminal is not None:
            terminal.cancel.set()

    def close(self) -> None:
        """Kill every terminal still running and wait for it (nothing outlives the step)."""
        for terminal in self._running.values():
            terminal.cancel.set()
        for terminal in self._running.values():
            terminal.wait()
        self._running.clear()
