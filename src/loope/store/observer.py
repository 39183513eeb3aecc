"""The store as an observer of the engine (the index) and as its control channel (stop requests)."""

from __future__ import annotations

import threading
from typing import Any

from loope.enums import Role, StepKind, StopReason
from loope.events import Event, IterationFinished, RunFinished, RunStarted, StepFinished, VerifyFinished
from loope.store.db import Store

FAILED = (StopReason.FAILED, StopReason.STEP_FAILED, StopReason.TIMED_OUT)


class StoreObserver:
    """Keeps the run's row and steps current as events arrive."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def on_event(self, event: Event) -> None:
        match event:
            case RunStarted():
                self._started(event)
            case StepFinished():
                self.store.add_step(event.run_id, event.to_dict())
                if not event.ok:
                    self.store.update_run(event.run_id, last_error=event.error)
            case VerifyFinished():  # the gate's step, indexed like every other step
                gate = {
                    "role": Role.VERIFIER,
                    "adapter": StepKind.GATE,
                    "ok": event.exit_code is not None,  # None: the command could not start
                    "verdict": "pass" if event.passed else "fail",
                }
                self.store.add_step(event.run_id, {**event.to_dict(), **gate})
            case IterationFinished(totals=totals):
                self.store.update_run(
                    event.run_id,
                    iterations=event.iteration,
                    total_cost=totals.cost_usd,
                    total_tokens=totals.tokens,
                    last_tick_at=event.ts,
                )
            case RunFinished(totals=totals):
                fields: dict[str, Any] = {
                    "status": event.status,
                    "iterations": event.iterations,
                    "total_cost": totals.cost_usd,
                    "total_tokens": totals.tokens,
                    "finished_at": event.ts,
                }
                if event.status in FAILED:
                    fields["last_error"] = event.stop_detail
                self.store.update_run(event.run_id, **fields)

    def _started(self, event: RunStarted) -> None:
        row = {
            "id": event.run_id,
            "goal": event.goal,
            "workdir": event.workdir,
            "run_dir": event.run_dir,
            "workspace": event.workspace.path,
            "state_file": event.state_file,
            "success_cmd": event.success_cmd,
            "max_iters": event.max_iters,
            "max_cost": event.budgets.cost_usd,
            "max_tokens": event.budgets.tokens,
            "max_time": event.budgets.time_s,
            "status": "running",
            "started_at": event.started_at or event.ts,
            "runner_pid": event.pid,
        }
        if self.store.get(event.run_id) is None:
            self.store.add_run(row)
        else:
            self.store.update_run(
                event.run_id, status="running", runner_pid=event.pid, finished_at=None, last_error=None
            )
            self.store.drop_steps_after(event.run_id, (event.resumed_at or 1) - 1)


class StoreControl:
    """Answers the engine's "stop?" before every step, and kills the step in flight on ``stop --now``."""

    POLL_S = 0.5

    def __init__(self, store: Store) -> None:
        self.store = store
        self.run_id = ""
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, run_id: str, cancel: threading.Event) -> None:
        """Poll for ``stop --now`` on a thread of its own, until :meth:`close`."""
        self.run_id = run_id
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._watch, args=(run_id, cancel), name="loope-stop-watch", daemon=True
            )
            self._thread.start()

    def stop_requested(self) -> bool:
        return bool(self.run_id) and self.store.stop_flags(self.run_id)[0]

    def _watch(self, run_id: str, cancel: threading.Event) -> None:
        while not self._done.wait(self.POLL_S):
            try:
                _, now = self.store.stop_flags(run_id)
            except Exception:  # noqa: BLE001 - a busy database is asked again on the next poll
                continue
            if now:
                cancel.set()

    def close(self) -> None:
        self._done.set()
