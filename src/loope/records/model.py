"""run.json (schema 1): the run's record. Fields are added freely and never renamed."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

SCHEMA = 1


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class StepRecord:
    id: int
    iteration: int
    role: str
    adapter: str
    dir: str
    ok: bool = True
    error: str | None = None
    gate_passed: bool | None = None
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
    files: list[dict[str, Any]] = field(default_factory=list)
    """Per file: path, status, added, removed."""
    violations: list[str] = field(default_factory=list)
    commit: str | None = None
    model: str | None = None
    attempts: int = 1
    """Times the step was tried; earlier attempts are kept under ``attempts/`` in its directory."""


@dataclass
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


@dataclass
class WorkspaceInfo:
    mode: str
    path: str
    branch: str | None
    base: str
    head: str
    git_dir: str | None = None


@dataclass
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
    metric: dict[str, Any] | None = None
    totals: Totals = field(default_factory=Totals)
    best: dict[str, Any] | None = None
    baseline: float | None = None
    steps: list[StepRecord] = field(default_factory=list)
    changes: dict[str, Any] = field(default_factory=lambda: {"files": []})
    state: dict[str, Any] | None = None
    """The state file's frontmatter as last read."""
    loop: dict[str, Any] = field(default_factory=dict)
    """What the next iteration needs from the last (feedback, counters); lets a run resume."""
    waiting: dict[str, Any] | None = None
    """While the run waits out a usage limit: ``kind, until, reset_at`` (ISO 8601), ``step, adapter, reason``."""
    started_monotonic: float = field(default_factory=time.monotonic, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("started_monotonic")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        known = {f.name for f in dataclasses.fields(cls)} - {"started_monotonic"}
        values = {k: v for k, v in data.items() if k in known}
        values["workspace"] = WorkspaceInfo(**_known(WorkspaceInfo, data["workspace"]))
        values["totals"] = Totals(**_known(Totals, data.get("totals", {})))
        values["steps"] = [StepRecord(**_known(StepRecord, s)) for s in data.get("steps", [])]
        return cls(**values)

    def step_dirs_of(self, iteration: int) -> list[str]:
        return [s.dir for s in self.steps if s.iteration == iteration]


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def json_safe(value: Any) -> Any:
    """``value`` made JSON-safe (dates and other YAML scalars become strings)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
