"""Server-sent events: a run's events as they are written, and the runs list whenever it changes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request

from loope.records.rundir import RunDir
from loope.records.tails import EventTail
from loope.serve import data

POLL_S = 0.3
PING_S = 15.0


def message(payload: Any, *, event: str = "message", id_: int | None = None) -> str:
    head = f"id: {id_}\n" if id_ is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(payload, ensure_ascii=False, default=str)}\n\n"


async def run_events(request: Request, rundir: RunDir, offset: int) -> AsyncIterator[str]:
    """Each event of the run from byte ``offset`` of events.jsonl on (its id: the offset after it)."""

    tail = EventTail(rundir / "events.jsonl")
    tail.offset = offset

    def news() -> list[str]:
        events = tail.read()  # the last of a batch carries where to resume
        return [
            message(e, event="loope", id_=tail.offset if i == len(events) else None) for i, e in enumerate(events, 1)
        ]

    async for chunk in _polled(request, news):
        yield chunk


async def runs_events(request: Request, projects: list[data.Project]) -> AsyncIterator[str]:
    """The runs list, sent at once and again whenever a run starts, moves on or ends."""
    last: list[tuple[Any, ...] | None] = [None]

    def news() -> list[str]:
        stamp = data.runs_stamp(projects)
        if stamp == last[0]:
            return []
        last[0] = stamp
        return [message({"runs": data.runs(projects), "fleets": data.fleets(projects)}, event="runs")]

    async for chunk in _polled(request, news):
        yield chunk


async def _polled(request: Request, news: Callable[[], list[str]]) -> AsyncIterator[str]:
    """What ``news()`` has every POLL_S until the client goes, with a ping when it has had nothing a while."""
    quiet = 0.0
    yield "retry: 1000\n\n"
    while not await request.is_disconnected():
        chunks = news()
        for chunk in chunks:
            yield chunk
        quiet = 0.0 if chunks else quiet + POLL_S
        if quiet >= PING_S:
            quiet = 0.0
            yield ": ping\n\n"
        await asyncio.sleep(POLL_S)
