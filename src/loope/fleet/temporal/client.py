"""Talking to Temporal from synchronous code: a client on an event loop of its own, and the calls loope makes."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from loope.errors import LoopeError
from loope.fleet.orders import LoopOrder, LoopStatus
from loope.fleet.temporal.workflow import WORKFLOW

T = TypeVar("T")
CALL_TIMEOUT_S = 30.0


async def connect(address: str, namespace: str) -> Client:
    try:
        return await Client.connect(address, namespace=namespace)
    except RuntimeError as exc:
        raise LoopeError(
            f"cannot reach Temporal at {address} ({exc}); start a local server with `loope temporal dev`"
        ) from None


class Bridge:
    """A Temporal client for synchronous callers (the fleet's coordinator, ``fleet stop``)."""

    def __init__(self, address: str, namespace: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="loope-temporal", daemon=True)
        self._thread.start()
        try:
            self.client = self.call(connect(address, namespace))
        except BaseException:
            self.close()
            raise

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(CALL_TIMEOUT_S)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    def __enter__(self) -> Bridge:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- the calls ----------------------------------------------------------------------------

    def start(self, order: LoopOrder, task_queue: str) -> None:
        """Start the loop's workflow; one that already ran or runs under this id is left as it is."""
        try:
            self.call(self._start(order, task_queue))
        except RPCError as exc:
            raise LoopeError(f"Temporal refused to start the loop's workflow: {exc.message}") from None

    async def _start(self, order: LoopOrder, task_queue: str) -> None:
        with contextlib.suppress(WorkflowAlreadyStartedError):
            await self.client.start_workflow(
                WORKFLOW,
                order,
                id=order.key,
                task_queue=task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )

    def status(self, key: str) -> LoopStatus | None:
        """The loop now (its query while it runs, its result once ended); None when Temporal cannot say."""
        try:
            return self.call(self._status(key))
        except (RPCError, TimeoutError, LoopeError):
            return None

    async def _status(self, key: str) -> LoopStatus:
        handle = self.client.get_workflow_handle(key, result_type=LoopStatus)
        described = await handle.describe()
        if described.status == WorkflowExecutionStatus.RUNNING:
            status: LoopStatus = await handle.query("status", result_type=LoopStatus)
            return status
        if described.status == WorkflowExecutionStatus.COMPLETED:
            ended: LoopStatus = await handle.result()
            return ended
        state = described.status.name.lower() if described.status else "failed"
        return LoopStatus(key=key, run_id="", state="failed", stop_detail=f"its workflow ended {state}")

    def stop(self, key: str, *, now: bool) -> bool:
        """Signal the loop to stop; False when its workflow is not running."""
        try:
            self.call(self.client.get_workflow_handle(key).signal("stop", now))
        except RPCError:  # no such workflow, or it already ended
            return False
        return True
