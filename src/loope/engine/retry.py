"""Trying an agent step again: transient failures after a backoff, usage limits once they reset.

A retried step stays one step (and the iteration one iteration): each failed attempt's files move
to ``attempts/<n>/`` in the step directory and a line goes to its ``attempts.jsonl``; the cost and
tokens of every attempt count. A limit wait is written to run.json (``waiting``), so ``status``
can say until when and a runner killed while it waits waits again when resumed.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from loope.agents.base import Agent, AgentRequest, AgentResult
from loope.agents.setback import Setback, iso, parse_reset
from loope.engine.run import RunState
from loope.events import LimitWait, StepRetry
from loope.records.atomic import append_line, write_text
from loope.records.model import Waiting
from loope.text import local_clock

MAX_DELAY_S = 600.0
"""The longest backoff between two attempts."""
MAX_LIMIT_WAITS = 6
"""Limit waits per step: a CLI that still says "limited" after six resets is not waited for again."""
RESET_MARGIN_S = 1.0
"""Waited past a reset time, so the first try after it does not race the provider's clock."""
RETRY = "retry"
"""``waiting.kind`` during a backoff before a retry (``usage_limit`` during a limit wait)."""
_POLL_S = 0.5
_KEEP = frozenset({"prompt.md", "attempts", "attempts.jsonl", "home"})


def backoff(retry: int, first: float) -> float:
    """Seconds before retry number ``retry`` (0-based): doubling from ``first``, capped, with jitter."""
    return float(min(MAX_DELAY_S, first * 2**retry) * random.uniform(0.5, 1.0))


class Attempts:
    """Runs one agent step until it succeeds, fails for good, or hits a limit the run may not wait out."""

    def __init__(self, run: RunState, should_stop: Callable[[], bool]) -> None:
        self.run = run
        self.should_stop = should_stop

    def run_agent(self, agent: Agent, request: AgentRequest, *, step: int, adapter: str) -> AgentResult:
        earlier: list[AgentResult] = []
        retries = waits = 0
        while True:
            result = agent.run(request)
            setback = result.setback
            if result.ok or setback is None or result.cancelled or result.timed_out:
                return _combined(result, earlier)
            plan = self._plan(setback, retries, waits, _combined(result, earlier))
            if isinstance(plan, str):
                return replace(_combined(result, earlier), error=f"{result.error}{plan}")
            until, is_wait = plan
            attempt = len(earlier) + 1
            self._set_aside(request.step_dir, attempt, result, setback, until)
            earlier.append(result)
            if is_wait:
                waits += 1
            else:
                retries += 1
            if not self._sleep(
                until,
                step=step,
                iteration=request.iteration,
                adapter=adapter,
                setback=setback,
                attempt=attempt,
                is_wait=is_wait,
            ):
                why = f"stop requested while waiting for {_what(is_wait)} (until {local_clock(until)})"
                return replace(_combined(result, earlier[:-1]), cancelled=True, error=why)
            remaining = self.run.remaining_usd()
            request = replace(
                request,
                timeout_s=self.run.step_timeout(),
                max_budget_usd=None if remaining is None else max(0.0, remaining - _cost(earlier)),
            )

    def _plan(self, setback: Setback, retries: int, waits: int, so_far: AgentResult) -> tuple[float, bool] | str:
        """(when to try again, whether that is a limit wait), or why not, as a suffix of the error."""
        spec, now = self.run.spec, time.time()
        if setback.kind == "limit" and setback.reset_at is not None:
            if spec.no_wait:
                return ""
            if waits >= MAX_LIMIT_WAITS:
                return f" (still limited after {waits} waits)"
            until = max(setback.reset_at, now) + RESET_MARGIN_S  # a reset already past: try again now
        else:
            if retries >= spec.retries:
                return f" (after {retries + 1} attempts)" if retries else ""
            if setback.kind == "limit" and spec.no_wait:
                return ""
            until = now + max(backoff(retries, spec.retry_delay), setback.retry_after or 0.0)
        if spec.max_time is not None and self.run.elapsed() + (until - now) >= spec.max_time:
            return f" (trying again at {local_clock(until)} would pass --max-time)"
        remaining = self.run.remaining_usd()
        if remaining is not None and so_far.cost_usd >= remaining:
            return " (the attempts spent the rest of --max-cost)"
        return until, setback.kind == "limit" and setback.reset_at is not None

    def _set_aside(self, step_dir: Path, attempt: int, result: AgentResult, setback: Setback, until: float) -> None:
        """Move attempt ``attempt``'s files to ``attempts/<n>/``; one line about it in ``attempts.jsonl``."""
        target = step_dir / "attempts" / str(attempt)
        target.mkdir(parents=True, exist_ok=True)
        for entry in list(step_dir.iterdir()):
            if entry.name not in _KEEP:
                shutil.move(str(entry), target / entry.name)
        write_text(target / "result.md", f"{result.error}\n\n{result.message}")
        line = {
            "attempt": attempt,
            "error": result.error,
            "kind": setback.kind,
            "reason": setback.reason,
            "reset_at": iso(setback.reset_at) if setback.reset_at else None,
            "next_at": iso(until),
            "cost_usd": result.cost_usd,
            "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens,
        }
        append_line(step_dir / "attempts.jsonl", json.dumps(line, ensure_ascii=False))

    def _sleep(
        self, until: float, *, step: int, iteration: int, adapter: str, setback: Setback, attempt: int, is_wait: bool
    ) -> bool:
        """Wait until ``until`` (Unix seconds); False when a stop came first."""
        if is_wait:
            assert setback.reset_at is not None
            return self.limit_wait(
                Waiting("usage_limit", iso(until), iso(setback.reset_at), step, iteration, adapter, setback.reason)
            )
        delay = round(until - time.time(), 3)
        run = self.run
        # In run.json too, so `status` can say so; a resumed runner just tries again (see ``drive``).
        run.record.waiting = Waiting(RETRY, iso(until), None, step, iteration, adapter, setback.reason)
        run.save()
        self.run.bus.emit(
            StepRetry(
                step=step,
                iteration=iteration,
                adapter=adapter,
                reason=setback.reason,
                attempt=attempt,
                until=iso(until),
                delay_s=delay,
            )
        )
        try:
            return wait_until(until, run.cancel.is_set, self.should_stop, run.cancel.wait)
        finally:
            run.record.waiting = None
            run.save()

    def wait_again(self) -> bool:
        """After a restart: wait out the usage limit a killed runner was waiting for; False when a stop came first.

        A backoff it was in is not waited again: the redone step simply tries at once.
        """
        waiting = self.run.record.waiting
        if waiting is not None and waiting.kind == RETRY:
            self.run.record.waiting = waiting = None
        return waiting is None or self.limit_wait(waiting)

    def limit_wait(self, waiting: Waiting) -> bool:
        """Wait out a usage limit, recorded in run.json while it lasts; False when a stop came first.

        Also called with the ``waiting`` a killed runner left in run.json, so a resumed run waits too.
        """
        run = self.run
        until = parse_reset(waiting.until) or 0.0
        run.record.waiting = waiting
        run.save()
        run.bus.emit(
            LimitWait(
                kind=waiting.kind,
                until=waiting.until,
                reset_at=waiting.reset_at,
                step=waiting.step,
                iteration=waiting.iteration,
                adapter=waiting.adapter,
                reason=waiting.reason,
            )
        )
        try:
            return wait_until(until, run.cancel.is_set, self.should_stop, run.cancel.wait)
        finally:
            run.record.waiting = None
            run.save()


def wait_until(
    until: float, cancelled: Callable[[], bool], should_stop: Callable[[], bool], pause: Callable[[float], object]
) -> bool:
    """Sleep until ``until`` (Unix seconds) in short slices; False as soon as a stop or cancel comes."""
    while (left := until - time.time()) > 0:
        if cancelled() or should_stop():
            return False
        pause(min(_POLL_S, left))
    return not (cancelled() or should_stop())


def _combined(last: AgentResult, earlier: list[AgentResult]) -> AgentResult:
    """The last attempt's result, carrying the cost and tokens of every attempt."""
    if not earlier:
        return last
    return replace(
        last,
        cost_usd=round(last.cost_usd + _cost(earlier), 6),
        input_tokens=last.input_tokens + sum(r.input_tokens for r in earlier),
        output_tokens=last.output_tokens + sum(r.output_tokens for r in earlier),
        cost_estimated=last.cost_estimated or any(r.cost_estimated for r in earlier),
        cost_known=last.cost_known and all(r.cost_known for r in earlier),
        attempts=len(earlier) + 1,
    )


def _cost(results: list[AgentResult]) -> float:
    return sum(r.cost_usd for r in results)


def _what(is_wait: bool) -> str:
    return "the usage limit" if is_wait else "a retry"


def limit_detail(who: str, result: AgentResult) -> str:
    """``stop_detail`` of a run that ended at a usage limit: what said so, and when the limit resets."""
    setback = result.setback
    resets = f"; the limit resets at {iso(setback.reset_at)}" if setback and setback.reset_at else ""
    return f"{who}: {result.error}{resets}"
