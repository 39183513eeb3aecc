"""``loope runs``: every run of the project, newest last."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from loope.cli.options import project_dir, workdir_option
from loope.control import effective_status


def age(started: str | None) -> str:
    if not started:
        return "?"
    try:
        then = datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return "?"
    seconds = max(0.0, time.time() - then)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def shown_status(data: dict[str, Any]) -> str:
    """The status, with ``running`` runs whose runner is gone shown as ``dead (resumable)``."""
    status = effective_status(data)
    return "dead (resumable)" if status == "dead" else status


def load_runs(workdir: Path) -> list[dict[str, Any]]:
    from loope.records.rundir import list_runs

    found = []
    for rundir in list_runs(workdir):
        try:
            data = json.loads((rundir.root / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found.append(data)
    return found


@click.command()
@workdir_option
@click.option("--json", "json_", is_flag=True, help="One JSON array of runs.")
def runs(workdir: Path | None, json_: bool) -> int:
    """List runs: id, status, iterations, cost, age."""
    found = load_runs(project_dir(workdir))
    rows = [
        {
            "run_id": r["run_id"],
            "status": shown_status(r),
            "iterations": r.get("iterations", 0),
            "max_iters": r.get("max_iters"),
            "cost_usd": r.get("totals", {}).get("cost_usd", 0.0),
            "started_at": r.get("started_at"),
            "age": age(r.get("started_at")),
            "goal": r.get("goal", ""),
        }
        for r in found
    ]
    if json_:
        click.echo(json.dumps(rows, indent=2))
        return 0
    if not rows:
        click.echo('no runs yet; start one with: loope run "<goal>"')
        return 0
    width = max(len(r["run_id"]) for r in rows)
    click.echo(f"{'RUN':<{width}}  {'STATUS':<16}  {'ITER':>5}  {'COST':>9}  {'AGE':>4}")
    for r in rows:
        iters = f"{r['iterations']}/{r['max_iters']}" if r["max_iters"] else str(r["iterations"])
        click.echo(f"{r['run_id']:<{width}}  {r['status']:<16}  {iters:>5}  ${r['cost_usd']:>8.4f}  {r['age']:>4}")
    return 0
