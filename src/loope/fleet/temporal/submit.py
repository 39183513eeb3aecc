"""Submitting a fleet to Temporal, and following it: the coordinator of ``loope fleet FILE --temporal``.

Each task's run is prepared here, as for a local run (so bad input fails now, and the run starts
from exactly what the user sees), pushed to the git remote, and handed to a workflow whose id is
made of the project, the fleet and the task: submitting the same fleet again finds the same
workflows. While they run, the coordinator follows each one's status query and brings the run's
records home after every iteration, so ``show``, ``apply``, ``logs`` and the dashboard read them
as they read a local run's. Stopping goes through each workflow's ``stop`` signal.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loope.engine.resume import reopen_workspace
from loope.engine.roster import Services
from loope.engine.run import RunnerLock
from loope.enums import WorkspaceMode
from loope.errors import LoopeError
from loope.fleet import transport
from loope.fleet.orders import LoopOrder, LoopStatus
from loope.fleet.pool import Coordinator, FleetDisplay, FleetView, TaskView, _shared_budget
from loope.fleet.temporal.client import Bridge
from loope.records.atomic import write_text
from loope.records.model import RunRecord, now_iso
from loope.records.rundir import RUNS
from loope.spec import LoopSpec
from loope.store.db import Store
from loope.store.fleets import FleetStore
from loope.workspace.branch import publish_run
from loope.workspace.git import Git

POLL_S = 1.0
OPEN = ("running", "waiting")


@dataclass(frozen=True)
class TemporalSettings:
    """Where a fleet's workflows run and how its workspaces travel (stored with the fleet)."""

    address: str
    remote: str
    namespace: str = "default"
    task_queue: str = "loope"
    heartbeat_s: float = 30.0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> TemporalSettings:
        return cls(**json.loads(text))


def workflow_key(project: Path, fleet_id: str, task: str) -> str:
    """The loop's workflow id: the same for the same project, fleet and task, so nothing runs twice."""
    digest = hashlib.sha256(str(project.resolve()).encode()).hexdigest()[:8]
    return f"loope-{digest}-{fleet_id}-{task}"


@dataclass
class TemporalCoordinator(Coordinator):
    """The local coordinator's loop, with workflows in place of background runners."""

    settings: TemporalSettings | None = None
    bridge: Bridge | None = None
    project: Path = field(default_factory=Path.cwd)
    _synced: dict[str, str] = field(default_factory=dict, init=False)
    _forwarded: dict[str, bool] = field(default_factory=dict, init=False)
    _locks: dict[str, RunnerLock] = field(default_factory=dict, init=False)
    """The runs this process follows hold their lock here, so they read as alive and no one else runs them."""

    def __post_init__(self) -> None:
        self.poll_s = POLL_S

    @property
    def _bridge(self) -> Bridge:
        assert self.bridge is not None
        return self.bridge

    @property
    def _settings(self) -> TemporalSettings:
        assert self.settings is not None
        return self.settings

    def _start(self, task: TaskView, view: FleetView) -> None:

        settings = self._settings
        row = next(t for t in self.store.fleet_tasks(self.fleet_id) if t["name"] == task.name)
        spec = LoopSpec.model_validate_json(row["spec"])
        no_wait = spec.no_wait
        # A worker goes on from its own copy's worktree and sends the records from it: kept after each segment.
        update = {
            **_shared_budget(spec, view),
            "no_wait": True,
            "workspace": WorkspaceMode.WORKTREE,
            "keep_workspace": True,
        }
        spec = spec.model_copy(update=update)
        key = workflow_key(self.project, self.fleet_id, task.name)
        run_id = None
        try:
            run_id, sub, ref, self._locks[task.name] = _prepare(spec, settings.remote, key)
            order = LoopOrder(
                key=key,
                run_id=run_id,
                remote=settings.remote,
                records=ref,
                sub=sub,
                max_iters=spec.max_iters,
                max_cost=spec.max_cost,
                max_time=spec.max_time,
                no_wait=no_wait,
                heartbeat_s=settings.heartbeat_s,
            )
            # Recorded before the workflow starts: its first step may begin at once, and a `fleet stop`
            # then must find the run to signal.
            self.store.update_fleet_task(self.fleet_id, task.name, run_id=run_id, status="running")
            self._bridge.start(order, settings.task_queue)
        except LoopeError as exc:
            if run_id is not None:  # prepared, but no workflow runs it: a local run again (`resume` may take it)
                _mark(Path(spec.workdir) / RUNS / run_id, None)
            if task.name in self._locks:
                self._locks.pop(task.name).release()
            # No workflow runs the prepared run: the task names none.
            self.store.update_fleet_task(self.fleet_id, task.name, run_id=None, status="failed", error=exc.message)
            return
        self._synced[task.name] = ref

    def _stop_runs(self, view: FleetView, *, now: bool) -> None:
        for task in view.tasks:
            if task.status == "running" and task.run_id:
                self._bridge.stop(workflow_key(self.project, self.fleet_id, task.name), now=now)

    def _interrupted(self) -> None:
        """Ctrl-C leaves the workflows running: they are durable; `fleet continue` follows them again."""

    def _poll(self) -> None:
        for row in self.store.fleet_tasks(self.fleet_id):
            name = row["name"]
            if row["status"] != "running" or not row["run_id"]:
                continue
            rundir = Path(row["workdir"]) / RUNS / row["run_id"]
            if name not in self._locks:  # followed again after the coordinator died
                lock = RunnerLock(rundir / "runner.lock")
                if not lock.acquire():
                    continue  # another coordinator follows this loop
                self._locks[name] = lock
            key = workflow_key(self.project, self.fleet_id, name)
            self._forward_stop(key, Path(row["workdir"]), row["run_id"])
            status = self._bridge.status(key)
            if status is None:
                continue
            ended = status.state not in OPEN
            if status.records and status.records != self._synced.get(name):
                bring_home(rundir, self._settings.remote, status.records)
                self._synced[name] = status.records
            conclude(rundir, status, ended=ended)
            if ended:
                self.store.update_fleet_task(self.fleet_id, name, status=status.state)
                self._locks.pop(name).release()

    def _forward_stop(self, key: str, workdir: Path, run_id: str) -> None:
        """A stop asked of the run here (`loope stop RUN`, the dashboard, MCP) becomes its workflow's signal."""

        asked, now = Store.for_project(workdir).stop_flags(run_id)
        if asked and self._forwarded.get(key) != now:
            self._bridge.stop(key, now=now)
            self._forwarded[key] = now


def _prepare(spec: Any, remote: str, key: str) -> tuple[str, str, str, RunnerLock]:
    """Prepare the run here and push it; (run id, workdir below the repository's top, records ref, its lock)."""
    from loope.engine.loop import Engine
    from loope.store.observer import StoreObserver

    repo, sub = transport.repo_of(spec.workdir)
    engine = Engine(spec, Services(observers=[StoreObserver(Store.for_project(spec.workdir))]))
    run = engine.prepare()
    run.workspace.stop_watching()
    ref = transport.records_ref(key, 0, 1)
    try:
        transport.push(repo, run.rundir.root, remote, ref, key)
    except LoopeError:
        engine.lock.release()
        raise
    _mark(run.rundir.root, key)  # before its workflow starts: from then on `resume` must not run it here
    return run.rundir.run_id, sub, ref, engine.lock


def _mark(rundir: Path, key: str | None) -> None:
    """Say in the local run.json that workflow ``key`` runs the loop (``conclude`` keeps it so); None: none does."""
    path = rundir / "run.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    if key is None:
        record.pop("temporal", None)
    else:
        record["temporal"] = {"workflow_id": key, "retried": 0, "lost_cost_usd": 0.0, "workers": []}
    write_text(path, json.dumps(record, indent=2, ensure_ascii=False) + "\n")


def bring_home(rundir: Path, remote: str, ref: str) -> None:
    """Replace the local run's records with those at ``ref``, and move its workspace to their head."""
    record = json.loads((rundir / "run.json").read_text(encoding="utf-8"))
    workdir, here = Path(record["workdir"]), record["workspace"]
    workspace = Path(here["path"])
    repo, _ = transport.repo_of(workdir)
    commit = transport.fetch(repo, remote, ref)
    head = repo.out("rev-parse", f"{commit}^1")
    # run.json is replaced last and whole, still saying the loop runs on Temporal: a coordinator killed meanwhile
    # leaves a run that `resume` refuses to run beside its workflow.
    arrived = json.loads(repo.run("cat-file", "blob", f"{commit}:run.json").stdout or b"{}")
    marked = {"temporal": record["temporal"]} if "temporal" in record else {}
    transport.clear_records(rundir, keep=("run.json",))
    transport.unpack(repo, commit, rundir, but=("run.json",))
    Git(rundir / "workspace").run("reset", "--hard", "-q", head)
    transport.place_state(rundir, workspace)
    git_dir = Path(here["git_dir"]) if here.get("git_dir") else None
    running = {"status": "running", "stop_reason": None, "stop_detail": None} if marked else {}  # until concluded
    transport.relocate(
        rundir, workdir=workdir, workspace=workspace, git_dir=git_dir, record=arrived, **marked, **running
    )
    _publish(rundir)


def _publish(rundir: Path) -> None:
    """The run's branch here gets the commits that came home (replayed on the user's HEAD, as a local run's)."""

    record = RunRecord.from_dict(json.loads((rundir / "run.json").read_text(encoding="utf-8")))
    publish_run(reopen_workspace(record.workspace), record.run_id)


def conclude(rundir: Path, status: LoopStatus, *, ended: bool) -> None:
    """Make the local run.json say what the workflow says: running (here) while it runs, its end once ended.

    Between iterations the records read as a finished one-iteration segment; the loop, though, runs on.
    """

    path = rundir / "run.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    if not ended:
        fields: dict[str, Any] = {"status": "running", "stop_reason": None, "stop_detail": None}
        fields.update(finished_at=None, converged=False, pid=os.getpid())
    elif record.get("status") != status.state or record.get("status") == "running":
        fields = {"status": status.state, "stop_reason": status.stop_reason, "stop_detail": status.stop_detail}
        fields.update(converged=status.state == "converged", pid=None)
        fields["finished_at"] = record.get("finished_at") or _now()
    else:
        fields = {}
    # What only the workflow knows: the attempts given up on, what they had spent, who ran the iterations.
    fields["temporal"] = {
        "workflow_id": status.key,
        "retried": status.retried,
        "lost_cost_usd": status.lost_usd,
        "workers": list(status.workers),
    }
    if any(record.get(k) != v for k, v in fields.items()):
        record.update(fields)
        write_text(path, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    totals = record.get("totals") or {}
    Store.for_project(Path(record["workdir"])).update_run(
        record["run_id"],
        status=record["status"],
        iterations=record.get("iterations") or 0,
        total_cost=totals.get("cost_usd") or 0.0,
        total_tokens=(totals.get("input_tokens") or 0) + (totals.get("output_tokens") or 0),
        finished_at=record.get("finished_at"),
    )


def _now() -> str:

    return now_iso()


def drive_fleet(
    store: FleetStore, fleet_id: str, display: FleetDisplay, settings: TemporalSettings, bridge: Bridge
) -> FleetView:
    """Start the fleet's pending loops on Temporal and follow all of them to their ends."""
    project = store.path.parent.parent
    coordinator = TemporalCoordinator(store, fleet_id, display, settings=settings, bridge=bridge, project=project)
    return coordinator.drive()


def stop_fleet(store: FleetStore, fleet_id: str, settings: TemporalSettings, *, now: bool) -> int:
    """Signal every loop of the fleet to stop; how many workflows got the signal."""
    project = store.path.parent.parent
    asked = 0
    with Bridge(settings.address, settings.namespace) as bridge:
        for row in store.fleet_tasks(fleet_id):
            if row["run_id"]:  # its workflow may have started; one that ended refuses the signal
                asked += int(bridge.stop(workflow_key(project, fleet_id, row["name"]), now=now))
    return asked


def workflow_states(store: FleetStore, fleet_id: str, settings: TemporalSettings) -> dict[str, dict[str, Any] | None]:
    """Each started loop's status query (or result), by task; None where Temporal cannot say."""
    project = store.path.parent.parent
    states: dict[str, dict[str, Any] | None] = {}
    with Bridge(settings.address, settings.namespace) as bridge:
        for row in store.fleet_tasks(fleet_id):
            if row["run_id"]:
                status = bridge.status(workflow_key(project, fleet_id, row["name"]))
                states[row["name"]] = asdict(status) if status is not None else None
    return states
