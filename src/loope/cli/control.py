"""Controlling runs from another terminal: status, stop, resume, detach, and the lessons kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from loope.cli.options import output_options, project_dir, views, workdir_option
from loope.control import is_running, open_store, run_status, running_runs, stop_run
from loope.control import start_detached as start
from loope.errors import EXIT_FAILED, LoopeError
from loope.records.rundir import find_run
from loope.text import parse_duration


def _print_status(info: dict[str, Any]) -> None:
    loop = info["loop"]
    runner = f"runner pid {loop['runner_pid']}, {'alive' if loop['runner_alive'] else 'not running'}"
    click.echo(f"{loop['id']} · {loop['status']} ({runner})")
    click.echo(f"  goal: {loop['goal'][:200]}")
    cost = f"${loop['cost_usd']:.4f}" + (f"/${loop['max_cost_usd']:.2f}" if loop.get("max_cost_usd") else "")
    click.echo(f"  iteration {loop['iteration']}/{loop['max_iterations']} · cost {cost} · {loop['tokens']} tokens")
    if loop.get("waiting_text"):
        click.echo(f"  {loop['waiting_text']}")
    _print_activity(info.get("activity"), waiting_shown=bool(loop.get("waiting_text")))
    if chosen := info.get("selection"):
        click.echo(f"  iteration {chosen['iteration']}: candidate {chosen['winner']} won ({chosen['why']})")
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


def _print_activity(activity: dict[str, Any] | None, *, waiting_shown: bool) -> None:
    """The steps in flight (elapsed, last action, latest message), a wait, the last gate."""

    if not activity:
        return
    from loope.ui.lines import duration, wait_text  # loads the report and the run view: running runs only

    click.echo(f"  elapsed {duration(activity['elapsed_s'])}")
    for step in activity["steps"]:
        since = f" · {duration(step['elapsed_s'])}" if step["elapsed_s"] is not None else ""
        click.echo(f"  now: {step['label']}{since}")
        said = " · ".join(x for x in (step["last_action"], step["last_message"]) if x)
        if said:
            click.echo(f"    {said[:200]}")
    if activity["wait"] and not waiting_shown:
        click.echo(f"  {wait_text(activity['wait'])}")
    gate = activity["gate"]
    if gate is not None:
        was = f"{gate['previous_failing']} → " if gate["previous_failing"] else ""
        click.echo("  last gate: " + ("passed" if gate["passed"] else f"failing {was}{gate['failing']}"))


@click.command(short_help="Show one run, or every running one.")
@click.argument("run_ref", metavar="[RUN]", required=False)
@click.option("--json", "json_", is_flag=True, help="JSON output.")
@workdir_option
def status(run_ref: str | None, json_: bool, workdir: Path | None) -> int:
    """One run's status, iteration, cost, runner and state file; without RUN, every running run."""
    root = project_dir(workdir)
    ids = [find_run(root, run_ref).run_id] if run_ref else running_runs(root)
    infos = [run_status(root, run_id) for run_id in ids]
    if json_:
        click.echo(json.dumps(infos[0] if run_ref else infos, indent=2, default=str))
        return 0
    if not infos:
        click.echo("no run is running; `loope runs` lists them all")
    for info in infos:
        _print_status(info)
    return 0


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
