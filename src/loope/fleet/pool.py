"""The local fleet: up to ``jobs`` ordinary runs at once, under one shared budget.

Each task becomes a normal run (its own run dir and branch), prepared here and driven by a
background runner, exactly as ``loope run --detach`` does. The coordinator only starts runs,
watches their run.json, and asks them to stop (through each project's store) when the fleet is
told to stop or its budget is spent. It can die at any time: the runs go on, and ``loope fleet
continue`` picks the fleet up again.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from loope.control import hand_over, request_stop, start_detached
from loope.errors import EXIT_FAILED, EXIT_OK, LoopeError
from loope.records.model import now_iso
from loope.records.rundir import RUNS, RunDir
from loope.runners import LOCK_FILE, effective_status, process_alive
from loope.store.fleets import FleetStore
from loope.workspace.loopedir import LOOPE_DIR

POLL_S = 0.5
WAITING = ("pending", "running")
"""Task states that are not final."""


@dataclass
class TaskView:
    """What the fleet knows of one task at one moment."""

    name: str
    workdir: str
    run_id: str | None
    status: str
    iteration: int = 0
    max_iters: int | None = None
    cost_usd: float = 0.0
    last_event: str = ""
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class FleetView:
    """The fleet at one moment: its tasks and its totals."""

    fleet_id: str
    status: str
    jobs: int
    tasks: list[TaskView]
    max_cost: float | None = None
    max_time: float | None = None
    elapsed_s: float = 0.0
    detail: str = ""
    coordinator_alive: bool = False

    @property
    def spent(self) -> float:
        return round(sum(t.cost_usd for t in self.tasks), 6)

    def count(self, *statuses: str) -> int:
        return sum(1 for t in self.tasks if t.status in statuses)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fleet_id": self.fleet_id,
            "status": self.status,
            "detail": self.detail,
            "jobs": self.jobs,
            "max_cost": self.max_cost,
            "max_time": self.max_time,
            "elapsed_s": round(self.elapsed_s, 1),
            "cost_usd": self.spent,
            "coordinator_alive": self.coordinator_alive,
            "tasks": [t.to_dict() for t in self.tasks],
        }


class FleetDisplay(Protocol):
    def show(self, view: FleetView) -> None: ...

    def close(self, view: FleetView) -> None: ...


def task_view(row: dict[str, Any]) -> TaskView:
    """A task as its run.json says it is now (the run has the last word over the stored status)."""
    view = TaskView(row["name"], row["workdir"], row["run_id"], row["status"], error=row.get("error"))
    if not row["run_id"]:
        return view
    rundir = RunDir(Path(row["workdir"]) / RUNS / row["run_id"])
    try:
        record = rundir.read_json("run.json")
    except LoopeError as exc:
        view.status, view.error = "damaged", exc.message
        return view
    totals = record.get("totals") if isinstance(record.get("totals"), dict) else {}
    view.status = effective_status(record, rundir.root)
    view.iteration = int(record.get("iterations") or 0)
    view.max_iters = record.get("max_iters")
    cost = totals.get("cost_usd") if isinstance(totals, dict) else 0.0
    view.cost_usd = float(cost) if isinstance(cost, int | float) else 0.0
    temporal = record.get("temporal")
    lost = temporal.get("lost_cost_usd") if isinstance(temporal, dict) else None
    view.cost_usd += float(lost) if isinstance(lost, int | float) else 0.0  # spent by attempts given up on
    view.last_event = _last_event(rundir / "events.jsonl")
    return view


def _epoch(iso: str | None) -> float | None:

    try:
        return datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _last_event(path: Path) -> str:
    """The type of a run's latest event (read from the file's end, whatever its length)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            lines = f.read().splitlines()
    except OSError:
        return ""
    for raw in reversed(lines):
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") != "agent_event":
            return str(event.get("type", ""))
    return ""


def fleet_view(store: FleetStore, fleet_id: str) -> FleetView:
    """The fleet now: its row, and each task as its run says it is."""
    row = store.get_fleet(fleet_id)
    if row is None:
        raise LoopeError(f"no fleet {fleet_id!r}; `loope fleet status` lists the fleets")
    started = _epoch(row["started_at"])
    finished = _epoch(row["finished_at"]) if row["finished_at"] else None
    end = finished if finished is not None else time.time()
    return FleetView(
        fleet_id=fleet_id,
        status=row["status"],
        jobs=row["jobs"],
        tasks=[task_view(t) for t in store.fleet_tasks(fleet_id)],
        max_cost=row["max_cost"],
        max_time=row["max_time"],
        elapsed_s=max(0.0, end - started) if started is not None else 0.0,
        detail=row["stop_detail"] or "",
        coordinator_alive=row["status"] == "running" and process_alive(row["coordinator_pid"]),
    )


@dataclass
class Coordinator:
    """Drives one fleet to its end from this process."""

    store: FleetStore
    fleet_id: str
    display: FleetDisplay
    poll_s: float = POLL_S
    sleep: Callable[[float], None] = time.sleep
    _stopping: str | None = field(default=None, init=False)

    def drive(self) -> FleetView:
        """Start, watch and stop runs until every task has ended; the fleet's final view."""
        self.store.update_fleet(self.fleet_id, coordinator_pid=os.getpid(), status="running", finished_at=None)
        try:
            while True:
                self._poll()
                view = fleet_view(self.store, self.fleet_id)
                self._check_stop(view)
                started = self._start_pending(view)
                self.display.show(fleet_view(self.store, self.fleet_id) if started else view)
                waiting_on = ("running",) if self._stopping else WAITING
                if not started and not any(t.status in waiting_on for t in view.tasks):
                    break
                self.sleep(self.poll_s)
        except KeyboardInterrupt:
            self._interrupted()
            raise
        return self._finish(view, *self._outcome(view))

    def _poll(self) -> None:
        """Bring the runs' records up to date before each look at the fleet (they are local here)."""

    def _interrupted(self) -> None:
        self._stop_runs(view_now := fleet_view(self.store, self.fleet_id), now=True)
        self._finish(view_now, "stopped", "interrupted with Ctrl-C; the runs in flight were asked to stop now")

    # -- stopping -----------------------------------------------------------------------------

    def _check_stop(self, view: FleetView) -> None:
        stop, now = self.store.fleet_stop_flags(self.fleet_id)
        reason: str | None = None
        if stop:
            reason = "stop requested"
        elif view.max_cost is not None and view.spent >= view.max_cost:
            reason = f"the fleet spent ${view.spent:.2f} of its ${view.max_cost:.2f} budget"
        elif view.max_time is not None and view.elapsed_s >= view.max_time:
            reason = f"the fleet ran {view.elapsed_s:.0f}s of its {view.max_time:.0f}s"
        if reason is None or self._stopping == reason:
            return
        self._stopping = reason
        self._stop_runs(view, now=now)

    def _stop_runs(self, view: FleetView, *, now: bool) -> None:

        for task in view.tasks:
            if task.status == "running" and task.run_id:
                try:
                    request_stop(Path(task.workdir), task.run_id, now=now)
                except LoopeError as exc:
                    self.store.update_fleet_task(self.fleet_id, task.name, error=exc.message)

    # -- starting -----------------------------------------------------------------------------

    def _start_pending(self, view: FleetView) -> bool:
        if self._stopping is not None:
            return False
        free = view.jobs - view.count("running")
        started = False
        for task in view.tasks:
            if free <= 0:
                break
            if task.status != "pending":
                continue
            self._start(task, view)
            free -= 1
            started = True
        return started

    def _start(self, task: TaskView, view: FleetView) -> None:
        from loope.spec import LoopSpec

        row = next(t for t in self.store.fleet_tasks(self.fleet_id) if t["name"] == task.name)
        spec = LoopSpec.model_validate_json(row["spec"])
        spec = spec.model_copy(update=_shared_budget(spec, view))
        try:
            run_id = start_detached(spec)
        except LoopeError as exc:
            self.store.update_fleet_task(self.fleet_id, task.name, status="failed", error=exc.message)
            return
        self.store.update_fleet_task(self.fleet_id, task.name, run_id=run_id, status="running")

    # -- the end ------------------------------------------------------------------------------

    def _outcome(self, view: FleetView) -> tuple[str, str]:
        converged = view.count("converged")
        total = len(view.tasks)
        if self._stopping is not None:
            status = "stopped" if self._stopping == "stop requested" else "budget_exceeded"
            return status, f"{self._stopping}; {converged} of {total} loop(s) converged"
        if converged == total:
            return "converged", f"all {total} loop(s) converged"
        return "finished", f"{converged} of {total} loop(s) converged"

    def _finish(self, view: FleetView, status: str, detail: str) -> FleetView:

        for task in view.tasks:
            if task.status == "pending":
                self.store.update_fleet_task(self.fleet_id, task.name, status="skipped")
        self.store.update_fleet(self.fleet_id, status=status, stop_detail=detail, finished_at=now_iso())
        final = fleet_view(self.store, self.fleet_id)
        for task in final.tasks:
            if task.run_id and task.status not in WAITING:
                self.store.update_fleet_task(self.fleet_id, task.name, status=task.status)
        self.display.close(final)
        return final


def _shared_budget(spec: Any, view: FleetView) -> dict[str, Any]:
    """A new run's budgets, cut to what the fleet has left."""
    update: dict[str, Any] = {}
    if view.max_cost is not None:
        left = max(view.max_cost - view.spent, 0.0)
        update["max_cost"] = left if spec.max_cost is None else min(spec.max_cost, left)
    if view.max_time is not None:
        left_s = max(view.max_time - view.elapsed_s, 1.0)
        update["max_time"] = left_s if spec.max_time is None else min(spec.max_time, left_s)
    return update


def exit_code(view: FleetView) -> int:

    return EXIT_OK if view.status == "converged" else EXIT_FAILED


def resume_dead(store: FleetStore, fleet_id: str) -> list[str]:
    """Restart the runner of every task whose run died; the tasks restarted.

    The run's lock is taken here and handed to the new runner, so the run is never seen dead or
    taken by anyone else in between; a run someone else took up meanwhile is left to them.
    """
    from loope.engine.run import RunnerLock  # loads the sandbox

    restarted: list[str] = []
    for task in fleet_view(store, fleet_id).tasks:
        if task.status != "dead" or not task.run_id:
            continue
        workdir = Path(task.workdir)
        rundir = RunDir(workdir / RUNS / task.run_id)
        lock = RunnerLock(rundir / LOCK_FILE)
        if not lock.acquire():
            continue
        try:
            hand_over(rundir, workdir, lock)
        finally:
            lock.release()
        store.update_fleet_task(fleet_id, task.name, status="running")
        restarted.append(task.name)
    return restarted


def recent_fleets(project: Path, limit: int = 10) -> list[dict[str, Any]]:
    """The project's most recent fleets, each with where it runs and its loops' statuses (none without a store)."""

    path = project / LOOPE_DIR / "loope.db"
    if not path.is_file():
        return []
    store = FleetStore(path)
    found = []
    for row in store.fleets()[:limit]:
        view = fleet_view(store, row["id"])
        found.append(
            {
                "fleet_id": view.fleet_id,
                "status": view.status,
                "on": json.loads(row["temporal"])["address"] if row.get("temporal") else "this machine",
                "cost_usd": round(view.spent, 4),
                "loops": [
                    {
                        "task": t.name,
                        "workdir": t.workdir,
                        "loop_id": t.run_id,
                        "status": t.status,
                        "iteration": t.iteration,
                    }
                    for t in view.tasks
                ],
            }
        )
    return found
