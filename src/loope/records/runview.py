"""What a run is doing and why, folded from its events: the one state every view draws.

The live view, ``loope logs``, ``loope status`` and the dashboard all read a run the same way: they
feed its events (live from the engine, or lines of events.jsonl) to :class:`RunView` and draw what
it holds. It works on plain event dicts, so a reader in another process needs nothing but the file.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loope.records.lanes import Lanes
from loope.records.tails import EventTail
from loope.records.viewparts import Attempt, Gate, Record, Review, Step

SPARKS = "▁▂▃▄▅▆▇█"
WAIT_TYPES = ("limit_wait",)
RETRY_TYPES = ("step_retry",)


def parse_ts(value: Any) -> float | None:
    """Seconds since the epoch for an event's ISO ``ts``; None when it is missing or not a time."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def now() -> float:
    return datetime.now(UTC).timestamp()


class RunView(Record):
    """The state of one run as its events tell it."""

    __slots__ = (
        *("run_id", "goal", "run_dir", "started", "max_iters", "iteration", "budgets", "metric", "cost_usd"),
        *("tokens", "running", "labels", "gate", "reviews", "violations", "attempts", "baseline", "wait"),
        *("last_decision", "selection", "lanes", "finished", "ended", "last_ts", "events"),
    )

    def __init__(self) -> None:
        self.run_id = ""
        self.goal = ""
        self.run_dir = ""
        self.started: float | None = None
        self.max_iters = 0
        self.iteration = 0
        self.budgets: dict[str, Any] = {}
        self.metric = False
        self.cost_usd = 0.0
        self.tokens = 0
        self.running: dict[int, Step] = {}
        self.labels: dict[int, str] = {}  # every step's label by number (reviews name their steps)
        self.gate: Gate | None = None
        self.reviews: list[Review] = []
        self.violations: list[str] = []
        self.attempts: list[Attempt] = []
        self.baseline: float | None = None
        self.wait: dict[str, Any] | None = None
        self.last_decision: dict[str, Any] | None = None
        self.selection: dict[str, Any] | None = None  # the last round's: every candidate ranked, the winner, why
        self.lanes = Lanes()  # one per candidate of the iteration in flight, when several race
        self.finished: dict[str, Any] | None = None
        self.ended: float | None = None
        self.last_ts: float | None = None
        self.events = 0

    def apply(self, event: dict[str, Any]) -> None:
        """Fold one event (a dict as in events.jsonl) into the state."""
        self.events += 1
        kind = event.get("type")
        ts = parse_ts(event.get("ts"))
        self.last_ts = ts or self.last_ts
        self.run_id = event.get("run_id") or self.run_id
        self.lanes.apply(event, ts, action_text(event.get("event") or {}) if kind == "agent_event" else None)
        handler = _HANDLERS.get(str(kind))
        if handler is not None:
            handler(self, event, ts)
        elif kind in WAIT_TYPES or kind in RETRY_TYPES:
            self.wait = event

    # -- reading the state ----------------------------------------------------------------------

    def elapsed(self, at: float | None = None) -> float:
        """Seconds since the run started, to its end when it ended (or to ``at``, now by default)."""
        if self.started is None:
            return 0.0
        end = self.ended if self.ended is not None else (at if at is not None else now())
        return max(0.0, end - self.started)

    @property
    def live(self) -> bool:
        return self.finished is None

    def scores(self) -> list[float]:
        return [a.score for a in self.attempts if a.score is not None]

    def best(self) -> float | None:
        kept = [a for a in self.attempts if a.verdict in ("kept", "converged") and a.score is not None]
        return kept[-1].score if kept else self.baseline

    def to_dict(self) -> dict[str, Any]:
        """The state as JSON-ready data (the dashboard's live view of a run)."""

        data = super().to_dict()
        data["running"] = [{**s.to_dict(), "label": s.label} for s in self.running.values()]
        data["elapsed_s"] = round(self.elapsed(), 1)
        data["best"] = self.best()
        return data


def sparkline(values: list[float], width: int = 24) -> str:
    """``▁▃▅█``: the last ``width`` values scaled between their min and max."""
    shown = values[-width:]
    if not shown:
        return ""
    low, high = min(shown), max(shown)
    span = high - low
    return "".join(SPARKS[int((v - low) / span * (len(SPARKS) - 1)) if span else 3] for v in shown)


def _run_started(view: RunView, e: dict[str, Any], ts: float | None) -> None:
    view.goal = str(e.get("goal") or "")
    view.run_dir = str(e.get("run_dir") or "")
    view.started = parse_ts(e.get("started_at")) or ts
    view.max_iters = int(e.get("max_iters") or 0)
    view.budgets = dict(e.get("budgets") or {})
    view.metric = bool(e.get("metric_cmd"))
    view.finished = view.ended = None


def _iteration_started(view: RunView, e: dict[str, Any], ts: float | None) -> None:
    view.iteration = int(e.get("iteration") or 0)
    view.max_iters = int(e.get("max_iters") or view.max_iters)
    view.reviews = []
    view.violations = []
    view.wait = None


def _step_started(view: RunView, e: dict[str, Any], ts: float | None) -> None:
    view.running[int(e["step"])] = Step(
        step=int(e["step"]),
        iteration=int(e.get("iteration") or 0),
        role=str(e.get("role") or ""),
        adapter=str(e.get("adapter") or ""),
        dir=str(e.get("dir") or ""),
        model=e.get("model"),
        index=e.get("index"),
        started=ts,
        candidate=e.get("candidate"),
    )
    view.labels[int(e["step"])] = view.running[int(e["step"])].label
    view.wait = None


def _agent_event(view: RunView, e: dict[str, Any], ts: float | None) -> None:
    step = view.running.get(int(e.get("step") or -1))
    inner = e.get("event") or {}
    if inner.get("kind") == "usage":
        return
    if step is None:
        return
    if inner.get("kind") == "message":
        lines = [line.strip() for line in str(inner.get("text") or "").splitlines() if line.strip()]
        step.message = lines[-1] if lines else step.message
    elif text := action_text(inner):
        step.action = text


def _step_finished(view: RunView, e: dict[str, Any], ts: float | None) -> None:
    view.running.pop(int(e.get("step") or -1), None)
    view.cost_usd += float(e.get("cost_usd") or 0.0)
    view.tokens += int(e.get("input_tokens") or 0) + int(e.get("output_tokens") or 0)


def _verify_finished(view: RunView, e: dict[str, Any], ts: float | None) -> None:
    view.running.pop(int(e.get("step") or -1), None)
    failures = list(e.get("failures") or [])
    previous = view.gate
    view.gate = Gate(
        step=int(e.get("step") or 0),
        iteration=int(e.get("iteration") or 0),
        passed=bool(e.get("passed")),
        exit_code=e.get("exit_code"),
        timed_out=bool(e.get("timed_out")),
        failing=int(e.get("failing") or 0) or len(failures),
        failures=failures,
        summary=str(e.get("summary") or ""),
        output_tail=list(e.get("output_tail") or []),
        duration_s=float(e.get("duration_s") or 0.0),
        previous_failing=None if previous is None or previous.iteration < 1 else previous.failing,
        candidate=e.get("candidate"),
    )


def _metric(view: RunView, e: dict[str, Any], ts: float | None) -> None:
    view.running.pop(int(e.get("step") or -1), None)
    if e.get("iteration") == 0:
        view.baseline = e.get("baseline")
        return
    view.attempts.append(
        Attempt(int(e.get("iteration") or 0), e.get("score"), best=e.get("best"), error=e.get("error"))
    )


def _review_finished(view: RunView, e: dict[str, Any], ts: float | None) -> None:
    view.reviews = [
        Review(
            step=int(v.get("step") or 0),
            adapter=str(v.get("adapter") or ""),
            verdict=v.get("verdict"),
            findings=list(v.get("findings") or []),
            label=view.labels.get(int(v.get("step") or 0), f"[{int(v.get('step') or 0):02d}] {v.get('adapter')}"),
        )
        for v in e.get("verdicts") or []
    ]


def _guard(view: RunView, e: dict[str, Any], ts: float | None) -> None:
    view.violations += [str(v) for v in e.get("violations") or []]


def _selection(view: RunView, e: dict[str, Any], ts: float | None) -> None:
    view.selection = e


def _decision(view: RunView, e: dict[str, Any], ts: float | None) -> None:
    view.last_decision = e
    iteration = e.get("iteration")
    for attempt in view.attempts:
        if attempt.iteration == iteration:
            attempt.verdict = str(e.get("verdict") or "")
            attempt.best = view.best() if attempt.verdict == "reverted" else attempt.score


def _iteration_finished(view: RunView, e: dict[str, Any], ts: float | None) -> None:
    totals = e.get("totals") or {}
    view.cost_usd = float(totals.get("cost_usd") or view.cost_usd)
    view.tokens = int(totals.get("input_tokens") or 0) + int(totals.get("output_tokens") or 0) or view.tokens


def _run_finished(view: RunView, e: dict[str, Any], ts: float | None) -> None:
    view.finished = e
    view.ended = ts
    view.running.clear()
    view.wait = None
    _iteration_finished(view, e, ts)


_HANDLERS = {
    "run_started": _run_started,
    "iteration_started": _iteration_started,
    "step_started": _step_started,
    "agent_event": _agent_event,
    "step_finished": _step_finished,
    "verify_finished": _verify_finished,
    "metric": _metric,
    "review_finished": _review_finished,
    "guard": _guard,
    "selection": _selection,
    "decision": _decision,
    "iteration_finished": _iteration_finished,
    "run_finished": _run_finished,
}


def read_view(events_path: Path) -> tuple[RunView, int]:
    """A run's view from its events.jsonl (empty when it has none yet), and the offset it was read to."""

    view = RunView()
    tail = EventTail(events_path)
    for event in tail.read():
        view.apply(event)
    return view, tail.offset - len(tail.pending)


def activity(view: RunView) -> dict[str, Any]:
    """What ``status`` says a run is doing: the steps in flight, a wait, the last gate."""
    clock = now()
    gate = view.gate
    return {
        "steps": [
            {
                "step": s.step,
                "label": s.label,
                "role": s.role,
                "adapter": s.adapter,
                "elapsed_s": round(clock - s.started, 1) if s.started else None,
                "last_action": s.action or None,
                "last_message": s.message or None,
            }
            for s in view.running.values()
        ]
        if view.live
        else [],
        "wait": view.wait if view.live else None,
        "gate": None
        if gate is None
        else {"passed": gate.passed, "failing": gate.failing, "previous_failing": gate.previous_failing},
        "elapsed_s": round(view.elapsed(), 1),
    }


def selection_summary(event: dict[str, Any]) -> dict[str, Any]:
    """The last round in short: which candidate won and why, and each one's place."""
    return {
        "iteration": event.get("iteration"),
        "winner": event.get("winner"),
        "why": event.get("why"),
        "candidates": [
            {k: c.get(k) for k in ("candidate", "agent", "rank", "gate_passed", "score", "why")}
            for c in event.get("candidates") or []
        ],
    }


ICONS = {"edit": "✎", "write": "✎", "read": "◦", "command": "▸", "search": "⌕", "other": "·"}


def action_text(event: dict[str, Any]) -> str | None:
    """``✎ edit src/x.py``, ``▸ run pytest -q``; None for events the view does not show."""
    if event.get("kind") != "action":
        return None
    action = event.get("action", "other")
    verb = "run" if action == "command" else action
    target = event.get("target") or ""
    return f"{ICONS.get(action, '·')} {verb} {target}".rstrip()
