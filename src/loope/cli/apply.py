"""``loope apply RUN``: land a run's changes in its workdir, or in another checkout."""

from __future__ import annotations

from pathlib import Path

import click

from loope.cli.options import project_dir
from loope.errors import EXIT_FAILED, LoopeError
from loope.records import ledger
from loope.records.rundir import find_run
from loope.workspace import apply as landing
from loope.workspace.landing import commit_applied, landing_message


@click.command(short_help="Land a run's changes in the workdir (or another checkout).")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    help="Apply into this directory. [default: the run's workdir]",
)
@click.option("--delete", is_flag=True, help="Also delete the files the run deleted.")
@click.option("--force", is_flag=True, help="Overwrite files changed since the run started.")
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option("--commit", is_flag=True, help="Also commit the change on the current branch, as one commit.")
@click.option(
    "--candidate", metavar="N.I", help="Land candidate I of iteration N instead (loope show RUN --candidates)."
)
def apply(
    run_ref: str, workdir: Path | None, *, delete: bool, force: bool, dry_run: bool, commit: bool, candidate: str | None
) -> int:
    """Land RUN's changes: added and changed files, deletions only with --delete."""

    here = project_dir(None)
    if workdir is None:
        rundir = find_run(here, run_ref)
    else:
        try:
            rundir = find_run(here, run_ref)
        except LoopeError:
            rundir = find_run(project_dir(workdir), run_ref)
    record = rundir.record()
    landing.check_record(record, rundir.root)
    target = project_dir(workdir or record.workdir)
    if record.status == "running":
        raise LoopeError(f"run {record.run_id} is still running; wait for it or `loope stop {record.run_id}`")
    git, planned = landing.plan_run(record, target, delete=delete, force=force, candidate=candidate)
    if not planned:
        click.echo(f"run {record.run_id} changed no files; nothing to apply")
        return 0
    conflicts = [p for p in planned if p.conflict]
    click.echo("\n".join(item.line() for item in planned))  # one write: a line each is a syscall each
    if conflicts:
        raise LoopeError(
            f"{len(conflicts)} file(s) in {target} changed since the run started ({conflicts[0].path} first);"
            " nothing was applied; pass --force to overwrite them",
            exit_code=EXIT_FAILED,
        )
    if dry_run:
        click.echo("dry run: nothing was written")
        return 0
    landing.apply(git, target, planned)
    written = [p.path for p in planned if p.action in ("add", "update", "delete")]
    click.echo(f"applied {len(written)} file(s) from {record.run_id} to {target}")
    if record.stop_reason != "converged":
        click.echo(f"note: run {record.run_id} did not converge ({record.stop_reason}); review before you keep it")
    if commit and written:
        attempts = ledger.load(rundir / "ledger.jsonl")
        summary = attempts[-1].summary if attempts else ""
        sha = commit_applied(target, written, landing_message(record, summary))
        click.echo(f"committed {sha[:10]}: {landing_message(record, '').splitlines()[0]}")
    return 0
