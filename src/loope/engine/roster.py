"""Who and what a run works with: its agents, its outside control and memory, and the state it carries."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import field
from typing import Protocol

from loope.agents import registry
from loope.agents.base import Agent
from loope.enums import Role
from loope.errors import LoopeError
from loope.events import Observer
from loope.record import record
from loope.records.model import RunRecord
from loope.records.rundir import RunDir
from loope.spec import LoopSpec


class Control(Protocol):
    """Asked before every step whether someone (``loope stop``, the MCP tool) wants the run to stop."""

    def watch(self, run_id: str, cancel: threading.Event) -> None:
        """From now until :meth:`close`, set ``cancel`` when the step in flight must be killed (``stop --now``)."""

    def stop_requested(self) -> bool: ...

    def close(self) -> None: ...


class Memory(Protocol):
    """Lessons from earlier runs: recalled into the prompt, and one kept when a run ends."""

    def recall(self, goal: str, *, exclude: str | None = None) -> str: ...

    def remember(self, record: RunRecord, rundir: RunDir) -> None: ...


@record(frozen=True)
class Services:
    """What a run is wired to, built by its caller: who watches (observers), who may stop it, what it remembers."""

    observers: Sequence[Observer] = ()
    control: Control | None = None
    memory: Memory | None = None


NO_SERVICES = Services()


@record()
class Agents:
    implementer: Agent
    reviewers: list[Agent]
    designer: Agent | None
    verifier: Agent | None
    critic: Agent | None
    candidates: list[Agent] = field(default_factory=list)
    """One implementer per candidate when several race each iteration (empty otherwise)."""

    def all(self) -> list[Agent]:
        extra = [a for a in (self.designer, self.verifier, self.critic) if a is not None]
        return [self.implementer, *self.candidates, *self.reviewers, *extra]

    def reviewing(self) -> list[tuple[Agent, Role]]:
        """The agents that read an iteration's work once its gate passed: the reviewers, then the agent verifier."""
        agents = [(a, Role.REVIEWER) for a in self.reviewers]
        return agents + ([(self.verifier, Role.VERIFIER)] if self.verifier is not None else [])

    def cost_blind(self) -> list[str]:
        """The agents whose CLI reports no cost loope can count (amp, kiro)."""
        blind = [a.label for a in self.all() if a.info.cost_source.startswith("none")]
        return sorted(set(blind))

    @classmethod
    def from_spec(cls, spec: LoopSpec) -> Agents:
        """Create every agent of the run, and check each can run before anything is written."""

        def make(text: str | None) -> Agent | None:
            if not text:
                return None
            parsed = registry.parse(text)
            agent = registry.create(parsed, spec.agent_options(parsed.name))
            problem = agent.preflight(spec.workdir)
            if problem:
                raise LoopeError(problem)
            return agent

        implementer = make(spec.implementer)
        assert implementer is not None
        racing = len(spec.candidate_agents) > 1
        return cls(
            implementer=implementer,
            reviewers=[a for a in (make(r) for r in spec.reviewers) if a is not None],
            designer=make(spec.designer or spec.implementer) if spec.design else None,
            verifier=make(spec.verifier),
            critic=make(spec.critic),
            candidates=[a for a in map(make, spec.candidate_agents) if a is not None] if racing else [],
        )
