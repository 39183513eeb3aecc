"""``loope show RUN``: the report, the cumulative diff, run.json, or one step's records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from loope.cli.options import project_dir, workdir_option
from loope.errors import LoopeError
from loope.records.report import render
from loope.records.rundir import find_run
from loope.records.tails import tail_lines

TRANSCRIPT_LINES = 40


@click.command(short_help="Show a run's report, diff, run.json or one step.")
@click.argument("run_ref", metavar="RUN")
@click.option("--diff", "diff", is_flag=True, help="The cumulative diff of the run.")
@click.option("--json", "json_", is_flag=True, help="run.json as it is.")
@click.option("--step", "step", type=int, metavar="N", help="Step N's prompt, result and the end of its transcript.")
@click.option("--candidates", "candidates", is_flag=True, help="Every candidate of every raced iteration.")
@workdir_option
def show(run_ref: str, *, diff: bool, json_: bool, step: int | None, candidates: bool, workdir: Path | None) -> int:
    """Show RUN (an id or a unique prefix such as 0007); a running run shows what it has changed so far."""

    rundir = find_run(project_dir(workdir), run_ref)
    data = rundir.read_json("run.json")
    if candidates:
        rounds = data.get("rounds") or []
        click.echo(json.dumps(rounds, indent=2, ensure_ascii=False) if json_ else candidates_text(data).rstrip("\n"))
    elif step is not None:
        click.echo(step_text(rundir.root, step).rstrip("\n"))
    elif json_:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    elif diff:
        path = rundir / "changes.diff"
        if data.get("status") == "running" or not path.exists():
            text = _workspace(rundir).diff()
        else:
            text = path.read_text(encoding="utf-8")
        click.echo(text.rstrip("\n") if text.strip() else "(no changes)")
    else:
        if data.get("status") == "running":
            from loope.records.serial import to_data  # loads dataclasses: only for the changes

            data["changes"] = {"files": to_data(_workspace(rundir).changes())}
        click.echo(render(data).rstrip("\n"))
    return 0


def _workspace(rundir: Any) -> Any:
    """The run's workspace as it is now (a running run's changes so far)."""
    from loope.engine.resume import reopen_workspace  # loads the workspace layer and git

    return reopen_workspace(rundir.record().workspace)


def step_text(root: Path, number: int) -> str:
    """One step's records: what it was asked, what it answered (or printed), the end of its transcript."""

    found = sorted((root / "agents").glob(f"{number:02d}-*"))
    if not found:
        steps = sorted(p.name for p in (root / "agents").glob("*") if p.is_dir())
        known = ", ".join(s.split("-", 1)[0] for s in steps) or "none yet"
        raise LoopeError(f"run {root.name} has no step {number}; its steps: {known}")
    step_dir = found[0]
    parts = [f"# step {step_dir.name}"]
    for name, title in (("command.txt", "command"), ("prompt.md", "prompt"), ("result.md", "result")):
        path = step_dir / name
        if path.exists():
            parts += ["", f"## {title}", "", path.read_text(encoding="utf-8", errors="replace").rstrip()]
    logs = sorted(step_dir.glob("*.log"))
    for log in logs:
        parts += ["", f"## {log.name} (last {TRANSCRIPT_LINES} lines)", "", *tail_lines(log, TRANSCRIPT_LINES, 65536)]
    for name in ("transcript.jsonl", "events.jsonl"):
        path = step_dir / name
        if path.exists():
            parts += ["", f"## {name} (last {TRANSCRIPT_LINES} lines)", ""]
            parts += tail_lines(path, TRANSCRIPT_LINES, 65536)
            break
    if len(parts) == 1:
        parts.append("(nothing recorded yet)")
    return "\n".join(parts) + "\n"


def candidates_text(data: dict[str, Any]) -> str:
    """One line per candidate of each raced iteration: its place, checks, why it won or lost, how to land it."""
    rounds = data.get("rounds") or []
    if not rounds:
        return f"run {data['run_id']} raced no candidates (loope run --candidates N, or --implementer given twice)\n"
    short = str(data["run_id"]).split("-", 1)[0]
    lines = []
    for found in rounds:
        lines.append(f"iteration {found['iteration']}: candidate {found['winner']} won ({found.get('why')})")
        for c in found.get("candidates") or []:
            gate = {True: "gate passed", False: "gate failed", None: "no gate"}[c.get("gate_passed")]
            score = "" if c.get("score") is None else f", score {c['score']:g}"
            name = f"{found['iteration']}.{c['candidate']}"
            lines.append(
                f"  {c['rank']}. {name} {c['agent']}: {gate}{score}, {c.get('diff_lines', 0)} line(s) — {c['why']}"
            )
            if c.get("ref"):
                lines.append(f"     {c['ref']} · loope apply {short} --candidate {name}")
    return "\n".join(lines) + "\n"
