"""What the dashboard shows, read from run directories: a reader of records and events, never an observer."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loope.engine.resume import reopen_workspace
from loope.errors import LoopeError
from loope.records.model import RunRecord
from loope.records.rundir import RUNS, RunDir, list_runs, state_file_of
from loope.records.runview import read_view
from loope.runners import effective_status
from loope.workspace.loopedir import outside_view

PAGE_BYTES = 64 * 1024
STEP_FILES = ("prompt.md", "result.md", "transcript.jsonl", "events.jsonl", "output.log", "command.txt", "changes.diff")


@dataclass(frozen=True)
class Project:
    """One project the server shows; ``key`` names it in URLs."""

    key: str
    root: Path

    def run(self, run_id: str) -> RunDir | None:
        """The run ``run_id`` of this project; None for a name that is not one of its runs."""
        rundir = RunDir(self.root / RUNS / run_id)
        valid = run_id in {r.run_id for r in list_runs(self.root)}
        return rundir if valid else None


def projects(roots: list[Path]) -> list[Project]:
    return [Project(str(i), root) for i, root in enumerate(roots)]


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run_row(project: Project, rundir: RunDir) -> dict[str, Any]:
    """A run as the runs list shows it."""
    record = _json(rundir / "run.json")
    totals = record.get("totals") if isinstance(record.get("totals"), dict) else {}
    status = effective_status(record, rundir.root) if record else "damaged"
    return {
        "project": project.key,
        "project_dir": str(project.root),
        "id": rundir.run_id,
        "goal": str(record.get("goal") or ""),
        "status": status,
        "stop_reason": record.get("stop_reason"),
        "iterations": record.get("iterations", 0),
        "max_iters": record.get("max_iters"),
        "cost_usd": (totals or {}).get("cost_usd", 0.0),
        "started_at": record.get("started_at"),
        "finished_at": record.get("finished_at"),
        "live": status == "running",
        "url": f"/runs/{project.key}/{rundir.run_id}",
    }


def runs(all_projects: list[Project]) -> list[dict[str, Any]]:
    """Every run of every project, newest first."""
    rows = [run_row(p, r) for p in all_projects for r in list_runs(p.root)]
    return sorted(rows, key=lambda row: str(row.get("started_at") or ""), reverse=True)


def fleets(all_projects: list[Project]) -> list[dict[str, Any]]:
    """Every project's recent fleets; a loop links to its run when its workdir is one of the projects shown."""
    from loope.fleet.pool import recent_fleets  # loads the store (sqlite), only for the fleets

    shown = {str(p.root.resolve()): p for p in all_projects}
    found = []
    for project in all_projects:
        for fleet in recent_fleets(project.root):
            for loop in fleet["loops"]:
                home = shown.get(str(Path(loop.pop("workdir")).resolve()))
                loop["url"] = f"/runs/{home.key}/{loop['loop_id']}" if home and loop["loop_id"] else None
            found.append({"project": project.key, "project_dir": str(project.root), **fleet})
    return found


def runs_stamp(all_projects: list[Project]) -> tuple[Any, ...]:
    """Changes whenever a run starts, moves on or ends (cheap: directory listings and file stats)."""
    stamp: list[Any] = []
    for project in all_projects:
        for name in ("loope.db", "loope.db-wal"):  # fleets move on in the store
            try:
                stamp.append((name, os.stat(project.root / ".loope" / name).st_mtime_ns))
            except OSError:
                stamp.append((name, None))
        for rundir in list_runs(project.root):
            try:
                stamp.append((rundir.run_id, os.stat(rundir / "run.json").st_mtime_ns))
            except OSError:
                stamp.append((rundir.run_id, None))
    return tuple(stamp)


def run_detail(project: Project, rundir: RunDir) -> dict[str, Any]:
    """Everything the run page draws: the record, the folded events, the state file, the metric."""

    record = _json(rundir / "run.json")
    spec = _json(rundir / "spec.json")
    view, offset = read_view(rundir / "events.jsonl")
    workspace: dict[str, Any] = record["workspace"] if isinstance(record.get("workspace"), dict) else {}
    state_path = state_file_of(rundir.root, workspace)
    state = _read_text(outside_view(state_path)) if state_path is not None else None
    steps = sorted(p.name for p in (rundir / "agents").glob("*") if p.is_dir()) if (rundir / "agents").is_dir() else []
    return {
        **run_row(project, rundir),
        "record": record,
        "view": view.to_dict(),
        "events_offset": offset,
        "state_file": state,
        "step_dirs": steps,
        "metric": {
            "enabled": bool(spec.get("metric_cmd")),
            "direction": spec.get("direction"),
            "target": spec.get("target"),
            "baseline": record.get("baseline"),
            "best": record.get("best"),
            "attempts": _attempts(rundir, view.attempts),
        },
        "ledger": _ledger(rundir),
    }


def _attempts(rundir: RunDir, folded: list[Any]) -> list[dict[str, Any]]:
    """Score per attempt, from the runner-owned score.log (every attempt, kept or reverted)."""
    out = []
    try:
        lines = (rundir / "score.log").read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    for line in lines:
        parts = line.split("\t")
        if len(parts) < 4 or not parts[1].isdigit():
            continue
        try:
            score = float(parts[2]) if parts[2] else None
        except ValueError:
            score = None
        out.append({"iteration": int(parts[1]), "score": score, "verdict": parts[3]})
    if not out:  # no score.log yet: what the events said
        out = [{"iteration": a.iteration, "score": a.score, "verdict": a.verdict} for a in folded]
    return out


def _ledger(rundir: RunDir) -> list[dict[str, Any]]:
    try:
        lines = (rundir / "ledger.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def _read_text(path: Path, limit: int = PAGE_BYTES) -> str | None:
    try:
        with path.open("rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def step_file(rundir: RunDir, step_dir: str, name: str, offset: int, limit: int = PAGE_BYTES) -> dict[str, Any] | None:
    """One page of a step's file: ``limit`` bytes from ``offset``; None for a step or file that is not there."""
    if name not in STEP_FILES and not (name.startswith("metric") and name.endswith(".log")):
        return None
    if step_dir not in {p.name for p in (rundir / "agents").glob("*")} or "/" in name:
        return None
    path = rundir / "agents" / step_dir / name
    try:
        with path.open("rb") as handle:
            total = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, min(offset, total)))
            data = handle.read(limit)
    except OSError:
        return None
    start = max(0, min(offset, total))
    return {
        "name": name,
        "text": data.decode("utf-8", "replace"),
        "offset": start,
        "next_offset": start + len(data) if start + len(data) < total else None,
        "total": total,
    }


def step_files(rundir: RunDir, step_dir: str) -> list[str]:
    """The files of one step that the page can show."""
    folder = rundir / "agents" / step_dir
    if step_dir not in {p.name for p in (rundir / "agents").glob("*")}:
        return []
    names = [p.name for p in folder.iterdir() if p.name in STEP_FILES or p.name.startswith("metric")]
    return sorted(names, key=lambda n: (STEP_FILES.index(n) if n in STEP_FILES else len(STEP_FILES), n))


def diff(rundir: RunDir) -> str:
    """The cumulative diff: changes.diff of a finished run, the workspace's diff of a running one."""
    record = _json(rundir / "run.json")
    path = rundir / "changes.diff"
    if record.get("status") != "running" and path.exists():
        return path.read_text(encoding="utf-8", errors="replace")

    try:
        return reopen_workspace(RunRecord.from_dict(record).workspace).diff()
    except (LoopeError, KeyError, TypeError, ValueError):
        return ""
