"""Adapters by name. Built-in adapters load lazily, so startup pays only for the ones a run uses; what
each one is (its ``info``) reads from the catalog without loading it."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from loope.agents.catalog import INFO, AdapterInfo
from loope.errors import LoopeError

if TYPE_CHECKING:
    from loope.agents.base import Agent

_ADAPTERS: dict[str, str] = {
    "claude": "loope.agents.claude:ClaudeAgent",
    "codex": "loope.agents.codex:CodexAgent",
    "gemini": "loope.agents.gemini:GeminiAgent",
    "opencode": "loope.agents.opencode:OpenCodeAgent",
    "cursor": "loope.agents.cursor:CursorAgent",
    "amp": "loope.agents.amp:AmpAgent",
    "copilot": "loope.agents.copilot:CopilotAgent",
    "goose": "loope.agents.goose:GooseAgent",
    "aider": "loope.agents.aider:AiderAgent",
    "qwen": "loope.agents.qwen:QwenAgent",
    "kiro": "loope.agents.kiro:KiroAgent",
    "claude-acp": "loope.agents.acp.agent:ClaudeAcpAgent",
    "codex-acp": "loope.agents.acp.agent:CodexAcpAgent",
    "gemini-acp": "loope.agents.acp.agent:GeminiAcpAgent",
    "stub": "loope.agents.stub:StubAgent",
}
_OWN_COMMAND: dict[str, str] = {"exec": "loope.agents.exec:ExecAgent", "acp": "loope.agents.acp.agent:AcpAgent"}
"""Adapters that run the user's own command (``exec:<command>``, ``acp:<command>``)."""


class AgentSpec(NamedTuple):
    """A parsed agent spec: ``claude``, ``claude:opus``, ``exec:<command>`` or ``acp:<command>``."""

    name: str
    model: str | None = None
    command: str | None = None

    def __str__(self) -> str:
        if self.command is not None:
            return f"{self.name}:{self.command}"
        return f"{self.name}:{self.model}" if self.model else self.name


def known() -> list[str]:
    """Every adapter name, ``exec`` and ``acp`` included."""
    return sorted([*_ADAPTERS, *_OWN_COMMAND])


def parse(spec: str) -> AgentSpec:
    """Parse and check an agent spec; an unknown name's error lists the known ones."""
    text = spec.strip()
    if text.startswith("exec:"):
        command = text[len("exec:") :].strip()
        if not command:
            raise LoopeError("exec: needs a command, for example --implementer 'exec:./agent.sh'")
        return AgentSpec("exec", command=command)
    if text.startswith("acp:"):
        command = text[len("acp:") :].strip()
        if not command:
            raise LoopeError(
                "acp: needs the command that starts the agent, for example 'acp:gemini --experimental-acp'"
            )
        return AgentSpec("acp", command=command)
    name, _, model = text.partition(":")
    name = name.strip().lower()
    if name not in _ADAPTERS:
        import difflib  # an unknown name only

        close = difflib.get_close_matches(name, known(), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise LoopeError(
            f"unknown agent {spec!r}; {hint}known agents: {', '.join(known())}"
            " (or exec:<command> for your own, acp:<command> for any ACP agent)"
        )
    return AgentSpec(name, model.strip() or None)


def adapter_class(name: str) -> Any:
    module, _, cls = (_ADAPTERS.get(name) or _OWN_COMMAND[name]).partition(":")
    return getattr(importlib.import_module(module), cls)


def info(name: str) -> AdapterInfo:
    """What ``loope adapters`` shows about ``name``, its module left unloaded."""
    return INFO[name]


def create(spec: AgentSpec, options: Mapping[str, Any] | None = None) -> Agent:
    """An agent instance for ``spec``; ``options`` are its loope.toml settings (args, bin, prices)."""
    cls = adapter_class(spec.name)
    if spec.command is not None:
        agent: Agent = cls(spec.command, options=options)
    else:
        agent = cls(spec.model, options=options)
    return agent
