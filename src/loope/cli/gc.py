"""``loope rm`` and ``loope gc``: remove finished runs (their worktrees, branches, refs and records)."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from loope.cli.options import project_dir, workdir_option
from loope.control import open_store
from loope.enums import StopReason
from loope.errors import LoopeError
from loope.records.model import RunRecord
from loope.records.rundir import RUNS, RunDir, find_run, list_runs
from loope.runners import effective_status
from loope.text import parse_duration
from loope.workspace.cleanup import remove_run
from loope.workspace.overlay import prune


def _remove(root: Path, run_ids: list[str], *, dry_run: bool) -> int:

    store = open_store(root) if not dry_run else None
    verb = "would remove" if dry_run else "removed"
    for run_id in run_ids:
        rundir = RunDir(root / RUNS / run_id)
        data = rundir.read_json("run.json", whole=True)  # checked: the record is acted on
        if effective_status(data, rundir.root) == "running":
            click.echo(f"{run_id}: kept, it is running (stop it first with `loope stop {run_id}`)")
            continue
        result = remove_run(RunRecord.from_dict(data), rundir.root, dry_run=dry_run)
        click.echo(f"{run_id}: {verb} " + ", ".join(result.removed))
        for kept in result.kept:
            click.echo(f"{run_id}: kept {kept}")
        if store is not None:
            store.delete_run(run_id)
    _prune_snapshots(root, dry_run=dry_run)
    return 0


def _prune_snapshots(root: Path, *, dry_run: bool) -> None:
    """Overlay workspaces' snapshots that no run left stands on go with the runs."""

    for name in prune(root, dry_run=dry_run):
        short = "+".join(part[:12] for part in name.split("-"))  # a base, or a base and the thin layer above it
        click.echo(f"snapshot {short}: {'would remove' if dry_run else 'removed'} (no run uses it)")


@click.command(short_help="Remove finished runs: records, worktrees, branches, refs.")
@click.argument("run_refs", metavar="RUN...", nargs=-1, required=True)
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@workdir_option
def rm(run_refs: tuple[str, ...], dry_run: bool, workdir: Path | None) -> int:
    """Remove finished runs: run directory, worktree, branch (unless it holds others' commits), refs."""

    root = project_dir(workdir)
    ids = list(dict.fromkeys(find_run(root, ref).run_id for ref in run_refs))
    return _remove(root, ids, dry_run=dry_run)


@click.command(short_help="Remove finished runs in bulk (--older-than, --keep, --status).")
@click.option("--older-than", metavar="DUR", help="Only runs that finished longer ago than this (14d, 12h).")
@click.option("--keep", type=int, metavar="N", help="Keep the N newest finished runs whatever their age.")
@click.option("--status", "statuses", metavar="S,...", help="Only runs that ended so (stalled,failed,...).")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@workdir_option
def gc(older_than: str | None, keep: int | None, statuses: str | None, dry_run: bool, workdir: Path | None) -> int:
    """Remove finished runs in bulk; running runs are never touched."""
    from loope.sandbox import reap

    root = project_dir(workdir)
    age = _duration(older_than) if older_than else None
    if keep is not None and keep < 0:
        raise LoopeError(f"--keep: must be 0 or more (got {keep})")
    wanted = {s.strip() for s in statuses.split(",") if s.strip()} if statuses else None
    reasons = [r.value for r in StopReason]
    if wanted and (unknown := wanted - set(reasons)):
        raise LoopeError(f"--status: unknown {', '.join(sorted(unknown))}; choose from {', '.join(reasons)}")
    finished: list[tuple[str, dict[str, Any]]] = []
    for rundir in list_runs(root):
        try:
            data = rundir.read_json("run.json")
        except LoopeError:
            continue
        if effective_status(data, rundir.root) not in ("running", "dead"):
            finished.append((rundir.run_id, data))
    candidates = finished[: max(0, len(finished) - keep)] if keep is not None else finished
    now = time.time()
    chosen = [
        run_id
        for run_id, data in candidates
        if (wanted is None or data.get("status") in wanted) and (age is None or now - _finished_at(data) >= age)
    ]
    if not dry_run and (swept := reap.sweep(reap.cgroup_base())):
        click.echo(f"removed {swept} step cgroup(s) left by runners that died")
    if not chosen:
        click.echo("nothing to remove")
        _prune_snapshots(root, dry_run=dry_run)
        return 0
    return _remove(root, chosen, dry_run=dry_run)


def _duration(text: str) -> float:

    days = text.strip().lower()
    if days.endswith("d") and days[:-1].replace(".", "", 1).isdigit():
        return float(days[:-1]) * 86400
    if days.endswith("w") and days[:-1].replace(".", "", 1).isdigit():
        return float(days[:-1]) * 7 * 86400
    return parse_duration(text, what="--older-than")


def _finished_at(data: dict[str, Any]) -> float:
    stamp = data.get("finished_at") or data.get("started_at")
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
