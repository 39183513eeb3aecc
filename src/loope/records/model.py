"""run.json (schema 1): the run's record. Fields are added freely and never renamed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from loope.enums import Direction
from loope.record import record
from loope.records.rounds import Round
from loope.records.serial import fields_data, from_data

SCHEMA = 1

ChangeStatus = Literal["added", "modified", "deleted"]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class FileChange:
    """One file's change between two commits (run.json ``changes.files``, a step's ``files``)."""

    path: str
    status: ChangeStatus
    added: int | None
    """Lines added; None for a binary file."""
    removed: int | None

    @property
    def stat(self) -> str:
        """``+3 −1``, or ``binary``."""
        if self.added is None or self.removed is None:
            return "binary"
        return f"+{self.added} −{self.removed}"


@record()
class StepRecord:
    id: int
    iteration: int
    role: str
    adapter: str
    dir: str
    ok: bool = True
    error: str | None = None
    gate_passed: bool | None = None
    failing: int | None = None
    """A gate step: how many checks failed (0 when it passed; None when none could be named)."""
    verdict: str | None = None
    verdict_inferred: bool = False
    score: float | None = None
    duration_s: float = 0.0
    cost_usd: float = 0.0
    cost_estimated: bool = False
    cost_known: bool = True
    input_tokens: int = 0
    output_tokens: int = 0
    changed_files: list[str] = field(default_factory=list)
    files: list[FileChange] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    commit: str | None = None
    model: str | None = None
    attempts: int = 1
    """Times the step was tried; earlier attempts are kept under ``attempts/`` in its directory."""
    candidate: int | None = None
    """Which candidate of its iteration the step belongs to (1…N), when several raced; None otherwise."""
    started_at: str | None = None
    """When an agent step's process started and ended (ISO 8601): steps that ran at once overlap."""
    finished_at: str | None = None


@record()
class Totals:
    cost_usd: float = 0.0
    cost_estimated: bool = False
    cost_unknown_steps: int = 0
    """Steps whose cost loope could not learn or estimate: ``cost_usd`` is then a lower bound."""
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, step: StepRecord) -> None:
        self.cost_usd = round(self.cost_usd + step.cost_usd, 6)
        self.cost_estimated = self.cost_estimated or step.cost_estimated
        self.cost_unknown_steps += 0 if step.cost_known else 1
        self.input_tokens += step.input_tokens
        self.output_tokens += step.output_tokens

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@record()
class WorkspaceInfo:
    mode: str
    path: str
    branch: str | None
    base: str
    head: str
    git_dir: str | None = None
    start: str | None = None
    """A worktree run's branch starts at this commit, the user's HEAD as the run started ("": none)."""
    removed: bool = False
    """The worktree was removed when the run ended (its result is on the branch); ``continue`` makes it again."""
    note: str | None = None
    """Why a finished run's worktree was kept, or what removing it left behind."""


@record(frozen=True)
class MetricSettings:
    command: str
    direction: Direction | None
    target: float | None


@record(frozen=True)
class Best:
    """The best score kept so far, and where (iteration 0 is the original tree)."""

    score: float
    iteration: int
    commit: str | None = None


@record()
class Changes:
    files: list[FileChange] = field(default_factory=list)


@record()
class LoopState:
    """What one iteration hands the next; saved in run.json so a resumed run picks it up."""

    feedback: str = ""
    feedback_key: list[str] = field(default_factory=list)
    """What the feedback says, without iteration numbers or timings: tells fresh feedback from a repeat."""
    previous_failures: list[str] | None = None
    streak: int = 0
    idle: int = 0
    best_commit: str | None = None
    critique: str = ""
    summaries: list[str] = field(default_factory=list)
    last_response: str = ""


@record(frozen=True)
class Waiting:
    """A usage limit the run waits out: until when (ISO 8601), and which step's agent said so."""

    kind: str
    until: str
    reset_at: str | None
    step: int
    iteration: int
    adapter: str
    reason: str | None


@record()
class Segment:
    """One part of a run: the first, then one per ``loope continue``, with the budgets it was given."""

    started_at: str
    first_iteration: int
    max_iters: int
    """Iterations this segment may run."""
    max_cost: float | None
    max_time: float | None
    goal: str
    stop_reason: str | None = None
    """How it ended (None for the last one: the run's ``stop_reason`` says)."""
    stop_detail: str | None = None


@record(frozen=True)
class GateBaseline:
    """The gate run once on the starting tree (its output is in the run dir's ``baseline/``)."""

    passed: bool
    exit_code: int | None
    failing: int
    """How many checks failed."""
    failures: list[str]
    """The first 20 of them."""
    duration_s: float
    dir: str


@record()
class RunRecord:
    run_id: str
    goal: str
    workdir: str
    workspace: WorkspaceInfo
    schema: int = SCHEMA
    status: str = "running"
    """``running`` while the loop runs; then the stop reason."""
    converged: bool = False
    iterations: int = 0
    """Iterations started (the last one may have been cut short)."""
    completed: int = 0
    """Iterations finished and recorded; a resumed run continues after the last of them."""
    completed_head: str | None = None
    """The workspace commit after the last completed iteration."""
    max_iters: int = 0
    stop_reason: str | None = None
    stop_detail: str | None = None
    started_at: str = field(default_factory=now_iso)
    finished_at: str | None = None
    duration_s: float = 0.0
    elapsed_before_s: float = 0.0
    """Wall time spent by earlier runners of this run (a resumed run carries it over)."""
    pid: int | None = None
    implementer: str = ""
    reviewers: list[str] = field(default_factory=list)
    verify_cmd: str | None = None
    metric: MetricSettings | None = None
    protected_scripts: list[str] | None = None
    """What the gate and metric commands named when the run started (scripts, local modules,
    ``python -m`` shadows): protected for the whole run, resumed or not. None in a run.json written
    before it was recorded (they are resolved again on resume)."""
    totals: Totals = field(default_factory=Totals)
    best: Best | None = None
    baseline: float | None = None
    gate_baseline: GateBaseline | None = None
    """The gate on the starting tree, before iteration 1."""
    steps: list[StepRecord] = field(default_factory=list)
    discarded_steps: list[StepRecord] = field(default_factory=list)
    """Steps of an iteration cut short and run again after a resume (in ``agents/discarded/``);
    what they spent stays in ``totals``."""
    changes: Changes = field(default_factory=Changes)
    state: dict[str, Any] | None = None
    """The state file's frontmatter as last read."""
    loop: LoopState = field(default_factory=LoopState)
    """What the next iteration needs from the last (feedback, counters); lets a run resume."""
    segments: list[Segment] = field(default_factory=list)
    """Each ``loope continue`` adds one (empty for a run never continued; the last one ends as the run did)."""
    waiting: Waiting | None = None
    """Set while the run waits out a usage limit."""
    rounds: list[Round] = field(default_factory=list)
    """One per iteration raced by several candidates: each candidate's result, the winner and why."""

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        """A record from run.json, as any earlier loope wrote it."""
        return from_data(cls, data)

    @property
    def best_score(self) -> float | None:
        return self.best.score if self.best else None


def json_safe(value: Any) -> Any:
    """``value`` made JSON-safe (dates and other YAML scalars become strings)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
