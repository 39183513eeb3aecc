"""Run control shared by the CLI and the MCP tool: start detached, status, stop."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loope.errors import LoopeError
from loope.records.rundir import DB_NAME, LOOPE_DIR, RUNS, RunDir, state_file_of
from loope.runners import effective_status, runner_alive, runner_pid
from loope.text import local_clock
from loope.workspace.loopedir import outside_view

if TYPE_CHECKING:
    from loope.engine.run import RunnerLock, RunState
    from loope.store.db import Store

STATE_LINES = 40


def stop_run(workdir: Path, run_id: str, *, now: bool) -> tuple[bool, str]:
    """Ask a run to stop; whether the request was made, and one line saying what happens next."""
    record = RunDir(workdir / RUNS / run_id).read_json("run.json")
    if not request_stop(workdir, run_id, now=now):
        return False, f"run {run_id} already finished ({record.get('status')}); nothing to stop"
    if not runner_alive(workdir / RUNS / run_id, record.get("pid")):
        return True, f"stop recorded for {run_id}, but its runner is not running; `loope resume` would stop it"
    return True, f"stop requested for {run_id}: " + (
        "the step in flight is being killed" if now else "it stops before its next step"
    )


def open_store(workdir: Path) -> Any:
    from loope.store.db import Store

    return Store.for_project(workdir)


def run_status(workdir: Path, run_id: str) -> dict[str, Any]:
    """What ``status`` reports about one run: the record, the runner, the state file."""
    # The state file's parser loads here, the run view's classes below: `loope status` with no run
    # running needs neither.
    from loope.records import state_file

    rundir = RunDir(workdir / RUNS / run_id)
    record = rundir.read_json("run.json")
    row = open_store(workdir).get(run_id) or {}
    alive = record.get("status") == "running" and runner_alive(rundir.root, record.get("pid"))
    pid = (runner_pid(rundir.root) or record.get("pid")) if alive else record.get("pid")
    state_path = _state_path(rundir.root, row, record)
    state = state_file.read(state_path) if state_path is not None else None
    spec = _optional_json(rundir / "spec.json")
    totals = _object(record.get("totals"))
    status = "running" if alive else effective_status(record, rundir.root)
    activity = selection = None
    if status == "running" or record.get("rounds"):  # what it is doing; the last race (run.json has its rounds)
        from loope.records import runview

        view, _ = runview.read_view(rundir / "events.jsonl")
        activity = runview.activity(view) if status == "running" else None
        selection = runview.selection_summary(view.selection) if view.selection else None
    return {
        "loop": {
            "id": run_id,
            "goal": record.get("goal"),
            "status": status,
            "stop_reason": record.get("stop_reason"),
            "stop_detail": record.get("stop_detail"),
            "iteration": record.get("iterations", 0),
            "max_iterations": record.get("max_iters"),
            "cost_usd": totals.get("cost_usd", 0.0),
            "max_cost_usd": spec.get("max_cost"),
            "tokens": totals.get("input_tokens", 0) + totals.get("output_tokens", 0),
            "runner_pid": pid,
            "runner_alive": alive,
            "started_at": record.get("started_at"),
            "last_tick_at": row.get("last_tick_at"),
            "finished_at": record.get("finished_at"),
            "last_error": row.get("last_error")
            or (record.get("stop_detail") if status in ("failed", "step_failed", "timed_out") else None),
            "stop_requested": bool(row.get("interrupt")),
            "waiting": record.get("waiting") if alive else None,
            "waiting_text": waiting_text(record.get("waiting")) if alive else None,
            "run_dir": str(rundir.root),
            "state_file": str(state_path) if state_path is not None else None,
        },
        "activity": activity,
        "selection": selection,
        "frontmatter": state.frontmatter if state else {},
        "state_problem": state.problem if state else "run.json names no workspace, so no state file",
        "state_notes": state.notes if state and state.status == "blocked" else None,
        "state_excerpt": "\n".join(state.text.splitlines()[:STATE_LINES]) if state else "",
    }


def waiting_text(waiting: Any) -> str | None:
    """ "waiting for the usage limit until 15:00" (or "retrying … at 15:00") while the run waits, else None."""
    from loope.agents.setback import parse_reset  # loads the agents package: a waiting run only

    if not isinstance(waiting, dict) or (until := parse_reset(waiting.get("until"))) is None:
        return None

    who = f" ({waiting['reason']})" if waiting.get("reason") else ""
    if waiting.get("kind") == "retry":
        return f"retrying after a transient failure at {local_clock(until)}{who}"
    return f"waiting for the usage limit until {local_clock(until)}{who}"


def _state_path(run_root: Path, row: dict[str, Any], record: dict[str, Any]) -> Path | None:

    saved = outside_view(Path(row["state_file"])) if row.get("state_file") else None
    if saved is not None and saved.exists():
        return saved
    found = state_file_of(run_root, record.get("workspace"))
    return outside_view(found) if found is not None else saved


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _optional_json(path: Path) -> dict[str, Any]:
    """``path`` as a JSON object; empty when it is missing or damaged (status shows what it can)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return _object(data)


def running_runs(workdir: Path) -> list[str]:
    """The runs that are running, oldest start first: the store's index of them, each one's run.json agreeing.

    A project without a database has no run running (``loope status`` there loads no sqlite3); a run.json
    is not read for each run, which would cost more the more runs a project keeps.
    """
    if not (workdir / LOOPE_DIR / DB_NAME).exists():
        return []
    return [row["id"] for row in open_store(workdir).running() if is_running(workdir / RUNS / row["id"])]


def is_running(root: Path) -> bool:
    try:
        return bool(json.loads((root / "run.json").read_text(encoding="utf-8")).get("status") == "running")
    except (OSError, ValueError, AttributeError):
        return False


def request_stop(workdir: Path, run_id: str, *, now: bool = False) -> bool:
    """Ask a running run to stop (``now``: kill its step in flight too); False when it already finished."""
    rundir = RunDir(workdir / RUNS / run_id)
    record = rundir.read_json("run.json")
    if record.get("status") != "running":
        return False
    store = open_store(workdir)
    if store.request_stop(run_id, now=now):
        return True
    # The database lost the run's row (it was moved aside, or replaced by a fresh one). The runner
    # asks this same file before every step, so put the row back from run.json, flags set.
    store.restore_run(_row_from_record(rundir, record))
    if not store.request_stop(run_id, now=now):
        raise LoopeError(
            f"run {run_id} is not in the project's database {store.path}, so its runner cannot see a stop"
            f" request; stop its runner (pid {record.get('pid')}) yourself"
        )
    return True


def _row_from_record(rundir: RunDir, record: dict[str, Any]) -> dict[str, Any]:
    """The least the store needs to know about a run, from its run.json."""
    from loope.records.model import now_iso  # loads the record classes

    workspace = _object(record.get("workspace"))
    return {
        "id": rundir.run_id,
        "goal": str(record.get("goal") or ""),
        "workdir": str(record.get("workdir") or rundir.workdir),
        "run_dir": str(rundir.root),
        "workspace": workspace.get("path"),
        "max_iters": record.get("max_iters"),
        "status": "running",
        "iterations": record.get("iterations") or 0,
        "started_at": record.get("started_at") or now_iso(),
        "runner_pid": record.get("pid"),
    }


def start_detached(spec: Any) -> str:
    """Prepare the run here (so bad input fails now), drive it from a background process; the run id."""
    from loope.engine.loop import Engine
    from loope.engine.roster import Services
    from loope.notify import parse_specs
    from loope.store.db import Store
    from loope.store.observer import StoreObserver

    if spec.notify:
        parse_specs(list(spec.notify))  # here, not in the background runner, where no one would see the error

    store = Store.for_project(spec.workdir)
    engine = Engine(spec, Services(observers=[StoreObserver(store)]))
    run = engine.prepare()
    engine.let_go()  # the background runner watches and records it from now on
    try:
        hand_over(run.rundir, spec.workdir, engine.lock)
    except LoopeError as exc:
        _never_started(run, store, f"the background runner could not start: {exc}")
        raise LoopeError(f"run {run.rundir.run_id} failed: {exc}") from None
    finally:
        engine.lock.release()  # the background runner holds it now, through the descriptor it was passed
        store.close()  # a long-lived starter (the MCP server) keeps nothing of the run open
    return run.rundir.run_id


def hand_over(rundir: RunDir, workdir: Path, lock: RunnerLock) -> int:
    """Drive the run from a new background process (``loope resume``), passing it the held ``lock``; its pid.

    The lock never leaves the run between the two processes, so the run never looks dead, and no
    other runner can take it in between. The caller closes its own descriptor afterwards.
    """

    from loope.spawn import spawn_detached  # loads subprocess

    fd = lock.fd
    assert fd is not None, "the run's lock must be held to be handed over"
    argv = [sys.executable, "-m", "loope", "resume", rundir.run_id, "--workdir", str(workdir), "--plain"]
    pid = spawn_detached([*argv, "--lock-fd", str(fd)], cwd=workdir, log_path=rundir / "runner.log", pass_fds=(fd,))
    lock.write_pid(pid)  # the holder from now on (it writes the same once it has adopted the lock)
    return pid


def _never_started(run: RunState, store: Store, detail: str) -> None:
    """Record a prepared run whose runner never started as failed, so nothing shows it running."""
    from loope.records.model import now_iso  # loads the record classes

    record = run.record
    record.status = record.stop_reason = "failed"
    record.stop_detail = detail
    record.finished_at = now_iso()
    record.pid = None
    run.save()
    store.update_run(record.run_id, status="failed", finished_at=record.finished_at, last_error=detail)
