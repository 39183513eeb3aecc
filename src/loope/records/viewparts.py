"""What a run's view holds: the steps in flight, the last gate, the reviews, the metric attempts.

These are plain classes with ``__slots__`` rather than dataclasses: ``loope status RUN`` and ``loope
logs`` define them at every start, and a dataclass compiles its ``__init__``, ``__repr__`` and ``__eq__``
from source when it is defined (for the seven records of the view, about a tenth of what the command
costs beyond starting Python).
"""

from __future__ import annotations

from typing import Any


class Record:
    """A record whose fields are its ``__slots__``, in order: compared, shown and turned into data by them."""

    __slots__: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready data, in order; records, lists and dicts in them copied."""
        return {name: as_data(getattr(self, name)) for name in self.__slots__}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable, like a dataclass with eq and not frozen

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"


def as_data(value: Any) -> Any:
    """``value`` as data: a record as its dict, lists, tuples and dicts copied through (as ``dataclasses.asdict``)."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return type(value)(as_data(v) for v in value)
    if isinstance(value, dict):
        return {as_data(k): as_data(v) for k, v in value.items()}
    return value


class Step(Record):
    """A step in flight: who runs, since when, and what it last did and said."""

    __slots__ = (
        *("step", "iteration", "role", "adapter", "dir", "model", "index", "started", "action", "message"),
        "candidate",
    )
    step: int
    iteration: int
    role: str
    adapter: str
    dir: str
    model: str | None
    index: int | None
    started: float | None
    action: str
    message: str
    candidate: int | None

    def __init__(
        self, *, step: int, iteration: int, role: str, adapter: str, dir: str = "", model: str | None = None,
        index: int | None = None, started: float | None = None, action: str = "", message: str = "",
        candidate: int | None = None,
    ) -> None:  # fmt: skip
        self.step, self.iteration, self.role, self.adapter, self.dir = step, iteration, role, adapter, dir
        self.model, self.index, self.started, self.action, self.message = model, index, started, action, message
        self.candidate = candidate

    @property
    def label(self) -> str:
        """``[03] reviewer exec #2`` / ``[01] implementer claude (opus)`` / ``[05] implementer codex c2``."""
        who = self.adapter + (f" #{self.index}" if self.index else "")
        if self.model and self.model not in self.adapter:
            who += f" ({self.model})"
        return f"[{self.step:02d}] {self.role} {who}" + (f" c{self.candidate}" if self.candidate else "")


class Gate(Record):
    """The last gate: passed, or what failed and how many."""

    __slots__ = (
        *("step", "iteration", "passed", "exit_code", "timed_out", "failing", "failures", "summary"),
        *("output_tail", "duration_s", "previous_failing", "candidate"),
    )
    step: int
    iteration: int
    passed: bool
    exit_code: int | None
    timed_out: bool
    failing: int
    failures: list[dict[str, str]]
    summary: str
    output_tail: list[str]
    duration_s: float
    previous_failing: int | None
    candidate: int | None

    def __init__(
        self, *, step: int, iteration: int, passed: bool, exit_code: int | None, timed_out: bool, failing: int,
        failures: list[dict[str, str]], summary: str, output_tail: list[str], duration_s: float,
        previous_failing: int | None = None, candidate: int | None = None,
    ) -> None:  # fmt: skip
        self.step, self.iteration, self.passed, self.exit_code = step, iteration, passed, exit_code
        self.timed_out, self.failing, self.failures, self.summary = timed_out, failing, failures, summary
        self.output_tail, self.duration_s, self.previous_failing = output_tail, duration_s, previous_failing
        self.candidate = candidate


class Review(Record):
    """A reviewer's verdict and findings."""

    __slots__ = ("step", "adapter", "verdict", "findings", "label")  # noqa: RUF023  # the fields in the order their data lists them
    step: int
    adapter: str
    verdict: str | None
    findings: list[str]
    label: str

    def __init__(self, step: int, adapter: str, verdict: str | None, findings: list[str], label: str = "") -> None:
        self.step, self.adapter, self.verdict, self.findings, self.label = step, adapter, verdict, findings, label


class Attempt(Record):
    """One metric attempt: its score and what became of it."""

    __slots__ = ("iteration", "score", "verdict", "best", "error")  # noqa: RUF023  # the fields in the order their data lists them
    iteration: int
    score: float | None
    verdict: str
    best: float | None
    error: str | None

    def __init__(
        self, iteration: int, score: float | None, verdict: str = "", best: float | None = None,
        error: str | None = None,
    ) -> None:  # fmt: skip
        self.iteration, self.score, self.verdict, self.best, self.error = iteration, score, verdict, best, error
