"""``loope logs RUN [-f]``: a run's events as the live view or plain lines; ``-f`` follows it to its end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from loope.cli.options import output_options, project_dir, workdir_option
from loope.cli.options import view as make_view
from loope.records.rundir import find_run
from loope.records.tails import EventTail, OutputTail, follow
from loope.runners import runner_alive


@click.command(short_help="A run's events as the live view; -f follows a running one.")
@click.argument("run_ref", metavar="RUN")
@click.option("-f", "--follow", "follow_", is_flag=True, help="Follow a running run until it ends.")
@workdir_option
@output_options
def logs(run_ref: str, follow_: bool, workdir: Path | None, **output: Any) -> int:
    """RUN's events as the live view (or plain lines); with -f, follow it until it ends."""

    rundir = find_run(project_dir(workdir), run_ref)
    view = make_view(**output)
    source = EventTail(rundir / "events.jsonl")
    view.replaying = True  # the events so far are drawn at their own time, not now
    ended = False
    for event in source.read():
        view.show(event)
        ended = ended or event.get("type") == "run_finished"
    view.replaying = False
    if follow_ and not ended:
        output_tail = OutputTail(rundir.root)

        def new_output() -> None:
            """Lines of a running check's output as they arrive."""
            if lines := output_tail.read(list(view.view.running.values())):
                view.output(lines)

        view.resume()
        for event in follow(source, alive=_alive(rundir.root), on_idle=new_output):
            view.show(event)
    view.close()
    return 0


def _alive(root: Path) -> Callable[[], bool]:
    """Whether the run can still write events: marked running, and its runner alive (holding its lock).

    A detached run's lock passes from the process that prepared it to its background runner
    without ever being let go, so a run is never between runners.
    """

    def alive() -> bool:
        try:
            record = json.loads((root / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(record, dict) and record.get("status") == "running" and runner_alive(root)

    return alive
