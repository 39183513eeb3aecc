"""One segment of a run on this machine: the next iteration, from the records a git remote holds.

What a Temporal activity calls (and nothing Temporal-specific): fetch the run's records commit,
lay the run dir and its workspace out under this worker's root, continue the run for one
iteration through the engine's own ``continue`` path (the same code a local run calls), then push
the records and the branch back. An iteration cut short by a dead worker is simply run again
from the last pushed records: the engine's resume discards what came after them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from loope.agents.setback import parse_reset
from loope.fleet import transport
from loope.fleet.orders import SegmentOrder, SegmentReport
from loope.proc import run_process
from loope.records.atomic import write_text
from loope.records.rundir import RUNS, RunDir
from loope.workspace.git import Git, safe_command, safe_env
from loope.workspace.loopedir import ensure_loope_dir
from loope.workspace.workspace import restart_own_index

if TYPE_CHECKING:
    from loope.engine.roster import Services
    from loope.records.model import RunRecord
    from loope.spec import LoopSpec

_RESETS = re.compile(r"the limit resets at (\S+)$")


class Segment:
    """Runs one :class:`SegmentOrder` under ``root``; :meth:`stop` (from any thread) kills it early."""

    def __init__(self, order: SegmentOrder, root: Path, *, attempt: int = 1, lost_usd: float = 0.0) -> None:
        self.order = order
        self.root = root
        self.attempt = attempt
        self.lost_usd = lost_usd
        """What attempts given up on had reported spending (their records never came back)."""
        self._spent: tuple[RunRecord, float] | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._workdir: Path | None = None
        self.worker = f"{socket.gethostname()}:{os.getpid()}"

    def spent(self) -> float:
        """USD the steps of this segment that finished have cost so far."""
        if self._spent is None:
            return 0.0
        record, before = self._spent
        return round(record.totals.cost_usd - before, 6)

    def stop(self) -> None:
        """Kill the step in flight and end the segment (the run is recorded ``stopped``)."""
        with self._lock:
            self._stop.set()
            if self._workdir is not None:
                _request_stop(self._workdir, self.order.run_id)

    def run(self) -> SegmentReport:
        from loope.engine.loop import Engine
        from loope.engine.segments import MoreBudget

        order = self.order
        repo, workdir, rundir = self._lay_out()
        record = json.loads((rundir / "run.json").read_text(encoding="utf-8"))
        more = MoreBudget(
            max_iters=1,
            max_cost=_left(order.max_cost, record["totals"]["cost_usd"]),
            max_time=_left(order.max_time, float(record.get("duration_s") or 0.0)),
            keep_patience=True,
        )
        engine = Engine.resume(
            RunDir(rundir), _services, more=more, on_locked=lambda: _clear_stop(workdir, order.run_id)
        )
        record_now = engine.run_state.record
        self._spent = (record_now, record_now.totals.cost_usd)
        with self._lock:
            self._workdir = workdir
            if self._stop.is_set():
                _request_stop(workdir, order.run_id)
        final = engine.drive(first=engine.run_state.record.completed + 1)
        ref = transport.records_ref(order.key, order.seq, self.attempt)
        snapshot = transport.push(repo, rundir, order.remote, ref, order.key)
        write_text(repo.work_tree.parent / "left-at", snapshot.commit + "\n")
        found = _RESETS.search(final.stop_detail or "") if final.stop_reason == "usage_limited" else None

        return SegmentReport(
            run_id=final.run_id,
            status=final.status,
            stop_reason=final.stop_reason,
            stop_detail=final.stop_detail,
            completed=final.completed,
            cost_usd=final.totals.cost_usd,
            tokens=final.totals.input_tokens + final.totals.output_tokens,
            records=snapshot.ref,
            head=snapshot.head,
            reset_at=parse_reset(found.group(1)) if found else None,
            worker=self.worker,
            attempt=self.attempt,
            lost_usd=self.lost_usd,
        )

    def _lay_out(self) -> tuple[Git, Path, Path]:
        """This worker's copy of the run: a clone holding the run's commits, the run dir, the workspace."""

        order = self.order
        top = self.root / re.sub(r"[^A-Za-z0-9_.-]+", "-", order.key) / "repo"
        if not (top / ".git").is_dir():
            top.mkdir(parents=True, exist_ok=True)
            run_process(safe_command("init", "-q", str(top)), cwd=top, env=safe_env(), capture=True)
        repo = Git(top)
        workdir = top / order.sub if order.sub != "." else top
        rundir = workdir / RUNS / order.run_id
        left = top.parent / "left-at"
        # This worker pushed the state the iteration starts from, and nothing ran here since: its copy is it.
        # (Gone while a segment runs: a worker that dies in one lays the run out afresh next time.)
        kept = rundir.is_dir() and left.is_file() and left.read_text().strip() == repo.rev(order.records)
        left.unlink(missing_ok=True)
        if kept:
            return repo, workdir, rundir
        commit = transport.fetch(repo, order.remote, order.records)
        head = repo.out("rev-parse", f"{commit}^1")
        ensure_loope_dir(workdir)
        if rundir.exists():  # an earlier attempt on this worker: its processes and tree go first
            transport.kill_leftovers(rundir)
            repo.run("worktree", "remove", "--force", str(rundir / "workspace"), check=False)
            shutil.rmtree(rundir)
        repo.run("worktree", "prune")
        rundir.mkdir(parents=True)
        transport.unpack(repo, commit, rundir)
        tree = rundir / "workspace"
        repo.run(
            "worktree", "add", "-q", "-f", "--detach", str(tree), head
        )  # as a local run's: the branch is published
        git_dir = Path(Git(tree).out("rev-parse", "--absolute-git-dir"))
        restart_own_index(git_dir, rundir)
        workspace = tree / order.sub if order.sub != "." else tree
        transport.place_state(rundir, workspace)
        transport.relocate(rundir, workdir=workdir, workspace=workspace, git_dir=git_dir)
        return repo, workdir, rundir


def _left(budget: float | None, spent: float) -> float | None:
    """What a segment adds so that the run's total budget stays ``budget`` (None: no budget)."""
    return None if budget is None else max(budget - spent, 1e-6)


def _services(spec: LoopSpec) -> Services:
    """The worker's own store (stop control, the run's row); no notifiers, no memory: those are the submitter's."""
    from loope.engine.roster import Services  # loads the spec (pydantic)
    from loope.store.db import Store
    from loope.store.observer import StoreControl, StoreObserver

    store = Store.for_project(spec.workdir)
    return Services(observers=[StoreObserver(store)], control=StoreControl(store))


def _clear_stop(workdir: Path, run_id: str) -> None:
    from loope.store.db import Store

    Store.for_project(workdir).update_run(run_id, interrupt=0, interrupt_now=0)


def _request_stop(workdir: Path, run_id: str) -> None:
    from loope.store.db import Store

    Store.for_project(workdir).request_stop(run_id, now=True)
