"""How a fleet shows: one line per loop (status, iteration, cost, last event) and the fleet's totals."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from loope.fleet.pool import FleetView, TaskView
from loope.ui.terminal import fancy_output


def task_line(task: TaskView) -> str:
    run = task.run_id or "-"
    iters = f"iteration {task.iteration}/{task.max_iters}" if task.max_iters else f"iteration {task.iteration}"
    line = f"{task.name:<16} {run[:28]:<28} {task.status:<15} {iters:<14} ${task.cost_usd:.4f}"
    if task.last_event and task.status == "running":
        line += f"  {task.last_event}"
    if task.error:
        line += f"  ({task.error[:120]})"
    return line.rstrip()


def totals_line(view: FleetView) -> str:
    budget = f" of ${view.max_cost:.2f}" if view.max_cost is not None else ""
    counts = (
        f"{view.count('running')} running, {view.count('pending')} pending, "
        f"{view.count('converged')} converged, {len(view.tasks)} in all"
    )
    return f"fleet {view.fleet_id} · {view.status} · {counts} · ${view.spent:.4f}{budget} · {view.elapsed_s:.0f}s"


def final_lines(view: FleetView) -> list[str]:
    lines = [totals_line(view)]
    if view.detail:
        lines.append(f"  {view.detail}")
    lines += [f"  {task_line(t)}" for t in view.tasks]
    if any(t.status == "converged" for t in view.tasks):
        lines.append("  land a loop with `loope apply RUN --workdir DIR` (each loop's run id and workdir above)")
    if any(t.status not in ("converged",) for t in view.tasks):
        lines.append(f"  pick up the rest with `loope fleet continue {view.fleet_id}`")
    return lines


class PlainFleetView:
    """A line whenever a loop changes (status, iteration, last event); the totals at the end."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self._seen: dict[str, tuple[Any, ...]] = {}

    def show(self, view: FleetView) -> None:
        for task in view.tasks:
            key = (task.run_id, task.status, task.iteration, task.last_event)
            if self._seen.get(task.name) != key:
                self._seen[task.name] = key
                print(task_line(task), file=self.stream, flush=True)

    def close(self, view: FleetView) -> None:
        print("\n".join(final_lines(view)), file=self.stream, flush=True)


class JsonFleetView:
    """The fleet as one JSON object a line, whenever anything in it changes; the last has ``final``."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self._last = ""

    def show(self, view: FleetView) -> None:
        data = view.to_dict()
        data.pop("elapsed_s")
        text = json.dumps(data, sort_keys=True)
        if text != self._last:
            self._last = text
            print(json.dumps({**view.to_dict(), "final": False}), file=self.stream, flush=True)

    def close(self, view: FleetView) -> None:
        print(json.dumps({**view.to_dict(), "final": True}), file=self.stream, flush=True)


class LiveFleetView:
    """A table redrawn in place on a terminal."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console()
        self.live = Live(console=self.console, auto_refresh=False, transient=True)
        self.live.start()

    def show(self, view: FleetView) -> None:
        from rich.table import Table

        table = Table(title=totals_line(view), title_justify="left", box=None, pad_edge=False)
        for column in ("task", "run", "status", "iteration", "cost", "last event"):
            table.add_column(column, no_wrap=True, overflow="ellipsis")
        for t in view.tasks:
            iters = f"{t.iteration}/{t.max_iters}" if t.max_iters else str(t.iteration)
            table.add_row(t.name, t.run_id or "-", t.status, iters, f"${t.cost_usd:.4f}", t.last_event)
        self.live.update(table, refresh=True)

    def close(self, view: FleetView) -> None:
        self.live.stop()
        self.console.print("\n".join(final_lines(view)), highlight=False, markup=False)


def fleet_display(*, json_: bool, plain: bool) -> Any:

    if json_:
        return JsonFleetView()
    if plain or not fancy_output("auto"):
        return PlainFleetView()
    return LiveFleetView()
