"""``loope branch RUN``: a finished run's commits on its branch (``loope/<run>``) in your repository."""

from __future__ import annotations

import click

from loope.cli.options import project_dir
from loope.errors import LoopeError
from loope.records.rundir import find_run
from loope.runners import effective_status
from loope.workspace.apply import check_record
from loope.workspace.run_branch import branch_run


@click.command(short_help="Put a run's commits on branch loope/<run> in your repository.")
@click.argument("run_ref", metavar="RUN")
def branch(run_ref: str) -> int:
    """Put RUN's commits on branch loope/<run> (an overlay run's, or a worktree run's again).

    Each commit is replayed on the commit you had checked out as the run started, with only the
    files the run changed: `git merge loope/<run>` brings the run's work and nothing else. Exit
    1 when the branch cannot be written (no commits, a checkout of it with uncommitted changes,
    commits on it the run did not make); 2 for a run that is unknown, running, or has no branch.
    """

    rundir = find_run(project_dir(None), run_ref)
    data = rundir.read_json("run.json")
    if effective_status(data, rundir.root) == "running":
        raise LoopeError(f"run {rundir.run_id} is still running; wait for it or `loope stop {rundir.run_id}`")
    record = rundir.record()
    check_record(record, rundir.root)
    name = rundir.read_json("spec.json").get("branch")
    done = branch_run(record, rundir.root, name if isinstance(name, str) and name else None)
    if done.previous == done.tip:
        up = f"branch {done.branch} is up to date: {done.commits} commit(s) of {record.run_id}, at {done.tip[:10]}"
        click.echo(up)
        return 0
    moved = f" (was {done.previous[:10]})" if done.previous else ""
    click.echo(f"branch {done.branch} at {done.tip[:10]}{moved}: {done.commits} commit(s) of {record.run_id}")
    if done.checkout is not None:
        click.echo(f"its checkout in {done.checkout} was brought along")
    click.echo(f"`git merge {done.branch}` takes them")
    return 0
