"""``loope show RUN``: the report, the cumulative diff, or run.json."""

from __future__ import annotations

import json
from pathlib import Path

import click

from loope.cli.options import project_dir, workdir_option


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--diff", "diff", is_flag=True, help="The cumulative diff of the run.")
@click.option("--json", "json_", is_flag=True, help="run.json as it is.")
@workdir_option
def show(run_ref: str, diff: bool, json_: bool, workdir: Path | None) -> int:
    """Show RUN (an id or a unique prefix such as 0007)."""
    from loope.records.report import render
    from loope.records.rundir import find_run

    rundir = find_run(project_dir(workdir), run_ref)
    data = rundir.read_json("run.json")
    if json_:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    elif diff:
        path = rundir / "changes.diff"
        if data.get("status") == "running" or not path.exists():
            from loope.engine.resume import reopen_workspace

            text = reopen_workspace(rundir.record().workspace).diff()
        else:
            text = path.read_text(encoding="utf-8")
        click.echo(text.rstrip("\n") if text.strip() else "(no changes)")
    else:
        click.echo(render(data).rstrip("\n"))
    return 0
