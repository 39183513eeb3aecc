"""The store as an observer of the engine (the index) and as its control channel (stop requests)."""

from __future__ import annotations

import threading
from typing import Any

from loope.engine.events import Event
from loope.store.db import Store

FAILED = ("failed", "step_failed", "timed_out")


class StoreObserver:
    """Keeps the run's row and steps current as events arrive."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def on_event(self, event: Event) -> None:
        d: dict[str, Any] = event.data
        if event.type == "run_started":
            budgets = d.get("budgets", {})
            row = {
                "id": event.run_id,
                "goal": d["goal"],
                "workdir": d["workdir"],
                "run_dir": d["run_dir"],
                "workspace": d["workspace"]["path"],
                "state_file": d.get("state_file"),
                "success_cmd": d.get("success_cmd"),
                "max_iters": d.get("max_iters"),
                "max_cost": budgets.get("cost_usd"),
                "max_tokens": budgets.get("tokens"),
                "max_time": budgets.get("time_s"),
                "status": "running",
                "started_at": d.get("started_at") or event.ts,
                "runner_pid": d.get("pid"),
            }
            existing = self.store.get(event.run_id)
            if existing is None:
                self.store.add_run(row)
            else:
                self.store.update_run(
                    event.run_id, status="running", runner_pid=d.get("pid"), finished_at=None, last_error=None
                )
                self.store.drop_steps_after(event.run_id, int(d.get("resumed_at") or 1) - 1)
        elif event.type == "step_finished":
            self.store.add_step(event.run_id, d)
            if not d.get("ok", True):
                self.store.update_run(event.run_id, last_error=d.get("error"))
        elif event.type == "iteration_finished":
            totals = d.get("totals", {})
            self.store.update_run(
                event.run_id,
                iterations=d["iteration"],
                total_cost=totals.get("cost_usd", 0.0),
                total_tokens=totals.get("input_tokens", 0) + totals.get("output_tokens", 0),
                last_tick_at=event.ts,
            )
        elif event.type == "run_finished":
            totals = d.get("totals", {})
            fields: dict[str, Any] = {
                "status": d["status"],
                "iterations": d.get("iterations", 0),
                "total_cost": totals.get("cost_usd", 0.0),
                "total_tokens": totals.get("input_tokens", 0) + totals.get("output_tokens", 0),
                "finished_at": event.ts,
            }
            if d["status"] in FAILED:
                fields["last_error"] = d.get("stop_detail")
            self.store.update_run(event.run_id, **fields)


class StoreControl:
    """Answers the engine's "stop?" before every step, and kills the step in flight on ``stop --now``.

    It watches for ``stop --now`` from the run's ``run_started`` (the engine's run state exists by
    then, and its cancel event is taken from the public ``run_state``) to its ``run_finished``.
    """

    POLL_S = 0.5

    def __init__(self, store: Store, engine: Any) -> None:
        self.store = store
        self.engine = engine
        self.run_id = ""
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def stop_requested(self) -> bool:
        run_id = self.run_id or str(self.engine.bus.run_id)
        return bool(run_id) and self.store.stop_flags(run_id)[0]

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

    def on_event(self, event: Event) -> None:
        if event.type == "run_started" and self._thread is None:
            self.run_id = event.run_id
            cancel: threading.Event = self.engine.run_state.cancel
            self._thread = threading.Thread(
                target=self._watch, args=(event.run_id, cancel), name="loope-stop-watch", daemon=True
            )
            self._thread.start()
        elif event.type == "run_finished":
            self.close()
