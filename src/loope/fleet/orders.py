"""What a fleet on Temporal passes between its workflow and its workers: plain dataclasses, nothing else.

Kept free of loope's other modules, so Temporal's workflow sandbox can import them cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LoopOrder:
    """One loop of a fleet: what its workflow needs to drive the run to its end."""

    key: str
    """The workflow id; it also names the run's refs on the remote and its clone on each worker."""
    run_id: str
    remote: str
    records: str
    """The records ref the run starts from (pushed by the submitter once it prepared the run)."""
    sub: str
    """The task's workdir below its repository's top (``.`` at the top)."""
    max_iters: int
    max_cost: float | None = None
    max_time: float | None = None
    no_wait: bool = False
    """Stop at a usage limit instead of waiting for its reset."""
    heartbeat_s: float = 30.0


@dataclass
class SegmentOrder:
    """One activity: run the next iteration of a run from the records at ``records``."""

    key: str
    run_id: str
    remote: str
    records: str
    sub: str
    seq: int
    max_cost: float | None = None
    """What the whole run may spend (not what this segment adds)."""
    max_time: float | None = None


@dataclass
class SegmentReport:
    """What an activity reports back: where the run now is, and how its last segment ended."""

    run_id: str
    status: str
    stop_reason: str | None
    stop_detail: str | None
    completed: int
    cost_usd: float
    tokens: int
    records: str
    head: str
    reset_at: float | None = None
    """Unix seconds at which a usage limit that ended the segment resets."""
    worker: str = ""
    attempt: int = 1
    """The activity's attempt that ran it (attempts before it were given up on)."""
    lost_usd: float = 0.0
    """What the attempts given up on had reported spending in their last heartbeat."""


@dataclass
class LoopStatus:
    """A loop as its workflow sees it (the answer to the ``status`` query, and the workflow's result)."""

    key: str
    run_id: str
    state: str = "running"
    """``running``, ``waiting`` (a usage-limit timer), or the run's final status."""
    completed: int = 0
    cost_usd: float = 0.0
    tokens: int = 0
    records: str = ""
    head: str = ""
    stop_reason: str | None = None
    stop_detail: str | None = None
    waiting_until: float | None = None
    segments: int = 0
    retried: int = 0
    """Activity attempts given up on (a dead worker, a failure) whose iteration was run again."""
    lost_usd: float = 0.0
    """What those attempts had reported spending: lost with their records, still spent."""
    stop_requested: bool = False
    workers: list[str] = field(default_factory=list)
