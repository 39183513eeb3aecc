"""``loope init``: set a project up for verified loops."""

from __future__ import annotations

from pathlib import Path

import click

from loope.cli.options import project_dir, workdir_option
from loope.scaffold import InitOptions, init_project


@click.command(short_help="Set up loope.toml and a program for verified loops.")
@click.option("--goal", help="What the loop should achieve.")
@click.option("--editable", multiple=True, metavar="GLOB", help="Paths the agent may change (repeatable).")
@click.option("--protect", multiple=True, metavar="GLOB", help="Paths the agent may not change (repeatable).")
@click.option(
    "--max-attempts", "--max-iters", "max_attempts", type=int, default=10, show_default=True, help="Attempts at most."
)
@click.option(
    "--metric", "--metric-cmd", "metric", metavar="CMD", help="A command whose last printed number is the score."
)
@click.option("--direction", metavar="lower|higher", help="Which scores are better.")
@click.option("--verify-cmd", metavar="CMD", help="The gate (default: detected from the toolchain).")
@click.option("--hooks", metavar="claude|kiro", help="Also wire the gate into an agent's own session.")
@click.option("--force", is_flag=True, help="Overwrite loope.toml and .loope/program.md.")
@workdir_option
def init(
    *,
    workdir: Path | None,
    goal: str | None,
    editable: tuple[str, ...],
    protect: tuple[str, ...],
    max_attempts: int,
    metric: str | None,
    direction: str | None,
    verify_cmd: str | None,
    hooks: str | None,
    force: bool,
) -> int:
    """Write loope.toml and .loope/program.md; afterwards `loope run` with no arguments runs that program."""
    root = project_dir(workdir)
    options = InitOptions(
        goal, list(editable), list(protect), max_attempts, metric, direction, verify_cmd, hooks, force
    )
    result = init_project(root, options)
    for path in result.written:
        click.echo(f"wrote  {path.relative_to(root)}")
    for path in result.merged:
        click.echo(f"merged {path.relative_to(root)}")
    for path in result.kept:
        click.echo(f"kept   {path.relative_to(root)} (it exists; --force overwrites it)")
    click.echo(f"gate ({result.toolchain}): {result.gate}")
    if result.toolchain == "none":
        click.echo("no toolchain found: the gate fails until you set one with --verify-cmd", err=True)
    click.echo("next: loope run")
    return 0
