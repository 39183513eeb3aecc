"""``loope worker``: this machine runs iterations (Temporal activities) of any fleet's loops.

Each iteration runs in a thread of its own (the engine is synchronous) while the activity
heartbeats, so a worker that dies is noticed within the heartbeat timeout and the iteration runs
again elsewhere. A stop signal reaches the activity as a cancellation: the step in flight is
killed, the run recorded ``stopped``, and its records pushed back. When the worker itself shuts
down, its iterations are ended too but fail, so Temporal hands them to another worker.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from datetime import timedelta
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from loope.fleet.orders import SegmentOrder, SegmentReport
from loope.fleet.segment import Segment
from loope.fleet.temporal.client import connect
from loope.fleet.temporal.workflow import SEGMENT, LoopWorkflow


class SegmentActivities:
    """The activities of one worker, each iteration's workspace under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @activity.defn(name=SEGMENT)
    async def segment(self, order: SegmentOrder) -> SegmentReport:
        info = activity.info()
        every = max(min((info.heartbeat_timeout or timedelta(seconds=30)).total_seconds() / 3, 10.0), 0.2)
        # The attempt before this one, given up on, said in its last heartbeat what it had spent.
        lost = float(info.heartbeat_details[0]) if info.heartbeat_details else 0.0
        work = Segment(order, self.root, attempt=info.attempt, lost_usd=lost)
        running = asyncio.ensure_future(asyncio.to_thread(work.run))
        cancelled = False
        while True:
            try:
                done, _ = await asyncio.wait({running}, timeout=every)
            except asyncio.CancelledError:
                if not cancelled:  # the loop's stop signal, or this worker shutting down
                    cancelled = True
                    work.stop()
                continue
            if done:
                break
            activity.heartbeat(round(lost + work.spent(), 6))
        report = running.result()
        if cancelled and activity.is_worker_shutdown():
            raise ApplicationError("the worker shut down during the iteration; another worker runs it again")
        return report


async def serve(address: str, namespace: str, task_queue: str, slots: int, root: Path) -> None:
    """Run workflows and iterations from ``task_queue`` until SIGINT or SIGTERM."""
    client = await connect(address, namespace)
    activities = SegmentActivities(root)
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[LoopWorkflow],
        activities=[activities.segment],
        max_concurrent_activities=slots,
        graceful_shutdown_timeout=timedelta(seconds=10),
        # A workflow task waits this long for the worker that last ran it before any worker may take it:
        # short, so a dead worker's loops move on at once (replaying a loop's small history is cheap).
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=2),
    )
    ended = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, ended.set)
    async with worker:
        print(
            f"loope worker: task queue {task_queue!r} on {address} (namespace {namespace}), {slots} slot(s),"
            f" workspaces under {root}",
            file=sys.stderr,
            flush=True,
        )
        await ended.wait()


def run_worker(address: str, namespace: str, task_queue: str, slots: int, root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    asyncio.run(serve(address, namespace, task_queue, slots, root.resolve()))
