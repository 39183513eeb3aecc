"""One loop as one Temporal workflow: each iteration an activity, stop a signal, status a query.

The workflow holds what it needs to decide between iterations (how far the run got, what it
spent, where its records are) and asks a worker to run each next iteration (``loope.segment``).
The engine decides inside an iteration, exactly as in a local run; the workflow only carries on
while the run stopped at its one-iteration bound and the task's iterations are not spent. A usage
limit is waited out with a durable timer, so no worker slot is held while the quota resets.

Temporal replays this module in its sandbox: it imports nothing but the SDK and the orders.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from loope.fleet.orders import LoopOrder, LoopStatus, SegmentOrder, SegmentReport

SEGMENT = "loope.segment"
WORKFLOW = "loope.loop"
_NOT_RETRIED = ["LoopeError", "RunFileError", "GitError"]


@workflow.defn(name=WORKFLOW)
class LoopWorkflow:
    def __init__(self) -> None:
        self._status = LoopStatus(key="", run_id="")
        self._stop_now = False
        self._segment: workflow.ActivityHandle[SegmentReport] | None = None

    @workflow.run
    async def run(self, order: LoopOrder) -> LoopStatus:
        status = self._status = LoopStatus(key=order.key, run_id=order.run_id, records=order.records)
        while True:
            if status.stop_requested:
                return self._end("stopped", "stop requested")
            try:
                report = await self._iterate(order)
            except ActivityError as exc:
                if status.stop_requested:
                    return self._end("stopped", "stop requested")
                cause = exc.cause.message if isinstance(exc.cause, ApplicationError) else str(exc.cause or exc)
                return self._end("failed", f"an iteration failed on its worker: {cause}")
            if report.stop_reason == "max_iters" and report.completed < order.max_iters:
                continue
            if report.stop_reason == "usage_limited" and report.reset_at is not None and not order.no_wait:
                if not await self._wait_for_reset(report.reset_at):
                    return self._end("stopped", "stop requested while waiting for the usage limit")
                continue
            return self._end(report.status, report.stop_detail, reason=report.stop_reason)

    async def _iterate(self, order: LoopOrder) -> SegmentReport:
        status = self._status
        status.segments += 1
        segment = SegmentOrder(
            key=order.key,
            run_id=order.run_id,
            remote=order.remote,
            records=status.records,
            sub=order.sub,
            seq=status.segments,
            max_cost=order.max_cost,
            max_time=order.max_time,
        )
        self._segment = workflow.start_activity(
            SEGMENT,
            segment,
            result_type=SegmentReport,
            start_to_close_timeout=timedelta(days=7),
            heartbeat_timeout=timedelta(seconds=order.heartbeat_s),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=1),
                maximum_interval=timedelta(seconds=30),
                non_retryable_error_types=_NOT_RETRIED,
            ),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        if self._stop_now:
            self._segment.cancel()
        try:
            report = await self._segment
        finally:
            self._segment = None
        status.completed, status.cost_usd, status.tokens = report.completed, report.cost_usd, report.tokens
        status.records, status.head = report.records, report.head
        status.retried += report.attempt - 1
        status.lost_usd = round(status.lost_usd + report.lost_usd, 6)
        if report.worker and report.worker not in status.workers:
            status.workers.append(report.worker)
        return report

    async def _wait_for_reset(self, reset_at: float) -> bool:
        """Sleep on a durable timer until the limit resets; False when a stop came first."""
        status = self._status
        status.state, status.waiting_until = "waiting", reset_at
        delay = max(reset_at - workflow.now().timestamp(), 0.0) + 1.0
        try:
            await workflow.wait_condition(lambda: status.stop_requested, timeout=timedelta(seconds=delay))
        except TimeoutError:
            status.state, status.waiting_until = "running", None
            return True
        return False

    def _end(self, state: str, detail: str | None, *, reason: str | None = None) -> LoopStatus:
        status = self._status
        status.state, status.stop_reason, status.stop_detail = state, reason or state, detail
        status.waiting_until = None
        return status

    @workflow.signal
    def stop(self, now: bool) -> None:
        """Stop the loop: before its next iteration, or (``now``) killing the iteration in flight."""
        self._status.stop_requested = True
        if now:
            self._stop_now = True
            if self._segment is not None and not self._segment.done():
                self._segment.cancel()

    @workflow.query
    def status(self) -> LoopStatus:
        return self._status
