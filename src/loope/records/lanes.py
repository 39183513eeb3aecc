"""One lane per candidate of the iteration in flight: its agent, time, last action, gate and score.

Folded from the same event dicts as :class:`~loope.records.runview.RunView` (agent events name their step,
not their candidate, so the lanes keep which step is whose); the winner is marked once the round's
``selection`` arrives.
"""

from __future__ import annotations

from typing import Any

from loope.records.viewparts import Record


class Lane(Record):
    """One candidate's lane: its agent, when it ran, what it last did, its gate and score."""

    __slots__ = ("candidate", "agent", "started", "ended", "action", "gate", "score", "won")  # noqa: RUF023  # the fields in the order their data lists them

    def __init__(self, candidate: int) -> None:
        self.candidate = candidate
        self.agent = ""
        self.started: float | None = None
        self.ended: float | None = None
        self.action = ""
        self.gate = ""
        self.score: float | None = None
        self.won: bool | None = None  # None until the round is decided


class Lanes(Record):
    """The lanes of the iteration in flight, by candidate."""

    __slots__ = ("lanes", "steps")

    def __init__(self) -> None:
        self.lanes: dict[int, Lane] = {}
        self.steps: dict[int, int] = {}  # step number -> candidate, for the iteration in flight

    def apply(self, e: dict[str, Any], ts: float | None, action: str | None = None) -> None:
        """Fold one event; ``action``: an agent event's text as the views show it."""
        kind = e.get("type")
        if kind == "iteration_started":
            self.lanes.clear()
            self.steps.clear()
            return
        if kind == "selection":
            for c in e.get("candidates") or []:
                if (lane := self.lanes.get(int(c.get("candidate") or 0))) is not None:
                    lane.won = c.get("candidate") == e.get("winner")
            return
        step = int(e.get("step") or -1)
        candidate = e.get("candidate") or self.steps.get(step)
        if not isinstance(candidate, int):
            return
        lane = self.lanes.setdefault(candidate, Lane(candidate))
        self.steps[step] = candidate
        self._fold(lane, e, ts, action)

    @staticmethod
    def _fold(lane: Lane, e: dict[str, Any], ts: float | None, action: str | None) -> None:
        kind, role = e.get("type"), e.get("role")
        if kind == "step_started" and role == "implementer":
            lane.agent, lane.started = str(e.get("adapter") or ""), ts
        elif kind == "agent_event" and action:
            lane.action = action
        elif kind == "step_finished" and role == "implementer":
            lane.ended = ts
            lane.gate = lane.gate or ("" if e.get("ok") else "failed")
        elif kind == "step_finished" and e.get("adapter") == "metric":
            lane.score = e.get("score")
        elif kind == "verify_finished":
            failing = int(e.get("failing") or 0) or len(e.get("failures") or [])
            timed_out = "timed out" if e.get("timed_out") else f"failing {failing}"
            lane.gate = "gate passed" if e.get("passed") else f"gate {timed_out}"
