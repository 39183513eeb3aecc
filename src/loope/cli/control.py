"""Controlling runs from another terminal: status, stop, resume, detach, and the lessons kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from loope.cli.options import output_options, project_dir, views, workdir_option
from loope.cli.runs import runner_alive

STATE_LINES = 40


def _store(workdir: Path) -> Any:
    from loope.store.db import Store

    return Store.for_project(workdir)


def run_status(workdir: Path, run_id: str) -> dict[str, Any]:
    """What ``status`` reports about one run: the record, the runner, the state file."""
    from loope.records import state as state_file
    from loope.records.rundir import RUNS, RunDir

    rundir = RunDir(workdir / RUNS / run_id)
    record = rundir.read_json("run.json")
    row = _store(workdir).get(run_id) or {}
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


def _print_status(info: dict[str, Any]) -> None:
    loop = info["loop"]
    runner = f"runner pid {loop['runner_pid']}, {'alive' if loop['runner_alive'] else 'not running'}"
    click.echo(f"{loop['id']} · {loop['status']} ({runner})")
    click.echo(f"  goal: {loop['goal'][:200]}")
    cost = f"${loop['cost_usd']:.4f}" + (f"/${loop['max_cost_usd']:.2f}" if loop.get("max_cost_usd") else "")
    click.echo(f"  iteration {loop['iteration']}/{loop['max_iterations']} · cost {cost} · {loop['tokens']} tokens")
    if loop.get("stop_requested") and loop["status"] == "running":
        click.echo("  stop requested: it stops before its next step")
    if loop.get("last_error"):
        click.echo(f"  last error: {loop['last_error']}")
    if info.get("state_problem"):
        click.echo(f"  state file: {info['state_problem']}")
    if info.get("state_notes"):
        click.echo(f"  BLOCKED — the agent's notes: {info['state_notes'][:500]}")
    click.echo(f"  state file {loop['state_file']}:")
    for line in info["state_excerpt"].splitlines():
        click.echo(f"    {line}")


@click.command()
@click.argument("run_ref", metavar="[RUN]", required=False)
@click.option("--json", "json_", is_flag=True, help="JSON output.")
@workdir_option
def status(run_ref: str | None, json_: bool, workdir: Path | None) -> int:
    """One run's status, iteration, cost, runner and state file; without RUN, every running run."""
    from loope.records.rundir import find_run, list_runs

    root = project_dir(workdir)
    running = [r.run_id for r in list_runs(root) if _is_running(r.root)]
    ids = [find_run(root, run_ref).run_id] if run_ref else running
    infos = [run_status(root, run_id) for run_id in ids]
    if json_:
        click.echo(json.dumps(infos[0] if run_ref else infos, indent=2, default=str))
        return 0
    if not infos:
        click.echo("no run is running; `loope runs` lists them all")
    for info in infos:
        _print_status(info)
    return 0


def _is_running(root: Path) -> bool:
    try:
        return bool(json.loads((root / "run.json").read_text(encoding="utf-8")).get("status") == "running")
    except (OSError, ValueError):
        return False


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--now", is_flag=True, help="Also kill the step in flight.")
@workdir_option
def stop(run_ref: str, now: bool, workdir: Path | None) -> int:
    """Ask RUN to stop before its next step (with --now, kill the step in flight too)."""
    from loope.errors import EXIT_FAILED
    from loope.records.rundir import find_run

    root = project_dir(workdir)
    rundir = find_run(root, run_ref)
    record = rundir.read_json("run.json")
    if record.get("status") != "running":
        click.echo(f"run {rundir.run_id} already finished ({record.get('status')}); nothing to stop", err=True)
        return EXIT_FAILED
    _store(root).request_stop(rundir.run_id, now=now)
    if not runner_alive(record.get("pid")):
        click.echo(f"stop recorded for {rundir.run_id}, but its runner is not running; `loope resume` would stop it")
        return 0
    how = "the step in flight is being killed" if now else "it stops before its next step"
    click.echo(f"stop requested for {rundir.run_id}: {how}")
    return 0


@click.command()
@click.argument("run_ref", metavar="RUN")
@workdir_option
@output_options
def resume(run_ref: str, workdir: Path | None, **output: Any) -> int:
    """Continue RUN, whose runner died, after its last completed iteration."""
    from loope.engine.loop import Engine
    from loope.records.rundir import find_run
    from loope.services import attach

    root = project_dir(workdir)
    rundir = find_run(root, run_ref)
    _store(root).clear_stop(rundir.run_id)
    engine = Engine.resume(rundir, observers=views(**output), services=attach)
    engine.drive(first=engine.run_state.record.completed + 1)
    return engine.exit_code()


def start_detached(spec: Any) -> int:
    """Prepare the run here (so bad input fails now), then drive it from a background process."""
    from loope.engine.loop import Engine
    from loope.store.db import Store
    from loope.store.observer import StoreObserver

    engine = Engine(spec, observers=[StoreObserver(Store.for_project(spec.workdir))])
    rundir = engine.prepare().rundir
    engine.lock.release()
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
    click.echo(rundir.run_id)
    return 0


@click.command()
@click.option("--json", "json_", is_flag=True, help="JSON output.")
@workdir_option
def lessons(json_: bool, workdir: Path | None) -> int:
    """The lessons remembered from earlier runs of this project."""
    rows = _store(project_dir(workdir)).lessons()
    if json_:
        click.echo(json.dumps(rows, indent=2))
        return 0
    if not rows:
        click.echo("no lessons yet: each finished run leaves one")
    for row in rows:
        click.echo(f"{row['run_id']} · {row['outcome']} after {row['iterations']} iteration(s)")
        click.echo(f"  goal: {row['goal'][:160]}")
        if row["failed"]:
            click.echo(f"  failed: {row['failed'].splitlines()[0][:160]}")
        if row["worked"]:
            click.echo(f"  worked: {row['worked'].splitlines()[-1][:160]}")
        click.echo(f"  changed: {row['diffstat'][:160]}")
    return 0
