"""``loope runs``: every run of the project, newest last."""

from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime
from typing import Any

import click

from loope.errors import LoopeError
from loope.records.runfile import DamagedRecord, load_dir
from loope.root import project_root
from loope.runners import effective_status

# `loope runs` is run often and must start fast: it reads run.json files with os and json only
# (pathlib, pydantic and the record classes would double what it imports).
_RUN_ID = re.compile(r"^(\d{4,})-")


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


def shown_status(data: dict[str, Any], run_root: str) -> str:
    """The status, with ``running`` runs whose runner is gone shown as ``dead (resumable)``."""
    status = effective_status(data, run_root)
    return "dead (resumable)" if status == "dead" else status


def load_runs(workdir: str) -> list[dict[str, Any]]:
    """The run.json of every run of the project, oldest first.

    A run whose run.json is missing or damaged is ``{"run_id", "damaged": why}``: it is listed, and
    the others still are.
    """

    root = os.path.join(workdir, ".loope", "runs")
    try:
        names = [n for n in os.listdir(root) if _RUN_ID.match(n) and os.path.isdir(os.path.join(root, n))]
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in sorted(names, key=lambda n: (int(n.split("-", 1)[0]), n)):
        try:
            found.append(load_dir(os.path.join(root, name)))
        except DamagedRecord as exc:
            found.append({"run_id": name, "damaged": str(exc)[:300]})
        except OSError as exc:
            found.append({"run_id": name, "damaged": f"run.json: {exc.strerror or exc}"})
    return found


def _row(r: dict[str, Any], root: str) -> dict[str, Any]:
    if "damaged" in r:
        return {
            "run_id": r["run_id"],
            "status": "damaged",
            "damaged": r["damaged"],
            "iterations": None,
            "max_iters": None,
            "cost_usd": None,
            "started_at": None,
            "age": "?",
            "goal": None,
        }
    return {
        "run_id": r["run_id"],
        "status": shown_status(r, os.path.join(root, ".loope", "runs", r["run_id"])),
        "iterations": r.get("iterations", 0),
        "max_iters": r.get("max_iters"),
        "cost_usd": r.get("totals", {}).get("cost_usd", 0.0),
        "started_at": r.get("started_at"),
        "age": age(r.get("started_at")),
        "goal": r.get("goal", ""),
    }


@click.command(short_help="List runs: id, status, iterations, cost, age.")
@click.option("--workdir", type=click.Path(), default=None, help="The project directory. [default: .]")
@click.option("--json", "json_", is_flag=True, help="One JSON array of runs.")
def runs(workdir: str | None, json_: bool) -> int:
    """List runs: id, status, iterations, cost, age."""
    root = os.path.abspath(os.path.expanduser(workdir)) if workdir else project_root()
    if not os.path.isdir(root):
        raise LoopeError(f"workdir {root} does not exist or is not a directory; pass an existing --workdir")
    rows = [_row(r, root) for r in load_runs(root)]
    if json_:
        click.echo(json.dumps(rows, indent=2))
        return 0
    if not rows:
        click.echo('no runs yet; start one with: loope run "<goal>"')
        return 0
    width = max(len(r["run_id"]) for r in rows)
    click.echo(f"{'RUN':<{width}}  {'STATUS':<16}  {'ITER':>5}  {'COST':>9}  {'AGE':>4}")
    for r in rows:
        if r["status"] == "damaged":
            click.echo(f"{r['run_id']:<{width}}  {'damaged':<16}  run.json: {r['damaged']}")
            continue
        iters = f"{r['iterations']}/{r['max_iters']}" if r["max_iters"] else str(r["iterations"])
        click.echo(f"{r['run_id']:<{width}}  {r['status']:<16}  {iters:>5}  ${r['cost_usd']:>8.4f}  {r['age']:>4}")
    return 0
