"""The agent contract: what the engine asks of an agent, and what it gets back.

An adapter drives one agent CLI (or a user's command, or the stub). The engine only ever sees
``Agent.run(AgentRequest) -> AgentResult`` and the normalized ``AgentEvent``s reported while it runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from loope.agents.catalog import AdapterInfo
from loope.enums import Role
from loope.record import record

if TYPE_CHECKING:
    from loope.agents.setback import Setback
    from loope.sandbox import RunSandbox

Mode = Literal["write", "read"]
EventKind = Literal["action", "message", "usage"]
Action = Literal["edit", "write", "read", "command", "search", "other"]

WRITE_ROLES: frozenset[Role] = frozenset({Role.DESIGNER, Role.IMPLEMENTER})


def mode_for(role: Role) -> Mode:
    """Designers and implementers write; reviewers, verifiers and critics only read."""
    return "write" if role in WRITE_ROLES else "read"


@dataclass(frozen=True)
class AgentEvent:
    """One normalized thing an agent did or said while it ran (DESIGN.md, Events)."""

    kind: EventKind
    action: Action | None = None
    target: str | None = None
    text: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None

    @classmethod
    def act(cls, action: Action, target: str | None) -> AgentEvent:
        return cls("action", action=action, target=target)

    @classmethod
    def say(cls, text: str) -> AgentEvent:
        return cls("message", text=text)

    @classmethod
    def usage(
        cls, input_tokens: int | None = None, output_tokens: int | None = None, cost_usd: float | None = None
    ) -> AgentEvent:
        return cls("usage", input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind}
        for key in ("action", "target", "text", "input_tokens", "output_tokens", "cost_usd"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data

    def describe(self) -> str:
        """How the live view shows an action: ``edit src/x.py``, ``run pytest -q``."""
        verb = "run" if self.action == "command" else (self.action or self.kind)
        return f"{verb} {self.target}" if self.target else verb


def _ignore(_: AgentEvent) -> None:
    return None


def _unsandboxed() -> RunSandbox:
    """No sandbox (imported when a request is made: listing adapters needs none of the sandbox's machinery)."""
    from loope.sandbox import UNSANDBOXED

    return UNSANDBOXED


@record(frozen=True)
class AgentRequest:
    """Everything one agent invocation needs."""

    role: Role
    prompt: str
    workspace: Path
    step_dir: Path
    run_id: str
    run_dir: Path
    iteration: int
    state_file: Path
    timeout_s: float | None = None
    max_budget_usd: float | None = None
    """The run's remaining budget, for agents that accept a spending cap."""
    isolate_home: bool = False
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment for the agent, on top of the caller's."""
    cancel: threading.Event | None = None
    on_event: Callable[[AgentEvent], None] = _ignore
    on_spawn: Callable[[int], None] | None = None
    """Told the process group id of the agent's process as soon as it starts."""
    sandbox: RunSandbox = field(default_factory=_unsandboxed)
    """The run's sandbox, which gives the agent's process its box."""
    may_write: Callable[[str], str | None] | None = None
    """Why the agent may not write a workspace-relative path (protected, not editable), or None when it
    may: the guard's rules, for adapters that see a write before it happens (ACP) and refuse it."""

    @property
    def mode(self) -> Mode:
        return mode_for(self.role)

    @property
    def sandboxed(self) -> bool:
        """The step runs inside loope's sandbox (a CLI's own sandbox is then redundant, and may not nest)."""
        return self.sandbox.enabled

    @property
    def prompt_file(self) -> Path:
        return self.step_dir / "prompt.md"

    def protocol_env(self) -> dict[str, str]:
        """The LOOPE_* variables every agent process receives."""
        return {
            "LOOPE_PROMPT_FILE": str(self.prompt_file),
            "LOOPE_ROLE": self.role,
            "LOOPE_MODE": self.mode,
            "LOOPE_ITERATION": str(self.iteration),
            "LOOPE_RUN_ID": self.run_id,
            "LOOPE_RUN_DIR": str(self.run_dir),
            "LOOPE_STEP_DIR": str(self.step_dir),
            "LOOPE_WORKSPACE": str(self.workspace),
            "LOOPE_STATE_FILE": str(self.state_file),
        }


@record()
class AgentResult:
    """How an agent invocation ended, and what it said and cost."""

    ok: bool
    message: str
    error: str | None = None
    """One line saying why the step failed (None when it did not)."""
    exit_code: int | None = None
    timed_out: bool = False
    cancelled: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_estimated: bool = False
    cost_known: bool = True
    """False when the agent spent tokens loope cannot price (``cost_usd`` then counts nothing for them)."""
    last_action: str | None = None
    model: str | None = None
    budget_exhausted: bool = False
    """The agent stopped at the spending cap loope passed it (the run's budget is spent)."""
    setback: Setback | None = None
    """The failure is transient or a usage limit: trying again later may succeed."""
    attempts: int = 1
    """How many times the step was tried (retries after transient failures and limits included)."""
    undone: tuple[str, ...] = ()
    """What the step changed that loope put back on its own (the CLI's configuration files), a line each."""


class Agent(Protocol):
    """An adapter instance bound to one agent spec (``claude:opus``, ``exec:./fix.sh``, ``stub``)."""

    name: str
    model: str | None
    info: ClassVar[AdapterInfo]

    def preflight(self, workdir: Path) -> str | None:
        """Why the agent cannot run from ``workdir`` (checked before a run writes anything), or None."""
        ...

    @property
    def label(self) -> str:
        """Short name for records and step directories (``claude``, ``exec``)."""
        ...

    def run(self, request: AgentRequest) -> AgentResult: ...
