"""``loope status``: one run, or every running one (apart from the control commands, which it need not build)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from loope.cli.options import project_dir, workdir_option
from loope.control import run_status, running_runs
from loope.records.rundir import find_run


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
