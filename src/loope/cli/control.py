"""Controlling runs from another terminal: stop, resume, continue, detach, and the lessons kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from loope.cli.options import output_options, project_dir, views, workdir_option
from loope.control import is_running, open_store, stop_run
from loope.control import start_detached as start
from loope.errors import EXIT_FAILED, LoopeError
from loope.records.rundir import find_run
from loope.text import parse_duration


@click.command(short_help="Ask a run to stop before its next step.")
@click.argument("run_ref", metavar="RUN")
@click.option("--now", is_flag=True, help="Also kill the step in flight.")
@workdir_option
def stop(run_ref: str, now: bool, workdir: Path | None) -> int:
    """Ask RUN to stop before its next step (with --now, kill the step in flight too)."""
    root = project_dir(workdir)
    requested, detail = stop_run(root, find_run(root, run_ref).run_id, now=now)
    click.echo(detail, err=not requested)
    return 0 if requested else EXIT_FAILED


@click.command(short_help="Continue a run whose runner died.")
@click.argument("run_ref", metavar="RUN")
@click.option("--lock-fd", type=int, hidden=True, help="The run's lock, passed on by the process that prepared it.")
@workdir_option
@output_options
def resume(run_ref: str, lock_fd: int | None, workdir: Path | None, **output: Any) -> int:
    """Continue RUN, whose runner died, after its last completed iteration."""
    from loope.engine.loop import Engine
    from loope.services import for_project

    root = project_dir(workdir)
    rundir = find_run(root, run_ref)
    on_temporal = rundir.read_json("run.json").get("temporal")
    if isinstance(on_temporal, dict) and lock_fd is None and is_running(rundir.root):
        raise LoopeError(
            f"run {rundir.run_id} runs on Temporal (workflow {on_temporal.get('workflow_id')}); follow it again"
            " with `loope fleet continue FLEET` (`loope fleet status` lists the fleets), not resume"
        )
    # A pending stop request is kept: it was made for this run (while its runner was dead, or
    # between `run --detach` and its background runner), and a refused resume must not erase it.
    engine = Engine.resume(rundir, lambda spec: for_project(spec, views(**output)), lock_fd=lock_fd)
    engine.drive(first=engine.run_state.record.completed + 1)
    return engine.exit_code()


@click.command("continue", short_help="Continue a finished run with more budget (or a new goal).")
@click.argument("run_ref", metavar="RUN")
@click.option("--max-iters", type=int, metavar="N", help="Iterations to add. [default: as many as the first run had]")
@click.option("--max-cost", type=float, metavar="USD", help="USD to add to what the run has spent.")
@click.option("--max-time", metavar="DUR", help="Wall time to add (90s, 30m, 2h).")
@click.option("--goal", metavar="TEXT", help="A new goal (needed to continue a run that converged).")
@workdir_option
@output_options
def continue_(run_ref: str, workdir: Path | None, **options: Any) -> int:
    """Continue RUN, which stopped, from its last completed iteration: same workspace, branch and memory."""
    from loope.engine.loop import Engine
    from loope.engine.segments import MoreBudget
    from loope.services import for_project  # loads the spec (pydantic)

    root = project_dir(workdir)
    rundir = find_run(root, run_ref)
    max_iters, max_cost, max_time = (options.pop(k) for k in ("max_iters", "max_cost", "max_time"))
    if max_iters is not None and max_iters < 1:
        raise LoopeError(f"--max-iters: must be at least 1 (got {max_iters})")
    if max_cost is not None and max_cost <= 0:
        raise LoopeError(f"--max-cost: must be more than zero (got {max_cost:g})")
    seconds = parse_duration(max_time, what="--max-time") if max_time is not None else None
    more = MoreBudget(max_iters=max_iters, max_cost=max_cost, max_time=seconds, goal=options.pop("goal"))

    def clear_spent_stop() -> None:
        # Under the run's lock, before its runner watches for stops: the stop that ended it is spent.
        open_store(root).update_run(rundir.run_id, interrupt=0, interrupt_now=0)

    engine = Engine.resume(
        rundir, lambda spec: for_project(spec, views(**options)), more=more, on_locked=clear_spent_stop
    )
    engine.drive(first=engine.run_state.record.completed + 1)
    return engine.exit_code()


def start_detached(spec: Any) -> int:
    """``loope run --detach``: print the run id of a run now driven in the background."""

    run_id = start(spec)
    click.echo(run_id)
    short = run_id.split("-", maxsplit=1)[0]
    click.echo(f"follow: loope logs {short} -f · status: loope status {short} · stop: loope stop {short}", err=True)
    return 0


@click.command(short_help="List lessons remembered from earlier runs.")
@click.option("--json", "json_", is_flag=True, help="JSON output.")
@workdir_option
def lessons(json_: bool, workdir: Path | None) -> int:
    """The lessons remembered from earlier runs of this project."""
    rows = open_store(project_dir(workdir)).lessons()
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
