"""Run control shared by the CLI and the MCP tool: start detached, status, stop."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

STATE_LINES = 40


def runner_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def open_store(workdir: Path) -> Any:
    from loope.store.db import Store

    return Store.for_project(workdir)


def run_status(workdir: Path, run_id: str) -> dict[str, Any]:
    """What ``status`` reports about one run: the record, the runner, the state file."""
    from loope.records import state as state_file
    from loope.records.rundir import RUNS, RunDir

    rundir = RunDir(workdir / RUNS / run_id)
    record = rundir.read_json("run.json")
    row = open_store(workdir).get(run_id) or {}
    pid = record.get("pid")
    alive = record.get("status") == "running" and runner_alive(pid)
    state_path = Path(row.get("state_file") or Path(record["workspace"]["path"]) / ".loope" / "state.md")
    state = state_file.read(state_path)
    spec = json.loads((rundir / "spec.json").read_text(encoding="utf-8"))
    status = record.get("status")
    if status == "running" and not alive:
        status = "dead"
    return {
        "loop": {
            "id": run_id,
            "goal": record.get("goal"),
            "status": status,
            "stop_reason": record.get("stop_reason"),
            "stop_detail": record.get("stop_detail"),
            "iteration": record.get("iterations", 0),
            "max_iterations": record.get("max_iters"),
            "cost_usd": record.get("totals", {}).get("cost_usd", 0.0),
            "max_cost_usd": spec.get("max_cost"),
            "tokens": record.get("totals", {}).get("input_tokens", 0)
            + record.get("totals", {}).get("output_tokens", 0),
            "runner_pid": pid,
            "runner_alive": alive,
            "started_at": record.get("started_at"),
            "last_tick_at": row.get("last_tick_at"),
            "finished_at": record.get("finished_at"),
            "last_error": row.get("last_error")
            or (record.get("stop_detail") if status in ("failed", "step_failed", "timed_out") else None),
            "stop_requested": bool(row.get("interrupt")),
            "run_dir": str(rundir.root),
            "state_file": str(state_path),
        },
        "frontmatter": state.frontmatter,
        "state_problem": state.problem,
        "state_notes": state.notes if state.status == "blocked" else None,
        "state_excerpt": "\n".join(state.text.splitlines()[:STATE_LINES]),
    }


def is_running(root: Path) -> bool:
    try:
        return bool(json.loads((root / "run.json").read_text(encoding="utf-8")).get("status") == "running")
    except (OSError, ValueError):
        return False


def request_stop(workdir: Path, run_id: str, *, now: bool = False) -> bool:
    """Ask a running run to stop (``now``: kill its step in flight too); False when it already finished."""
    from loope.records.rundir import RUNS, RunDir

    record = RunDir(workdir / RUNS / run_id).read_json("run.json")
    if record.get("status") != "running":
        return False
    open_store(workdir).request_stop(run_id, now=now)
    return True


def start_detached(spec: Any) -> str:
    """Prepare the run here (so bad input fails now), drive it from a background process; the run id."""
    from loope.engine.loop import Engine
    from loope.store.db import Store
    from loope.store.observer import StoreObserver

    if spec.notify:
        from loope.notify import parse_specs

        parse_specs(list(spec.notify))  # here, not in the background runner, where no one would see the error

    engine = Engine(spec, observers=[StoreObserver(Store.for_project(spec.workdir))])
    rundir = engine.prepare().rundir
    engine.lock.release()
    import subprocess

    log = (rundir / "runner.log").open("ab")
    subprocess.Popen(
        [sys.executable, "-m", "loope", "resume", rundir.run_id, "--workdir", str(spec.workdir), "--plain"],
        cwd=spec.workdir,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    return rundir.run_id
