"""Adapters by name. Built-in adapters load lazily, so startup pays only for the ones a run uses."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loope.agents.acp.agent import AcpAgent
from loope.agents.base import AdapterInfo, Agent
from loope.agents.exec import ExecAgent
from loope.errors import LoopeError

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


@dataclass(frozen=True)
class AgentSpec:
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
    return sorted([*_ADAPTERS, "exec", "acp"])


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
        close = difflib.get_close_matches(name, known(), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise LoopeError(
            f"unknown agent {spec!r}; {hint}known agents: {', '.join(known())}"
            " (or exec:<command> for your own, acp:<command> for any ACP agent)"
        )
    return AgentSpec(name, model.strip() or None)


def adapter_class(name: str) -> Any:
    if name == "exec":
        return ExecAgent
    if name == "acp":
        return AcpAgent
    module, _, cls = _ADAPTERS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def info(name: str) -> AdapterInfo:
    info_: AdapterInfo = adapter_class(name).info
    return info_


def create(spec: AgentSpec, options: Mapping[str, Any] | None = None) -> Agent:
    """An agent instance for ``spec``; ``options`` are its loope.toml settings (args, bin, prices)."""
    cls = adapter_class(spec.name)
    if spec.command is not None:
        agent: Agent = cls(spec.command, options=options)
    else:
        agent = cls(spec.model, options=options)
    return agent
