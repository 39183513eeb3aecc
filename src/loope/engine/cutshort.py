"""Steps cut short (Ctrl-C, a full disk, a crash, a runner that died) still count what they spent.

An agent reports its usage as it goes (``usage`` events, which add up); what it reported before
it was cut short was spent, so it goes into the step's record and the run's totals like any
finished step's, and a resumed run's budget starts from it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from loope.record import record
from loope.records.model import StepRecord
from loope.records.space import disk_full, full_disk_detail

if TYPE_CHECKING:
    from loope.agents.base import AgentEvent, AgentResult


@record()
class Tally:
    """The usage a step has reported so far."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_reported: bool = False
    cost_estimated: bool = False

    def add(self, event: AgentEvent) -> None:
        if event.kind == "usage":
            self.take(event.input_tokens, event.output_tokens, event.cost_usd)

    def take(self, tokens_in: object, tokens_out: object, cost: object) -> None:
        self.input_tokens += tokens_in if isinstance(tokens_in, int) and tokens_in > 0 else 0
        self.output_tokens += tokens_out if isinstance(tokens_out, int) and tokens_out > 0 else 0
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
            self.cost_usd += float(cost)
            self.cost_reported = True

    @classmethod
    def of(cls, result: AgentResult) -> Tally:
        """A finished agent's own figures (they may be estimates the events alone do not give)."""
        return cls(
            result.input_tokens,
            result.output_tokens,
            result.cost_usd,
            cost_reported=result.cost_known,
            cost_estimated=result.cost_estimated,
        )

    @classmethod
    def from_events(cls, path: Path) -> Tally:
        """The usage events a step's ``events.jsonl`` holds (a step whose runner died)."""
        tally = cls()
        try:
            with path.open(encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    if '"usage"' not in line:
                        continue
                    try:
                        data = json.loads(line)
                    except ValueError:
                        continue  # the line the runner was writing when it died
                    if isinstance(data, dict) and data.get("kind") == "usage":
                        tally.take(data.get("input_tokens"), data.get("output_tokens"), data.get("cost_usd"))
        except OSError:
            pass
        return tally

    def record(self, step: StepRecord, why: str) -> StepRecord:
        """``step`` as a failed step that spent what this tally says."""
        return replace(
            step,
            ok=False,
            error=f"cut short: {why}",
            cost_usd=round(self.cost_usd, 6),
            cost_estimated=self.cost_estimated,
            cost_known=self.cost_reported or not (self.input_tokens or self.output_tokens),
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
        )


def why_cut(exc: BaseException) -> str:
    """What cut a step short, in a few words."""

    if isinstance(exc, KeyboardInterrupt):
        return "interrupted with Ctrl-C"
    if disk_full(exc):
        return full_disk_detail(exc)
    detail = getattr(exc, "detail", None)  # a Halt: the loop stops for a reason it gives
    return detail if isinstance(detail, str) else f"{type(exc).__name__}: {exc}"
