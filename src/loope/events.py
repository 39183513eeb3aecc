"""The engine's events (DESIGN.md, Events): one frozen dataclass per event type.

Each line of ``events.jsonl`` (and of ``--json`` output) is one of these, serialized by
:meth:`Event.to_dict` as ``{"ts", "run_id", "type", <fields in declaration order>}``. Observers
receive the typed objects and match on the class. Several classes may share one ``type`` where the
payload differs by kind (an agent step's ``step_finished`` carries a verdict, a metric step's a
score); match on the shared base class to see them all.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from loope.record import record
from loope.records.model import Best, FileChange, Totals, WorkspaceInfo, now_iso
from loope.records.rounds import CandidateResult
from loope.records.serial import to_data

if TYPE_CHECKING:
    from loope.agents.base import AgentEvent  # an annotation only: reading events needs no agent machinery


@record(frozen=True, kw_only=True)
class Event:
    """What every event carries; ``run_id`` is stamped by the bus when the emitter leaves it empty."""

    type: ClassVar[str]
    run_id: str = ""
    ts: str = field(default_factory=now_iso)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"ts": self.ts, "run_id": self.run_id, "type": self.type}
        for f in dataclasses.fields(self):
            if f.name not in ("ts", "run_id"):
                data[f.name] = to_data(getattr(self, f.name))
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, default=str)


class Observer(Protocol):
    """Anything that shows or records a run's progress."""

    def on_event(self, event: Event) -> None: ...


# -- payload parts --------------------------------------------------------------------------------


@record(frozen=True)
class Budgets:
    cost_usd: float | None
    tokens: int | None
    time_s: float | None


@record(frozen=True)
class SandboxInfo:
    """Whether the run's steps run under bubblewrap (``--sandbox``), and whether its checks reach the network."""

    enabled: bool
    mode: str
    network_checks: str


@record(frozen=True)
class Failure:
    """One failing check the gate's output named."""

    test: str
    message: str


@record(frozen=True)
class ReviewerVerdict:
    step: int
    adapter: str
    verdict: str | None
    inferred: bool
    findings: list[str] = field(default_factory=list)
    """The first lines of a blocking verdict's findings (what the views show)."""


# -- the events, in the order a run emits them ---------------------------------------------------


@record(frozen=True, kw_only=True)
class RunStarted(Event):
    type: ClassVar[str] = "run_started"
    goal: str
    workdir: str
    run_dir: str
    state_file: str
    success_cmd: str | None
    pid: int | None
    started_at: str
    workspace: WorkspaceInfo
    implementer: str
    reviewers: list[str]
    verify_cmd: str | None
    metric_cmd: str | None
    max_iters: int
    budgets: Budgets
    dry_run: bool
    warnings: list[str]
    resumed_at: int | None
    """The first iteration this runner runs, when it picks up an earlier run."""
    sandbox: SandboxInfo | None = None


@record(frozen=True, kw_only=True)
class IterationStarted(Event):
    type: ClassVar[str] = "iteration_started"
    iteration: int
    max_iters: int


@record(frozen=True, kw_only=True)
class StepStarted(Event):
    type: ClassVar[str] = "step_started"
    step: int
    iteration: int
    role: str
    adapter: str
    dir: str
    """The step's directory, relative to the run dir."""
    model: str | None = None
    index: int | None = None
    """1, 2, … when agents of one role share an adapter in one iteration (two ``exec`` reviewers)."""
    candidate: int | None = None
    """The candidate (1…N) the step works for, when several race in the iteration."""


@record(frozen=True, kw_only=True)
class AgentActivity(Event):
    """A normalized event an agent reported while its step ran."""

    type: ClassVar[str] = "agent_event"
    step: int
    role: str
    event: AgentEvent


@record(frozen=True, kw_only=True)
class StepFinished(Event):
    """A step ended and its record was saved (the subclasses add what their kind of step learned)."""

    type: ClassVar[str] = "step_finished"
    step: int
    iteration: int
    role: str
    adapter: str
    ok: bool
    error: str | None
    duration_s: float
    cost_usd: float
    files: list[FileChange]
    violations: list[str]
    input_tokens: int = 0
    output_tokens: int = 0
    candidate: int | None = None
    """The candidate (1…N) the step worked for, when several raced in the iteration."""


@record(frozen=True, kw_only=True)
class AgentStepFinished(StepFinished):
    verdict: str | None
    verdict_inferred: bool
    summary: str = ""
    """The first line of the agent's final message."""


@record(frozen=True, kw_only=True)
class SuccessFinished(StepFinished):
    passed: bool


@record(frozen=True, kw_only=True)
class MetricStepFinished(StepFinished):
    score: float | None
    runs: list[float]


@record(frozen=True, kw_only=True)
class Baseline(Event):
    """The gate, run once on the starting tree before iteration 1 (run.json ``gate_baseline``)."""

    type: ClassVar[str] = "baseline"
    command: str
    passed: bool
    exit_code: int | None
    failing: int
    """How many checks failed (the first 20 are in ``failures``)."""
    failures: list[str]
    duration_s: float
    dir: str


@record(frozen=True, kw_only=True)
class StepRetry(Event):
    """An agent step failed for a transient reason and is tried again after ``delay_s``."""

    type: ClassVar[str] = "step_retry"
    step: int
    iteration: int
    adapter: str
    reason: str | None
    attempt: int
    until: str
    delay_s: float


@record(frozen=True, kw_only=True)
class LimitWait(Event):
    """The run waits out an agent's usage limit until ``until`` (ISO 8601)."""

    type: ClassVar[str] = "limit_wait"
    kind: str
    until: str
    reset_at: str | None
    step: int
    iteration: int
    adapter: str
    reason: str | None


@record(frozen=True, kw_only=True)
class GuardViolations(Event):
    type: ClassVar[str] = "guard"
    step: int
    iteration: int
    violations: list[str]


@record(frozen=True, kw_only=True)
class VerifyFinished(Event):
    type: ClassVar[str] = "verify_finished"
    step: int
    iteration: int
    command: str
    passed: bool
    exit_code: int | None
    timed_out: bool
    failures: list[Failure]
    duration_s: float
    failing: int = 0
    """How many checks failed: the runner's own count (``failures`` holds the first of them)."""
    summary: str = ""
    """The runner's closing summary line, when it printed one."""
    output_tail: list[str] = field(default_factory=list)
    """The last lines of a failed gate's output."""
    candidate: int | None = None
    """The candidate (1…N) whose workspace the gate checked, when several raced."""


@record(frozen=True, kw_only=True)
class Metric(Event):
    """A score: the original tree's (iteration 0) or an attempt's."""

    type: ClassVar[str] = "metric"
    iteration: int
    score: float | None


@record(frozen=True, kw_only=True)
class BaselineMeasured(Metric):
    baseline: float | None
    error: str | None


@record(frozen=True, kw_only=True)
class AttemptScored(Metric):
    runs: list[float]
    error: str | None
    best: float | None


@record(frozen=True, kw_only=True)
class ReviewFinished(Event):
    type: ClassVar[str] = "review_finished"
    iteration: int
    verdicts: list[ReviewerVerdict]


@record(frozen=True, kw_only=True)
class Selection(Event):
    """The candidates of an iteration ranked: the winner is kept, the others stay under their refs."""

    type: ClassVar[str] = "selection"
    iteration: int
    winner: int
    why: str
    candidates: list[CandidateResult]
    """Every candidate, best first, with why it lost."""


@record(frozen=True, kw_only=True)
class Decision(Event):
    type: ClassVar[str] = "decision"
    iteration: int
    stop: str | None
    verdict: str
    why: str
    blockers: int


@record(frozen=True, kw_only=True)
class Critique(Event):
    type: ClassVar[str] = "critique"
    iteration: int
    step: int
    text: str


@record(frozen=True, kw_only=True)
class IterationFinished(Event):
    type: ClassVar[str] = "iteration_finished"
    iteration: int
    stop: str | None
    totals: Totals


@record(frozen=True, kw_only=True)
class RunFinished(Event):
    type: ClassVar[str] = "run_finished"
    status: str
    stop_reason: str
    stop_detail: str | None
    converged: bool
    iterations: int
    totals: Totals
    best: Best | None
    baseline: float | None
    changes: list[FileChange]
    workspace: WorkspaceInfo


def _event_classes(cls: type[Event] = Event) -> list[type[Event]]:
    found: list[type[Event]] = []
    for sub in cls.__subclasses__():
        found += [sub, *_event_classes(sub)]
    return found


EVENT_CLASSES: tuple[type[Event], ...] = tuple(_event_classes())
EVENT_TYPES: tuple[str, ...] = tuple(dict.fromkeys(c.type for c in EVENT_CLASSES))
"""Every event ``type`` (DESIGN.md, Events), in the order a run emits them."""
